//! Make-before-break: changing a Placement's `clusters.names` from `[a]` to
//! `[b]` keeps a's copy until b's is ready, then removes it. Both simulated
//! clusters are read on a thread throughout; the order is asserted on what
//! was read, never on how long anything took.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    connected_under, kubectl_get, observe, wait_for, web_ready, web_workload, Mesh, Sampler,
};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(90);

fn manifests(cluster: &str) -> String {
    web_workload("nginx:1.27", 2, &format!("{{names: [{cluster}]}}"), "")
}

/// Whether a cluster has the Deployment, and whether it is ready.
fn deployment(kubeconfig: &Path) -> anyhow::Result<(bool, bool)> {
    web_ready(kubeconfig, 2)
}

#[test]
fn a_placement_moved_from_one_cluster_to_another_keeps_the_old_copy_until_the_new_is_ready(
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for name in ["a", "b"] {
        // Ready a while after applied: the window in which removing a's
        // copy too early would show.
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions {
                delay: Duration::from_secs(3),
                ..SimulatorOptions::default()
            },
        ))?;
        agents.push(mesh.add_agent_for(name, "eu", "region=eu", cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("both agents in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok((connected_under(&tree, "a", "eu") && connected_under(&tree, "b", "eu")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let (a, b): (PathBuf, PathBuf) = (
        clusters[0].kubeconfig().to_path_buf(),
        clusters[1].kubeconfig().to_path_buf(),
    );

    mesh.apply(&manifests("a"))?;
    wait_for("web ready on a", SETTLE, || {
        Ok((deployment(&a)? == (true, true)).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let (read_a, read_b) = (a.clone(), b.clone());
    let sampler = Sampler::start(move || {
        let (on_a, _) = deployment(&read_a)?;
        let (on_b, ready_on_b) = deployment(&read_b)?;
        Ok(Some(json!({"a": on_a, "b": on_b, "bReady": ready_on_b})))
    });
    let root = mesh.kubeconfig();
    let handover = Sampler::start(move || {
        let placement = kubectl_get(&root, &["placement", "web", "-n", "shop"])?;
        Ok(placement.map(|placement| placement["status"]["handover"].clone()))
    });
    mesh.apply(&manifests("b"))?;
    wait_for("web on b only, ready", SETTLE, || {
        let done = deployment(&a)? == (false, false) && deployment(&b)? == (true, true);
        observe(format!(
            "a: {:?}, b: {:?}",
            deployment(&a)?,
            deployment(&b)?
        ));
        Ok(done.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let seen = sampler.finish();
    let handovers = handover.finish();

    assert!(
        seen.iter()
            .any(|read| read["a"] == true && read["b"] == true),
        "both copies ran side by side for a while: {seen:?}"
    );
    for read in &seen {
        assert!(
            read["a"] == true || read["bReady"] == true,
            "a's copy was gone before b's was ready: {read} in {seen:?}"
        );
    }
    assert!(
        handovers
            .iter()
            .any(|handover| handover["leavingClusters"] == json!(["a"])),
        "the Placement's status named a as leaving: {handovers:?}"
    );

    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
