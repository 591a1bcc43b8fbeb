//! Lost clusters: a relay run with `--lost-after` treats a cluster below it
//! that stays disconnected that long as lost for count-bounded placements.
//! A `maxClusters: 1` placement moves to the other cluster while the lost
//! one (its agent killed with SIGKILL) keeps its copy; the Placement counts
//! one ready cluster and nothing offline; the Cluster says `lost`; back, the
//! cluster is open again and its copy goes, the replacement keeping its place.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    connected_under, observe, wait_for, web_deployment, web_ready, web_workload, Mesh,
};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(90);

#[test]
fn a_cluster_offline_longer_than_lost_after_gives_its_place_to_another() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay_with("eu", "root", &["--lost-after", "3s"])?;
    wait_for("eu in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let names = ["a", "b"];
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for name in names {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(Some(mesh.add_agent_for(
            name,
            "eu",
            "region=eu",
            cluster.kubeconfig(),
        )?));
        clusters.push(cluster);
    }
    wait_for("both agents in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(names
            .iter()
            .all(|name| connected_under(&tree, name, "eu"))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let kubeconfigs: Vec<PathBuf> = clusters
        .iter()
        .map(|cluster| cluster.kubeconfig().to_path_buf())
        .collect();

    mesh.apply(&web_workload(
        "nginx:1.27",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}\n  maxClusters: 1",
        "",
    ))?;
    let holder = wait_for("web ready on one cluster", SETTLE, || {
        let mut ready = Vec::new();
        for (index, kubeconfig) in kubeconfigs.iter().enumerate() {
            if web_ready(kubeconfig, 1)? == (true, true) {
                ready.push(index);
            }
        }
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((ready.len() == 1 && status["ready"] == json!(1)).then(|| ready[0]))
    })
    .with_context(|| mesh.logs())?;
    let other = 1 - holder;
    assert!(web_deployment(&kubeconfigs[other])?.is_none());

    agents[holder]
        .take()
        .context("the holder's agent")?
        .kill()?;
    wait_for("web ready on the other cluster", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        let moved = web_ready(&kubeconfigs[other], 1)? == (true, true)
            && status["ready"] == json!(1)
            && status["offline"] == json!(0)
            && status["selected"] == json!(1);
        Ok(moved.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert!(
        web_deployment(&kubeconfigs[holder])?.is_some(),
        "the lost cluster keeps running what it had"
    );
    let lost = mesh.cluster_object(names[holder])?;
    assert_eq!(lost["status"]["lost"], json!(true), "{lost}");
    assert_eq!(lost["status"]["connected"], json!(false), "{lost}");

    agents[holder] = Some(mesh.start_agent(names[holder])?);
    wait_for("the lost cluster back, its copy gone", SETTLE, || {
        let back = mesh.cluster_object(names[holder])?;
        observe(&back);
        let done = back["status"]["lost"] == json!(false)
            && back["status"]["connected"] == json!(true)
            && web_deployment(&kubeconfigs[holder])?.is_none();
        Ok(done.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(web_ready(&kubeconfigs[other], 1)?, (true, true));
    let status = mesh.placement_status("web", "shop")?;
    assert_eq!(status["selected"], json!(1), "{status}");
    Ok(())
}
