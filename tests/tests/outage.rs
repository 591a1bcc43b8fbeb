//! Edge autonomy: an agent cut off from the tree keeps its cluster running
//! the last version it was given (nothing deleted), re-applies from its own
//! sled when it restarts during the outage, and converges to the new version
//! within seconds of its relay coming back.
//!
//! Real processes: a root, a relay "site", and an edge agent applying to a
//! simulated cluster (the relay's own API server with the status simulator,
//! in this test process) through the kube crate.

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, kubectl, wait_for, web_image, web_workload, Mesh};

const SETTLE: Duration = Duration::from_secs(60);

fn manifests(tag: &str) -> String {
    web_workload(
        &format!("nginx:{tag}"),
        1,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    )
}

#[test]
fn a_cut_off_agent_keeps_its_workloads_and_converges_after_the_outage() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();

    let mut site = mesh.add_relay("site", "root")?;
    wait_for("site in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "site", "root").then_some(()))
    })?;
    let mut agent = mesh.add_agent_for("edge-1", "site", "region=eu", &kubeconfig)?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "site").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    mesh.apply(&manifests("1.26"))?;
    wait_for("version 1.26 in the cluster", SETTLE, || {
        Ok((web_image(&kubeconfig)?.as_deref() == Some("nginx:1.26")).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // Drift: an edit made directly in the cluster is undone.
    let edited = kubectl(
        &kubeconfig,
        &[
            "set",
            "image",
            "deployment/web",
            "web=nginx:tampered",
            "-n",
            "shop",
        ],
        None,
    )?;
    assert!(
        edited.status.success(),
        "{}",
        String::from_utf8_lossy(&edited.stderr)
    );
    wait_for("the agent to undo the edit", SETTLE, || {
        Ok((web_image(&kubeconfig)?.as_deref() == Some("nginx:1.26")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    // An object relaymesh did not create, in the same namespace.
    let foreign = kubectl(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "mine",
            "-n",
            "shop",
            "--from-literal=owner=someone-else",
        ],
        None,
    )?;
    assert!(
        foreign.status.success(),
        "{}",
        String::from_utf8_lossy(&foreign.stderr)
    );

    // The outage: the agent's relay dies; the root moves on to 1.27.
    let before_outage = std::fs::read_to_string(&agent.log)?.len();
    site.kill()?;
    mesh.apply(&manifests("1.27"))?;
    // The agent noticed: its link is gone and a redial failed. Whatever it
    // does with a lost uplink it has done by now, and it kept the workload.
    wait_for("the agent to fail to reach its relay", SETTLE, || {
        let log = std::fs::read_to_string(&agent.log)?;
        let since = log.get(before_outage..).unwrap_or_default();
        Ok(since.contains("cannot reach parent").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(
        web_image(&kubeconfig)?.as_deref(),
        Some("nginx:1.26"),
        "a cut-off cluster keeps running what it had"
    );

    // The agent restarts during the outage and re-applies from its sled,
    // even what was deleted from the cluster behind its back meanwhile.
    agent.stop()?;
    let deleted = kubectl(
        &kubeconfig,
        &["delete", "deployment", "web", "-n", "shop"],
        None,
    )?;
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    agent = mesh.start_agent("edge-1")?;
    wait_for(
        "the restarted agent to re-apply 1.26 from its store",
        SETTLE,
        || Ok((web_image(&kubeconfig)?.as_deref() == Some("nginx:1.26")).then_some(())),
    )
    .with_context(|| mesh.logs())?;

    // The relay comes back: the cluster converges to 1.27.
    site = mesh.start("site")?;
    wait_for("version 1.27 after the outage", SETTLE, || {
        Ok((web_image(&kubeconfig)?.as_deref() == Some("nginx:1.27")).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // Deleting the Placement removes what relaymesh applied, and only that.
    let deleted = kubectl(
        &mesh.kubeconfig(),
        &["delete", "placement", "web", "-n", "shop"],
        None,
    )?;
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    wait_for("the deployment to be pruned", SETTLE, || {
        Ok(web_image(&kubeconfig)?.is_none().then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let mine = kubectl(
        &kubeconfig,
        &["get", "configmap", "mine", "-n", "shop"],
        None,
    )?;
    assert!(
        mine.status.success(),
        "a foreign object survives pruning: {}",
        String::from_utf8_lossy(&mine.stderr)
    );

    agent.stop()?;
    site.stop()?;
    runtime.block_on(cluster.shutdown())?;
    Ok(())
}
