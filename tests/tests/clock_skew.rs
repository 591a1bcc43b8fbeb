//! Clock skew of ±10 minutes between nodes breaks nothing: a relay whose
//! wall clock is 10 minutes ahead of the root's joins, and an edge agent 10
//! minutes behind the root (20 behind its parent) joins below it; both keep
//! mutual-TLS links, a Placement's bundle is applied on the agent's
//! simulated cluster and the root's status counts it.
//!
//! The clocks are faked with libfaketime (Debian's `faketime`, which
//! `.ci/run` installs): `LD_PRELOAD` of `libfaketime.so.1` with `FAKETIME`
//! moves what `clock_gettime(CLOCK_REALTIME)` answers, which is where
//! `SystemTime::now()` and so rustls's certificate checks read the time.
//! `FAKETIME_DONT_FAKE_MONOTONIC=1` leaves the monotonic clock alone, so
//! tokio's timers, quinn's timeouts and backoff run at the real pace.
//! Each skewed node's own log timestamps show the skew was in force.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{binary, connected_under, kubectl, run_ok, wait_for, web_image, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);
/// Where Debian's `faketime` package puts the library.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// The skew, either way.
const SKEW: Duration = Duration::from_secs(10 * 60);

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {labelSelector: {matchLabels: {region: eu}}}
"#;

#[test]
fn ten_minutes_of_skew_either_way_breaks_nothing() -> anyhow::Result<()> {
    let library = libfaketime()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();

    // Tokens of an hour: a token is checked by the admitting relay's clock,
    // and one shorter than the skew would be expired on arrival
    // (docs/reliability.md).
    mesh.set_env("ahead", &faked(&library, "+10m"))?;
    let token = mesh.token("relay", "ahead", Some("root"), "1h")?;
    let joined = mesh.join("ahead", &token)?;
    if !joined.status.success() {
        bail!("join of ahead: {}", String::from_utf8_lossy(&joined.stderr));
    }
    let started = SystemTime::now();
    let ahead = mesh.start("ahead")?;
    wait_for("ahead in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "ahead", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let ahead_clock = first_log_time(&ahead.log)?;
    assert!(
        ahead_clock >= started + SKEW - Duration::from_secs(60),
        "ahead's log says its clock runs 10 min ahead"
    );

    mesh.set_env("edge-1", &faked(&library, "-10m"))?;
    let token = mesh.token("agent", "edge-1", Some("ahead"), "1h")?;
    run_ok(
        mesh.command("edge-agent", "edge-1")?
            .arg("join")
            .arg("--data-dir")
            .arg(mesh.data_dir("edge-1"))
            .args([
                "--name",
                "edge-1",
                "--token",
                &token,
                "--labels",
                "region=eu",
            ])
            .arg("--kubeconfig")
            .arg(&kubeconfig),
    )?;
    let before_agent = SystemTime::now();
    let agent = mesh.start_agent("edge-1")?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "ahead").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let agent_clock = first_log_time(&agent.log)?;
    assert!(
        agent_clock + SKEW - Duration::from_secs(60) <= SystemTime::now()
            && agent_clock + SKEW + Duration::from_secs(60) >= before_agent,
        "edge-1's log says its clock runs 10 min behind"
    );

    let applied = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(MANIFESTS))?;
    if !applied.status.success() {
        bail!(
            "kubectl apply: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
    wait_for("the Deployment in edge-1's cluster", SETTLE, || {
        Ok((web_image(&kubeconfig)?.as_deref() == Some("nginx:1.27")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("the root's status of edge-1", SETTLE, || {
        let clusters = placement_status(&mesh.kubeconfig())?;
        let done = count(&clusters, "selected") == 1
            && count(&clusters, "applied") + count(&clusters, "ready") == 1;
        Ok(done.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    Ok(())
}

/// Debian's libfaketime, or an error saying how to install it.
fn libfaketime() -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(LIBFAKETIME);
    if !path.is_file() {
        bail!("{LIBFAKETIME} not found: install it with `apt-get install faketime`");
    }
    // The relay binaries are built before any clock is faked.
    binary("relay")?;
    Ok(path)
}

/// The environment of a process whose wall clock is off by `offset`
/// (`+10m`), its monotonic clock left alone.
fn faked<'a>(library: &'a Path, offset: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("LD_PRELOAD", library.to_str().unwrap_or(LIBFAKETIME)),
        ("FAKETIME", offset),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
}

/// The wall-clock time a node's first log line carries (its own clock).
fn first_log_time(log: &Path) -> anyhow::Result<SystemTime> {
    let text = std::fs::read_to_string(log)?;
    let stamp = text
        .lines()
        .find_map(|line| line.split_whitespace().next())
        .with_context(|| format!("{} is empty", log.display()))?;
    humantime::parse_rfc3339(stamp)
        .with_context(|| format!("{}: first line starts with {stamp:?}", log.display()))
}

/// The root's `status.clusters` of Placement shop/web (`null` before the
/// first).
fn placement_status(root: &Path) -> anyhow::Result<Value> {
    let output = kubectl(
        root,
        &["get", "placements", "web", "-n", "shop", "-o", "json"],
        None,
    )?;
    if !output.status.success() {
        return Ok(Value::Null);
    }
    let placement: Value = serde_json::from_slice(&output.stdout)?;
    Ok(placement["status"]["clusters"].clone())
}

fn count(clusters: &Value, phase: &str) -> u64 {
    clusters[phase].as_u64().unwrap_or_default()
}
