//! An agent without a cluster says so: `edge-agent join` and `edge-agent
//! run` refuse to start without cluster access unless told `--no-cluster`,
//! and an agent whose cluster's API stops answering makes every placement
//! on it fail at the root with `ClusterUnreachable` instead of showing the
//! last state it knew, and its `Cluster` object says `reachable: false`
//! until the API answers again.
//!
//! Real processes: a root, edge agents, and a simulated cluster (the
//! apiserver crate in this test process) that the agent reaches through a
//! TCP gate in this process, closed mid-test and opened again.

use std::net::SocketAddr;
use std::process::Output;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, observe, wait_for, web_workload, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The refusal names every way to give the agent its cluster.
fn assert_names_the_ways(output: &Output) {
    let said = text(output);
    assert!(
        !output.status.success(),
        "started without a cluster: {said}"
    );
    for way in [
        "no cluster access configured",
        "--kubeconfig FILE",
        "--in-cluster",
        "--no-cluster",
    ] {
        assert!(said.contains(way), "the refusal names {way}: {said}");
    }
}

#[test]
fn an_agent_without_cluster_access_refuses_to_start_unless_told() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    mesh.wait_for_api()?;
    let token = mesh.token("agent", "edge-1", Some("root"), "10m")?;
    let join = |extra: &[&str]| -> anyhow::Result<Output> {
        Ok(mesh
            .command("edge-agent", "edge-1")?
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
            .args(extra)
            .output()?)
    };

    // Refused before the token is spent: the same token joins next.
    assert_names_the_ways(&join(&[])?);
    let joined = join(&["--no-cluster"])?;
    assert!(joined.status.success(), "{}", text(&joined));

    let run = |extra: &[&str]| -> anyhow::Result<Output> {
        Ok(mesh
            .command("edge-agent", "edge-1")?
            .arg("run")
            .arg("--data-dir")
            .arg(mesh.data_dir("edge-1"))
            .args(extra)
            .output()?)
    };
    assert_names_the_ways(&run(&[])?);
    let mut agent = mesh.start_agent_with("edge-1", &["--no-cluster"])?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    agent.stop()?;
    Ok(())
}

/// A TCP forwarder from a fixed local port to the cluster's API: closed,
/// it refuses connections and cuts the open ones, as a cluster whose API
/// went away; opened again on the same port, the cluster is back.
struct Gate {
    listen: SocketAddr,
    target: SocketAddr,
    forwarding: Option<tokio::task::JoinHandle<()>>,
}

impl Gate {
    fn new(runtime: &tokio::runtime::Runtime, target: SocketAddr) -> anyhow::Result<Self> {
        let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut gate = Self {
            listen,
            target,
            forwarding: None,
        };
        gate.open(runtime)?;
        Ok(gate)
    }

