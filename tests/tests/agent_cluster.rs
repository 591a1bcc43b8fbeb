//! An agent without a cluster says so: `edge-agent join` and `edge-agent
//! run` refuse to start without cluster access unless told `--no-cluster`,
//! and an agent whose cluster's API stops answering makes every placement
//! on it fail at the root with `ClusterUnreachable` instead of showing the
//! last state it knew.
//!
//! Real processes: a root, edge agents, and a simulated cluster (the
//! apiserver crate in this test process) that is shut down mid-test.

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

#[test]
fn an_agent_whose_cluster_does_not_answer_fails_its_placements_at_the_root() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
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

    // The cluster's API goes away; the agent and its link stay up.
    runtime.block_on(cluster.shutdown())?;
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

    // An agent that has a cluster refuses to run as if it had none.
    agent.stop()?;
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
