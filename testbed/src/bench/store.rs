//! `testbed bench store`: the root API's write rate and latency with its
//! objects in sled (the embedded default) and on a local etcd cluster
//! (`relay init --store etcd`), through the real API over HTTPS.
//!
//! For each backend it starts a root (`relay init`, `relay run`) and, for
//! etcd, a cluster of real `etcd` members on loopback, then has several
//! writers create ConfigMaps as fast as the API acknowledges them. It
//! counts the acknowledged writes per second and the latency of each
//! (median, p99), and checks afterwards that the API lists every one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, PostParams};
use kube::Api;
use serde_json::json;

use super::report::{Figure, Report};
use crate::etcd::EtcdCluster;
use crate::ports;

/// What to run.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Writes per backend.
    pub writes: usize,
    /// Writers sending them at once.
    pub writers: usize,
    /// Members of the etcd cluster.
    pub etcd_members: usize,
    /// Where the roots and etcd keep their data (emptied first).
    pub dir: PathBuf,
    /// Where the `relay` binary is.
    pub bin_dir: PathBuf,
}

/// One backend's run.
#[derive(Debug, Clone, Copy)]
struct Measured {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Runs the benchmark on both backends; the report.
pub fn run(options: &StoreOptions) -> anyhow::Result<Report> {
    let runtime = tokio::runtime::Runtime::new()?;
    let sled = measure(options, false, &runtime)?;
    let etcd = measure(options, true, &runtime)?;
    let mut report = Report::new(
        "store",
        json!({
            "writes": options.writes,
            "writers": options.writers,
            "etcdMembers": options.etcd_members,
        }),
    );
    report.description = format!(
        "The root's API over HTTPS: {} writers create {} ConfigMaps, with the objects in sled \
         and on a {}-member etcd cluster on the same machine (loopback, one disk).",
        options.writers, options.writes, options.etcd_members
    );
    for (name, measured) in [("sled", sled), ("etcd", etcd)] {
        report.figure(Figure::new(
            format!("{name}: acknowledged writes"),
            measured.per_second,
            "per s",
        ));
        report.figure(Figure::new(
            format!("{name}: write latency, median"),
            measured.p50_ms,
            "ms",
        ));
        report.figure(Figure::new(
            format!("{name}: write latency, p99"),
            measured.p99_ms,
            "ms",
        ));
    }
    report.figure(Figure::new(
        "etcd / sled, writes per second",
        etcd.per_second / sled.per_second.max(f64::MIN_POSITIVE),
        "ratio",
    ));
    Ok(report)
}

/// A root on one backend, driven by the writers.
fn measure(
    options: &StoreOptions,
    on_etcd: bool,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Measured> {
    let name = if on_etcd { "etcd" } else { "sled" };
    let dir = options.dir.join(format!("store-{name}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    let etcd = on_etcd
        .then(|| EtcdCluster::start(&dir.join("etcd"), options.etcd_members))
        .transpose()?;
    let data_dir = dir.join("root");
    let relay = options.bin_dir.join("relay");
    let mut init = Command::new(&relay);
    init.arg("init")
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--listen", &format!("127.0.0.1:{}", ports::udp()?)])
        .args(["--api-listen", &format!("127.0.0.1:{}", ports::tcp()?)]);
    if let Some(etcd) = &etcd {
        init.args([
            "--store",
            "etcd",
            "--etcd-endpoints",
            &etcd.endpoints().join(","),
        ]);
    }
    let output = init.output().context("relay init")?;
    if !output.status.success() {
        bail!("relay init: {}", String::from_utf8_lossy(&output.stderr));
    }
    let log = std::fs::File::create(dir.join("root.log"))?;
    let root = Root(
        Command::new(&relay)
            .arg("run")
            .arg("--data-dir")
            .arg(&data_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("relay run")?,
    );
    let measured = runtime.block_on(drive(&data_dir.join("admin.kubeconfig"), options));
    drop(root);
    measured.with_context(|| format!("on {name} (logs in {})", dir.display()))
}

/// The root's process, killed when dropped.
struct Root(Child);

impl Drop for Root {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

async fn drive(kubeconfig: &Path, options: &StoreOptions) -> anyhow::Result<Measured> {
    let client = crate::up::kube_client(kubeconfig).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench"}}))?;
    loop {
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => break,
            Err(error) if Instant::now() < deadline => {
                tracing::debug!(%error, "waiting for the root's API");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => return Err(error).context("the root's API did not answer"),
        }
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "bench");
    let started = Instant::now();
    let mut writers = Vec::new();
    for writer in 0..options.writers {
        let config_maps = config_maps.clone();
        let share: Vec<usize> = (writer..options.writes).step_by(options.writers).collect();
        writers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(share.len());
            for index in share {
                let object: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{index}")},
                    "data": {"index": index.to_string(), "payload": "x".repeat(512)},
                }))?;
                let sent = Instant::now();
                config_maps.create(&PostParams::default(), &object).await?;
                latencies.push(sent.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(options.writes);
    for writer in writers {
        latencies.extend(writer.await??);
    }
    let elapsed = started.elapsed();
    let listed = config_maps.list(&ListParams::default()).await?.items.len();
    anyhow::ensure!(
        listed == options.writes,
        "the API lists {listed} ConfigMaps after {} acknowledged writes",
        options.writes
    );
    latencies.sort();
    let at = |share: f64| {
        let index = ((latencies.len() as f64 * share).ceil() as usize).clamp(1, latencies.len());
        latencies[index - 1].as_secs_f64() * 1000.0
    };
    Ok(Measured {
        per_second: options.writes as f64 / elapsed.as_secs_f64(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    })
}