    fn open(&mut self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
        let listener = runtime.block_on(tokio::net::TcpListener::bind(self.listen))?;
        let target = self.target;
        self.forwarding = Some(runtime.spawn(async move {
            // Dropped with this task when the gate closes: every connection
            // through it is cut.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                connections.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
        Ok(())
    }

    fn close(&mut self, runtime: &tokio::runtime::Runtime) {
        if let Some(forwarding) = self.forwarding.take() {
            forwarding.abort();
            let _ = runtime.block_on(forwarding);
        }
    }

    /// `kubeconfig` with its server behind this gate (the cluster's
    /// certificate names 127.0.0.1, as the gate does).
    fn kubeconfig(&self, kubeconfig: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
        let text = std::fs::read_to_string(kubeconfig)?;
        let direct = format!("https://{}", self.target);
        anyhow::ensure!(text.contains(&direct), "{direct} in {text}");
        let gated = kubeconfig.with_file_name("gated.kubeconfig");
        std::fs::write(
            &gated,
            text.replace(&direct, &format!("https://{}", self.listen)),
        )?;
        Ok(gated)
    }
}

/// Waits until the `Cluster` object `name` says `reachable` is `reachable`.
fn wait_for_reachable(mesh: &Mesh, name: &str, reachable: bool) -> anyhow::Result<Value> {
    wait_for(
        &format!("cluster {name} reachable: {reachable}"),
        SETTLE,
        || {
            let cluster = mesh.cluster_object(name)?;
            observe(&cluster);
            Ok((cluster["status"]["reachable"] == reachable).then_some(cluster))
        },
    )
    .with_context(|| mesh.logs())
}

#[test]
fn an_agent_whose_cluster_does_not_answer_fails_its_placements_at_the_root() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let mut gate = Gate::new(&runtime, cluster.address())?;
    let kubeconfig = gate.kubeconfig(cluster.kubeconfig())?;
    let mut agent = mesh.add_agent_for("edge-1", "root", "region=eu", &kubeconfig)?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    mesh.apply(&web_workload(
        "nginx:1.26",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    wait_for("web ready on edge-1", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == 1).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let cluster_object = wait_for_reachable(&mesh, "edge-1", true)?;
    assert!(
        !cluster_object["metadata"]["labels"]
            .as_object()
            .is_some_and(|labels| labels.contains_key("relaymesh.dev/unreachable")),
        "{cluster_object}"
    );

    // The cluster's API goes away; the agent and its link stay up.
    gate.close(&runtime);
    let status = wait_for("web failing on edge-1, unreachable", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["failed"] == 1).then_some(status))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(status["ready"], 0, "{status}");
    assert_eq!(status["pending"], 0, "{status}");
    let failing = &status["failing"][0];
    assert_eq!(failing["cluster"], "edge-1", "{status}");
    let message = failing["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("ClusterUnreachable: "),
        "the message gives the reason: {status}"
    );

    // A placement that arrives meanwhile is not left pending either.
    mesh.apply(&relaymesh_tests::app_workload(
        "shop",
        "api",
        "api:1",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    let status = wait_for("api failing on edge-1, unreachable", SETTLE, || {
        let status = mesh.placement_status("api", "shop")?;
        observe(&status);
        Ok((status["failed"] == 1).then_some(status))
    })
    .with_context(|| mesh.logs())?;
    let message: &Value = &status["failing"][0]["message"];
    assert!(
        message
            .as_str()
            .is_some_and(|message| message.starts_with("ClusterUnreachable: ")),
        "{status}"
    );

    // The Cluster object says so too, its link still up.
    let cluster_object = wait_for_reachable(&mesh, "edge-1", false)?;
    assert_eq!(
        cluster_object["status"]["connected"], true,
        "{cluster_object}"
    );
    assert_eq!(
        cluster_object["metadata"]["labels"]["relaymesh.dev/unreachable"], "true",
        "{cluster_object}"
    );
    // `relayctl get clusters` (the root's table) has a column for it.
    let table = mesh.relayctl_ok(&["get", "clusters"])?;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let row: Vec<&str> = table
        .lines()
        .find(|line| line.starts_with("edge-1 "))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let reachable = header.iter().position(|name| *name == "REACHABLE");
    assert_eq!(
        reachable.and_then(|column| row.get(column)).copied(),
        Some("false"),
        "{table}"
    );

    // The API answers again: the Cluster object and the placements say so.
    gate.open(&runtime)?;
    wait_for_reachable(&mesh, "edge-1", true)?;
    wait_for("web ready on edge-1 again", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == 1 && status["failed"] == 0).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // An agent that has a cluster refuses to run as if it had none.
    agent.stop()?;
    gate.close(&runtime);
    runtime.block_on(cluster.shutdown())?;
    let refused = mesh
        .command("edge-agent", "edge-1")?
        .arg("run")
        .arg("--data-dir")
        .arg(mesh.data_dir("edge-1"))
        .arg("--no-cluster")
        .output()?;
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("this agent applies to its cluster (--kubeconfig "),
        "{}",
        text(&refused)
    );
    Ok(())
}
