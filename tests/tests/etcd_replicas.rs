//! Three replicas of one root on a 3-member etcd cluster (`relay init
//! --join-root`), a small tree below them, and the leader killed with
//! SIGKILL five times:
//!
//! * a writer sends `kubectl create`s round-robin to every replica all
//!   along; every create acknowledged with success is there at the end;
//! * after each kill another replica leads, and a placement changed then
//!   reaches every cluster;
//! * a watch on one replica, itself restarted in between, resumed from the
//!   last resourceVersion it saw, gets every acknowledged create;
//! * a standby answers 503 for the tree (the leader answers it), and the
//!   root's node state in etcd is sealed;
//! * one etcd member killed changes nothing; two make every replica answer
//!   503 while the clusters keep what they run; with the quorum back the
//!   replicas recover by themselves.

use std::collections::BTreeSet;
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_testbed::etcd::EtcdCluster;
use relaymesh_tests::{
    audited, binary, connected_under, free_tcp_port, free_udp_port, kubectl, kubectl_cache_dir,
    run_ok, wait_for, web_image, web_workload, Mesh, RelayProcess,
};

const SETTLE: Duration = Duration::from_secs(120);

/// How many times the leader is killed.
const KILLS: usize = 5;

struct Replica {
    /// Its data directory's name in the mesh.
    name: String,
    api_port: u16,
    kubeconfig: PathBuf,
    process: Option<RelayProcess>,
}

/// The admin kubeconfig, pointed at the replica serving on `port`.
fn kubeconfig_for(mesh: &Mesh, name: &str, port: u16) -> anyhow::Result<PathBuf> {
    let admin = std::fs::read_to_string(mesh.kubeconfig())?;
    let from = format!("127.0.0.1:{}", mesh.api_port);
    anyhow::ensure!(admin.contains(&from), "the admin kubeconfig names {from}");
    let path = mesh.dir.path().join(format!("{name}.kubeconfig"));
    std::fs::write(&path, admin.replace(&from, &format!("127.0.0.1:{port}")))?;
    Ok(path)
}

/// The replica holding the leader key, by its API port.
fn leader(etcd: &EtcdCluster, replicas: &[Replica]) -> anyhow::Result<Option<usize>> {
    let connection = etcd.connect("/relaymesh/")?;
    let Some((value, _)) = connection.get_value(b"r/leader")? else {
        return Ok(None);
    };
    let value = String::from_utf8_lossy(&value).into_owned();
    Ok(replicas.iter().position(|replica| {
        replica.process.is_some() && value.starts_with(&format!("127.0.0.1:{}/", replica.api_port))
    }))
}

/// What `read` answers through the first running replica that answers.
fn through_any_replica<T>(
    replicas: &[Replica],
    read: impl Fn(&std::path::Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    wait_for("a replica that answers", SETTLE, || {
        for replica in replicas.iter().filter(|replica| replica.process.is_some()) {
            if let Ok(answer) = read(&replica.kubeconfig) {
                return Ok(Some(answer));
            }
        }
        Ok(None)
    })
}

/// `kubectl apply` of `yaml` through the first replica that takes it.
fn apply_anywhere(replicas: &[Replica], yaml: &str) -> anyhow::Result<()> {
    through_any_replica(replicas, |kubeconfig| {
        relaymesh_tests::kubectl_ok(
            kubeconfig,
            &["apply", "-f", "-", "--request-timeout", "10s"],
            Some(yaml),
        )
        .map(drop)
    })
}

/// Creates `ConfigMap`s `cm-N` in `writes`, round-robin through the
/// replicas, until `stop`; the numbers acknowledged with success.
fn writer(kubeconfigs: Vec<PathBuf>, stop: Arc<AtomicBool>) -> Vec<usize> {
    let mut acknowledged = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let kubeconfig = &kubeconfigs[n % kubeconfigs.len()];
        let name = format!("cm-{n}");
        let done = kubectl(
            kubeconfig,
            &[
                "create",
                "configmap",
                &name,
                "-n",
                "writes",
                "--from-literal=n=1",
                "--request-timeout",
                "10s",
            ],
            None,
        )
        .is_ok_and(|output| output.status.success());
        if done {
            acknowledged.push(n);
        }
        n += 1;
    }
    acknowledged
}

