//! Churn while a revision rolls out: a mid relay killed with SIGKILL and
//! started again, and an agent moved to another parent with `relayctl
//! move`. Every Placement status the root shows on the way counts each
//! cluster once (checked on every status read, not only the last), and the
//! moved cluster keeps its workload: the same object, never deleted, which
//! the new revision reaches there too.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    assert_counted_once, assert_moves_refused, connected_under, kubectl_get, move_settled,
    wait_for, web_deployment, web_workload, ApiReader, Mesh, RelayProcess, Sampler,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// Each cluster and the mid relay it joins first; edge-3 moves to r1.
const AGENTS: [(&str, &str); 4] = [
    ("edge-1", "r1"),
    ("edge-2", "r1"),
    ("edge-3", "r2"),
    ("edge-4", "r2"),
];

/// Revision `tag`: a Deployment running `nginx:TAG` on every cluster of
/// region eu.
fn workload(tag: &str) -> String {
    web_workload(
        &format!("nginx:{tag}"),
        2,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    )
}

/// The Deployment shop/web on a cluster: its uid and image.
fn deployment(kubeconfig: &Path) -> anyhow::Result<Option<(String, String)>> {
    Ok(web_deployment(kubeconfig)?.map(|deployment| {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
        (
            text(&deployment["metadata"]["uid"]),
            text(&deployment["spec"]["template"]["spec"]["containers"][0]["image"]),
        )
    }))
}

/// The root's `status.clusters` of Placement shop/web (`None` before the
/// first).
fn placement_status(root: &Path) -> anyhow::Result<Option<Value>> {
    Ok(kubectl_get(root, &["placements", "web", "-n", "shop"])?
        .map(|placement| placement["status"]["clusters"].clone())
        .filter(|clusters| !clusters.is_null()))
}

/// Waits until the root counts every cluster ready.
fn wait_all_ready(mesh: &Mesh) -> anyhow::Result<Value> {
    wait_for("every cluster ready at the root", SETTLE, || {
        let clusters = placement_status(&mesh.kubeconfig())?.unwrap_or_default();
        let all = AGENTS.len() as u64;
        Ok((clusters["selected"] == all && clusters["ready"] == all).then_some(clusters))
    })
    .with_context(|| mesh.logs())
}

/// Waits until every cluster runs `nginx:TAG`.
fn wait_revision(mesh: &Mesh, clusters: &[SimulatedCluster], tag: &str) -> anyhow::Result<()> {
    let image = format!("nginx:{tag}");
    for cluster in clusters {
        wait_for(&format!("{image} on {}", cluster.name()), SETTLE, || {
            Ok(deployment(cluster.kubeconfig())?
                .filter(|(_, running)| *running == image)
                .map(|_| ()))
        })
        .with_context(|| mesh.logs())?;
    }
    Ok(())
}

#[test]
fn a_mid_relay_killed_and_an_agent_moved_during_a_rollout_count_every_cluster_once(
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let mut r1 = mesh.add_relay("r1", "root")?;
    let _r2 = mesh.add_relay("r2", "root")?;
    wait_for("both mid relays in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "r1", "root") && connected_under(&tree, "r2", "root"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;
    let mut clusters = Vec::new();
    let mut agents: Vec<RelayProcess> = Vec::new();
    for (name, parent) in AGENTS {
        // Workloads take a while to become ready, so the rollout is still
        // under way while the relay dies and the agent moves.
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions {
                delay: Duration::from_secs(2),
                ..SimulatorOptions::default()
            },
        ))?;
        agents.push(mesh.add_agent_for(name, parent, "region=eu", cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("every agent in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(AGENTS
            .iter()
            .all(|(name, parent)| connected_under(&tree, name, parent))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // Moves the root refuses, each saying why.
    assert_moves_refused(
        &mesh,
        &[
            (["r2", "--to", "edge-3"], "own subtree"),
            (["edge-3", "--to", "r2"], "already under"),
            (["edge-3", "--to", "root"], "above"),
            (["nowhere", "--to", "r1"], "not in the tree"),
            (["edge-3", "--to", "nowhere"], "not in the tree"),
        ],
    )?;

    mesh.apply(&workload("1.26"))?;
    wait_revision(&mesh, &clusters, "1.26")?;
    wait_all_ready(&mesh)?;
    let moved_cluster = clusters[2].kubeconfig().to_path_buf();
    let (uid, _) = deployment(&moved_cluster)?.context("edge-3 runs the workload")?;

    let root = ApiReader::new(&mesh.kubeconfig())?;
    let sampler = Sampler::start(move || root.placement_clusters("shop", "web"));
    mesh.apply(&workload("1.27"))?;
    r1.kill()?;
    r1 = mesh.start("r1")?;
    wait_for("r1 back in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "r1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    move_settled(&mesh, "edge-3", "r1", "r2", "90s")?;

    wait_revision(&mesh, &clusters, "1.27")?;
    let settled = wait_all_ready(&mesh)?;
    let tree = mesh.tree()?;
    assert!(connected_under(&tree, "edge-3", "r1"), "{tree}");
    assert!(!connected_under(&tree, "edge-3", "r2"), "{tree}");

    let mut seen = sampler.finish();
    seen.push(settled);
    assert!(seen.len() > 3, "the status was read throughout: {seen:?}");
    for clusters in &seen {
        assert_counted_once(clusters, AGENTS.len() as u64);
    }
    // The moved cluster kept its Deployment (never deleted and created
    // again), and the new revision reached it under its new parent.
    let (uid_after, image) = deployment(&moved_cluster)?.context("edge-3 runs the workload")?;
    assert_eq!(
        uid_after,
        uid,
        "edge-3's Deployment was replaced: {}",
        mesh.logs()
    );
    assert_eq!(image, "nginx:1.27");

    r1.stop()?;
    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
