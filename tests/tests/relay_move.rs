//! A relay moved to another parent with `relayctl move`, its subtree with
//! it: root ── a ── mid ── {edge-1, below ── edge-2} becomes
//! root ── b ── mid ── …. The relay keeps its issuer key, so the
//! certificates it and `below` issued stay valid: no node below it joins
//! again, no cluster is asked to change anything, every Placement status
//! the root shows on the way counts each cluster once, its children take
//! renewals that now lead through b (so a node joining below `below`
//! afterwards finds it under b and mid), and a new revision arrives
//! through b.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    assert_counted_once, assert_moves_refused, audited, connected_under, kubectl_get, move_settled,
    observe, wait_for, web_image, web_workload, ApiReader, Mesh, RelayProcess, Sampler,
};
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(90);

/// What the certificates mid signs for its children last: they renew
/// through mid a few times while the test runs.
const SHORT: &[&str] = &["--node-cert-validity", "20s"];

/// The root's `status.clusters` of Placement shop/web (`None` before the
/// first).
fn placement_status(root: &Path) -> anyhow::Result<Option<Value>> {
    Ok(kubectl_get(root, &["placements", "web", "-n", "shop"])?
        .map(|placement| placement["status"]["clusters"].clone())
        .filter(|clusters| !clusters.is_null()))
}

/// The relays from the root down to cluster `name`, as its `Cluster`
/// object at the root says.
fn relay_path(mesh: &Mesh, name: &str) -> anyhow::Result<Value> {
    Ok(mesh.cluster_object(name)?["status"]["relayPath"].clone())
}

/// How many renewals `process` logged.
fn renewals(process: &RelayProcess) -> anyhow::Result<usize> {
    let log = std::fs::read_to_string(&process.log)?;
    Ok(log.matches("renewed this node's certificate").count())
}

/// Waits until every cluster runs `nginx:TAG` and the root counts both
/// ready.
fn wait_revision(mesh: &Mesh, clusters: &[SimulatedCluster], tag: &str) -> anyhow::Result<()> {
    let image = format!("nginx:{tag}");
    for cluster in clusters {
        wait_for(&format!("{image} on {}", cluster.name()), SETTLE, || {
            Ok((web_image(cluster.kubeconfig())?.as_deref() == Some(image.as_str())).then_some(()))
        })
        .with_context(|| mesh.logs())?;
    }
    wait_for("both clusters ready at the root", SETTLE, || {
        let clusters = placement_status(&mesh.kubeconfig())?.unwrap_or_default();
        observe(&clusters);
        Ok((clusters["selected"] == 2 && clusters["ready"] == 2).then_some(()))
    })
    .with_context(|| mesh.logs())
}

#[test]
fn a_relay_moves_with_its_subtree_and_no_cluster_notices() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _a = mesh.add_relay_connected("a", "root", SETTLE)?;
    let _b = mesh.add_relay("b", "root")?;
    let _mid = mesh.add_relay_with("mid", "a", SHORT)?;
    wait_for("mid under a", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "mid", "a").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let below = mesh.add_relay_connected("below", "mid", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, parent) in [("edge-1", "mid"), ("edge-2", "below")] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, parent, "region=eu", cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("the tree", SETTLE, || {
        let tree = mesh.tree()?;
        let built = [
            ("a", "root"),
            ("b", "root"),
            ("mid", "a"),
            ("below", "mid"),
            ("edge-1", "mid"),
            ("edge-2", "below"),
        ]
        .iter()
        .all(|(name, parent)| connected_under(&tree, name, parent));
        Ok(built.then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // Moves the root refuses, each saying why.
    assert_moves_refused(
        &mesh,
        &[
            (["mid", "--to", "below"], "own subtree"),
            (["mid", "--to", "edge-1"], "own subtree"),
            (["mid", "--to", "a"], "already under"),
            (["below", "--to", "a"], "up its own branch"),
        ],
    )?;

    mesh.apply(&web_workload(
        "nginx:1.27",
        2,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    wait_revision(&mesh, &clusters, "1.27")?;
    let mut before = Vec::new();
    for cluster in &clusters {
        let audit = audited(cluster.audit_log())?;
        assert!(
            audit.iter().any(|line| line["method"] == "PATCH"),
            "the agent applied through the audited API: {audit:?}"
        );
        before.push(audit.len());
    }

    let root = ApiReader::new(&mesh.kubeconfig())?;
    let sampler = Sampler::start(move || root.placement_clusters("shop", "web"));
    move_settled(&mesh, "mid", "b", "a", "2m")?;

    wait_for("the subtree under b", SETTLE, || {
        let tree = mesh.tree()?;
        observe(&tree);
        let moved = [
            ("mid", "b"),
            ("below", "mid"),
            ("edge-1", "mid"),
            ("edge-2", "below"),
        ]
        .iter()
        .all(|(name, parent)| connected_under(&tree, name, parent));
        Ok((moved && !connected_under(&tree, "mid", "a")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("the clusters' paths through b", SETTLE, || {
        let paths = (relay_path(&mesh, "edge-1")?, relay_path(&mesh, "edge-2")?);
        observe(format_args!("{paths:?}"));
        let through_b = paths.0 == json!(["root", "b", "mid"])
            && paths.1 == json!(["root", "b", "mid", "below"]);
        Ok(through_b.then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // mid's children take its renewals, which now come through b's
    // signature of mid's issuer (mid switched before the tree showed it
    // under b).
    // below hears on its open link that the relays above it changed.
    let renewed = (renewals(&agents[0])?, renewals(&below)?);
    let told = r#"the relays above this node changed ancestors=["root", "b", "mid"]"#;
    wait_for(
        "edge-1 and below renewed through the moved mid",
        SETTLE,
        || {
            let now = (renewals(&agents[0])?, renewals(&below)?);
            let heard = std::fs::read_to_string(&below.log)?.contains(told);
            Ok((now.0 > renewed.0 && now.1 > renewed.1 && heard).then_some(()))
        },
    )
    .with_context(|| mesh.logs())?;

    // Nothing was asked of the clusters while their relays moved.
    for (cluster, before) in clusters.iter().zip(&before) {
        let after = audited(cluster.audit_log())?;
        assert_eq!(
            after.len(),
            *before,
            "{} was asked to change something during the move: {:?}",
            cluster.name(),
            &after[(*before).min(after.len())..]
        );
    }

    // below renewed through the moved mid, so its issuer's chain leads
    // through b: a node joining below it now (its token places below
    // under b and mid) finds it there.
    let _late = mesh.add_agent("late", "below", "region=us")?;
    wait_for("late under below", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "late", "below").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // A new revision arrives through b.
    mesh.apply(&web_workload(
        "nginx:1.28",
        2,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    wait_revision(&mesh, &clusters, "1.28")?;
    let mut seen = sampler.finish();
    assert!(seen.len() > 3, "the status was read throughout: {seen:?}");
    seen.push(placement_status(&mesh.kubeconfig())?.context("a status")?);
    for clusters in &seen {
        assert_counted_once(clusters, 2);
    }
    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