/// Watches ConfigMaps in `writes` through `kubeconfig` from `version`,
/// resuming from the last version seen whenever the stream ends (the
/// replica restarted), until `stop`; every name added.
fn watcher(
    kubeconfig: PathBuf,
    mut version: String,
    stop: Arc<AtomicBool>,
    added: Arc<Mutex<BTreeSet<String>>>,
    resumed: Arc<Mutex<usize>>,
) -> anyhow::Result<()> {
    let cache = kubectl_cache_dir(&kubeconfig)?;
    while !stop.load(Ordering::Relaxed) {
        let path = format!(
            "/api/v1/namespaces/writes/configmaps?watch=1&resourceVersion={version}&timeoutSeconds=5"
        );
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(&cache)
            .args(["get", "--raw", &path])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().context("kubectl's stdout")?;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            anyhow::ensure!(
                event["type"] != "ERROR",
                "the watch from {version} failed: {event}"
            );
            if let Some(seen) = event["object"]["metadata"]["resourceVersion"].as_str() {
                version = seen.to_string();
            }
            if event["type"] == "ADDED" {
                if let Some(name) = event["object"]["metadata"]["name"].as_str() {
                    added
                        .lock()
                        .map_err(|_| anyhow::anyhow!("poisoned"))?
                        .insert(name.to_string());
                }
            }
        }
        let status = child.wait()?;
        if !status.success() {
            *resumed.lock().map_err(|_| anyhow::anyhow!("poisoned"))? += 1;
            // The replica is down: try again (it comes back).
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}

fn join_replica(mesh: &Mesh, name: &str, endpoints: &str, listen: &str) -> anyhow::Result<u16> {
    let api_port = free_tcp_port()?;
    run_ok(
        Command::new(binary("relay")?)
            .arg("init")
            .arg("--join-root")
            .arg("--secrets-key")
            .arg(mesh.data_dir("root").join("secrets.key"))
            .arg("--data-dir")
            .arg(mesh.data_dir(name))
            .args(["--listen", listen])
            .args(["--api-listen", &format!("127.0.0.1:{api_port}")])
            .args(["--store", "etcd", "--etcd-endpoints", endpoints]),
    )?;
    Ok(api_port)
}

fn names(set: &BTreeSet<String>) -> Vec<&str> {
    set.iter().map(String::as_str).collect()
}

#[test]
fn three_root_replicas_lose_nothing_acknowledged_through_five_leader_kills() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let etcd_dir = tempfile::tempdir()?;
    let mut etcd = EtcdCluster::start(etcd_dir.path(), 3)?;
    let endpoints = etcd.endpoints().join(",");
    // Every replica's mesh address is advertised from the start, so the
    // children know them all.
    let listens: Vec<String> = (0..3)
        .map(|_| free_udp_port().map(|port| format!("127.0.0.1:{port}")))
        .collect::<Result<_, _>>()?;
    let mut init = vec!["--store", "etcd", "--etcd-endpoints", &endpoints];
    for listen in &listens {
        init.extend(["--advertise", listen.as_str()]);
    }
    let (mesh, first) = Mesh::init_full_listening(&init, &[], &listens[0])?;
    let mut replicas = vec![Replica {
        name: "root".into(),
        api_port: mesh.api_port,
        kubeconfig: mesh.kubeconfig(),
        process: Some(first),
    }];
    for (index, name) in ["root-b", "root-c"].into_iter().enumerate() {
        let api_port = join_replica(&mesh, name, &endpoints, &listens[index + 1])?;
        replicas.push(Replica {
            name: name.into(),
            api_port,
            kubeconfig: kubeconfig_for(&mesh, name, api_port)?,
            process: Some(mesh.start(name)?),
        });
    }

    // A standby serves the objects but not the tree.
    wait_for("the standbys' APIs", SETTLE, || {
        for replica in &replicas[1..] {
            let output = kubectl(&replica.kubeconfig, &["get", "namespaces"], None)?;
            if !output.status.success() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| mesh.logs())?;
    let output = kubectl(&replicas[1].kubeconfig, &["get", "clusters"], None)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a standby served the tree");
    assert!(stderr.contains("standby"), "kubectl said: {stderr}");

    // The root's node state is in etcd, sealed: its identity's key never
    // shows in plaintext.
    let connection = etcd.connect("/relaymesh/")?;
    let (checkpoint, _) = connection.range(b"r/c/", None)?;
    assert!(!checkpoint.is_empty(), "no checkpoint of the root's node");
    for (key, value, _) in &checkpoint {
        assert!(
            relaymesh_protocol::codec::decode::<Vec<relaymesh_node::store::journal::Op>>(value)
                .is_err(),
            "{} is in etcd in plaintext",
            String::from_utf8_lossy(key)
        );
    }

    // A small tree: a relay with an agent, and an agent under the root.
    let mut clusters = Vec::new();
    for name in ["edge-1", "edge-2"] {
        clusters.push(runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?);
    }
    let _relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let _edge1 = mesh.add_agent_for("edge-1", "eu", "region=eu", clusters[0].kubeconfig())?;
    let _edge2 = mesh.add_agent_for("edge-2", "root", "region=us", clusters[1].kubeconfig())?;
    wait_for("the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "edge-1", "eu") && connected_under(&tree, "edge-2", "root"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;
    let everywhere = "{names: [edge-1, edge-2]}";
    let place = |replicas: &[Replica], image: &str| -> anyhow::Result<()> {
        apply_anywhere(replicas, &web_workload(image, 1, everywhere, ""))?;
        for cluster in &clusters {
            wait_for(&format!("{image} on {}", cluster.name()), SETTLE, || {
                Ok((web_image(cluster.kubeconfig())?.as_deref() == Some(image)).then_some(()))
            })
            .with_context(|| mesh.logs())?;
        }
        Ok(())
    };
    place(&replicas, "nginx:1.0")?;

    apply_anywhere(
        &replicas,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: writes}\n",
    )?;
    let version = relaymesh_tests::kubectl_ok(
        &replicas[2].kubeconfig,
        &[
            "get",
            "configmaps",
            "-n",
            "writes",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        None,
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let watch_stop = Arc::new(AtomicBool::new(false));
    let added = Arc::new(Mutex::new(BTreeSet::new()));
    let resumed = Arc::new(Mutex::new(0));
    let watching = {
        let (kubeconfig, stop, added, resumed) = (
            replicas[2].kubeconfig.clone(),
            watch_stop.clone(),
            added.clone(),
            resumed.clone(),
        );
        std::thread::spawn(move || watcher(kubeconfig, version, stop, added, resumed))
    };
    let writing = {
        let kubeconfigs = replicas
            .iter()
            .map(|replica| replica.kubeconfig.clone())
            .collect();
        let stop = stop.clone();
        std::thread::spawn(move || writer(kubeconfigs, stop))
    };

    for kill in 1..=KILLS {
        let leading = wait_for("a leader", SETTLE, || leader(&etcd, &replicas))?;
        // The watched replica restarts once, as a standby, in between.
        if kill == 2 && leading != 2 {
            if let Some(mut process) = replicas[2].process.take() {
                process.stop()?;
            }
            replicas[2].process = Some(mesh.start(&replicas[2].name)?);
        }
        if let Some(mut process) = replicas[leading].process.take() {
            process.kill()?;
        }
        let next = wait_for("another leader", SETTLE, || leader(&etcd, &replicas))
            .with_context(|| mesh.logs())?;
        assert_ne!(next, leading);
        eprintln!(
            "{}",
            format_args!(
                "kill {kill}: {} led, {} leads now",
                replicas[leading].name, replicas[next].name
            )
        );
        place(&replicas, &format!("nginx:1.{kill}"))?;
        replicas[leading].process = Some(mesh.start(&replicas[leading].name)?);
    }

    stop.store(true, Ordering::Relaxed);
    let acknowledged = writing
        .join()
        .map_err(|_| anyhow::anyhow!("the writer panicked"))?;
    eprintln!(
        "{}",
        format_args!("{} creates acknowledged", acknowledged.len())
    );
    assert!(
        acknowledged.len() > 10,
        "few writes: {}",
        acknowledged.len()
    );
    let present: BTreeSet<String> = through_any_replica(&replicas, |kubeconfig| {
        relaymesh_tests::kubectl_ok(
            kubeconfig,
            &[
                "get",
                "configmaps",
                "-n",
                "writes",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            None,
        )
    })?
    .split_whitespace()
    .map(str::to_string)
    .collect();
    let lost: Vec<String> = acknowledged
        .iter()
        .map(|n| format!("cm-{n}"))
        .filter(|name| !present.contains(name))
        .collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");

    // The watch, resumed across its replica's restart, saw every one.
    let watched = wait_for("the watch to see every create", SETTLE, || {
        let seen = added.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        Ok(present.is_subset(&seen).then(|| seen.clone()))
    });
    watch_stop.store(true, Ordering::Relaxed);
    let watch_result = watching
        .join()
        .map_err(|_| anyhow::anyhow!("the watcher panicked"))?;
    watch_result?;
    let watched = watched.with_context(|| {
        let seen = added
            .lock()
            .map(|seen| names(&seen).join(" "))
            .unwrap_or_default();
        format!("present: {present:?}; watched: {seen}")
    })?;
    assert!(
        *resumed.lock().map_err(|_| anyhow::anyhow!("poisoned"))? > 0,
        "the watch never had to resume"
    );
    eprintln!(
        "{}",
        format_args!(
            "the watch saw {} creates, resumed {} times",
            watched.len(),
            resumed.lock().map_err(|_| anyhow::anyhow!("poisoned"))?
        )
    );
    assert!(watched.len() >= present.len());

    // One etcd member down changes nothing: a change still reaches every
    // cluster.
    etcd.kill(2)?;
    place(&replicas, "nginx:3.0")?;
    // Two down: every replica answers 503 with a message, never stale
    // data, and the clusters keep what they run.
    etcd.kill(1)?;
    for replica in &replicas {
        let output = kubectl(
            &replica.kubeconfig,
            &[
                "get",
                "configmaps",
                "-n",
                "writes",
                "--request-timeout",
                "30s",
            ],
            None,
        )?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "{} answered without quorum",
            replica.name
        );
        assert!(
            stderr.contains("storage unavailable") || stderr.contains("ServiceUnavailable"),
            "{}: kubectl said: {stderr}",
            replica.name
        );
    }
    for cluster in &clusters {
        assert_eq!(
            web_image(cluster.kubeconfig())?.as_deref(),
            Some("nginx:3.0")
        );
    }
    // The quorum back: the replicas recover by themselves, and the next
    // change reaches every cluster.
    etcd.restart(1)?;
    etcd.restart(2)?;
    etcd.wait_healthy()?;
    place(&replicas, "nginx:3.1")?;

    // Nothing was applied twice: each cluster was asked to change shop/web
    // once per image placed (1.0, one per kill, 3.0, 3.1), however many
    // leaders it reconnected to.
    for cluster in &clusters {
        let writes: Vec<_> = audited(cluster.audit_log())?
            .into_iter()
            .filter(|line| {
                line["path"]
                    .as_str()
                    .is_some_and(|path| path.contains("/namespaces/shop/deployments/web"))
            })
            .collect();
        assert_eq!(
            writes.len(),
            KILLS + 3,
            "{} was asked to change shop/web: {writes:?}",
            cluster.name()
        );
    }
    Ok(())
}
