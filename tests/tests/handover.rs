//! Make-before-break: a placement that moves from cluster `a` to cluster
//! `b` keeps a's copy until b's is ready, then removes it. Both simulated
//! clusters are read on a thread throughout; the order is asserted on what
//! was read, never on how long anything took. Two ways to move: changing a
//! Placement's `clusters.names` from `[a]` to `[b]` (handed over by the
//! root), and a label change that moves a `maxClusters: 1` placement
//! (handed over by the relay above both).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    connected_under, kubectl_get, observe, wait_for, web_ready, web_workload, ApiReader, Mesh,
    RelayProcess, Sampler,
};
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(90);

/// Whether a cluster has the Deployment, and whether it is ready.
fn deployment(kubeconfig: &Path) -> anyhow::Result<(bool, bool)> {
    web_ready(kubeconfig, 2)
}

/// Simulated clusters `a` and `b` below relay `eu`, with join labels
/// `labels[0]` and `labels[1]`.
struct Pair {
    mesh: Mesh,
    _root: RelayProcess,
    _relay: RelayProcess,
    clusters: Vec<SimulatedCluster>,
    agents: Vec<RelayProcess>,
    a: PathBuf,
    b: PathBuf,
    /// Dropped last, as the clusters it serves are.
    runtime: tokio::runtime::Runtime,
}

impl Pair {
    fn start(labels: [&str; 2]) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Runtime::new()?;
        let (mesh, root) = Mesh::init()?;
        let relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
        let mut clusters = Vec::new();
        let mut agents = Vec::new();
        for (name, labels) in ["a", "b"].into_iter().zip(labels) {
            // Ready a while after applied: the window in which removing
            // a's copy too early would show.
            let cluster = runtime.block_on(SimulatedCluster::start(
                name,
                &mesh.dir.path().join(format!("cluster-{name}")),
                SimulatorOptions {
                    delay: Duration::from_secs(3),
                    ..SimulatorOptions::default()
                },
            ))?;
            agents.push(mesh.add_agent_for(name, "eu", labels, cluster.kubeconfig())?);
            clusters.push(cluster);
        }
        wait_for("both agents in the tree", SETTLE, || {
            let tree = mesh.tree()?;
            Ok(
                (connected_under(&tree, "a", "eu") && connected_under(&tree, "b", "eu"))
                    .then_some(()),
            )
        })
        .with_context(|| mesh.logs())?;
        let (a, b) = (
            clusters[0].kubeconfig().to_path_buf(),
            clusters[1].kubeconfig().to_path_buf(),
        );
        Ok(Self {
            runtime,
            mesh,
            _root: root,
            _relay: relay,
            clusters,
            agents,
            a,
            b,
        })
    }

    fn wait_for_web_on(&self, on_a: bool) -> anyhow::Result<()> {
        let (a, b) = (&self.a, &self.b);
        let wanted = |on: bool| if on { (true, true) } else { (false, false) };
        wait_for("web ready on one cluster only", SETTLE, || {
            let (now_a, now_b) = (deployment(a)?, deployment(b)?);
            observe(format!("a: {now_a:?}, b: {now_b:?}"));
            Ok((now_a == wanted(on_a) && now_b == wanted(!on_a)).then_some(()))
        })
        .with_context(|| self.mesh.logs())
    }

    /// Reads both clusters on a thread until finished.
    fn sample(&self) -> anyhow::Result<Sampler> {
        let (read_a, read_b) = (ApiReader::new(&self.a)?, ApiReader::new(&self.b)?);
        Ok(Sampler::start(move || {
            let (on_a, _) = read_a.web_ready(2)?;
            let (on_b, ready_on_b) = read_b.web_ready(2)?;
            Ok(Some(json!({"a": on_a, "b": on_b, "bReady": ready_on_b})))
        }))
    }

    fn stop(self) -> anyhow::Result<()> {
        for mut agent in self.agents {
            agent.stop()?;
        }
        for cluster in self.clusters {
            self.runtime.block_on(cluster.shutdown())?;
        }
        Ok(())
    }
}

/// Both copies ran side by side for a while, and a's was never gone before
/// b's was ready.
fn assert_made_before_broken(seen: &[Value]) {
    assert!(
        seen.iter()
            .any(|read| read["a"] == true && read["b"] == true),
        "both copies ran side by side for a while: {seen:?}"
    );
    for read in seen {
        assert!(
            read["a"] == true || read["bReady"] == true,
            "a's copy was gone before b's was ready: {read} in {seen:?}"
        );
    }
}

#[test]
fn a_placement_moved_from_one_cluster_to_another_keeps_the_old_copy_until_the_new_is_ready(
) -> anyhow::Result<()> {
    let pair = Pair::start(["region=eu", "region=eu"])?;
    let manifests =
        |cluster: &str| web_workload("nginx:1.27", 2, &format!("{{names: [{cluster}]}}"), "");
    pair.mesh.apply(&manifests("a"))?;
    pair.wait_for_web_on(true)?;

    let sampler = pair.sample()?;
    let root = pair.mesh.kubeconfig();
    let handover = Sampler::start(move || {
        let placement = kubectl_get(&root, &["placement", "web", "-n", "shop"])?;
        Ok(placement.map(|placement| placement["status"]["handover"].clone()))
    });
    pair.mesh.apply(&manifests("b"))?;
    pair.wait_for_web_on(false)?;
    let seen = sampler.finish();
    let handovers = handover.finish();

    assert_made_before_broken(&seen);
    assert!(
        handovers
            .iter()
            .any(|handover| handover["leavingClusters"] == json!(["a"])),
        "the Placement's status named a as leaving: {handovers:?}"
    );
    pair.stop()
}

#[test]
fn a_bounded_placement_follows_a_label_change_make_before_break() -> anyhow::Result<()> {
    let pair = Pair::start(["region=eu,tier=gold", "region=eu"])?;
    pair.mesh.apply(&web_workload(
        "nginx:1.27",
        2,
        "{labelSelector: {matchLabels: {tier: gold}}}\n  maxClusters: 1",
        "",
    ))?;
    pair.wait_for_web_on(true)?;
    // b matches too, but the bound keeps the placement where it is.
    pair.mesh
        .relayctl_ok(&["label", "cluster", "b", "tier=gold"])?;
    wait_for("b's record gold", SETTLE, || {
        let cluster = pair.mesh.cluster_object("b")?;
        Ok((cluster["metadata"]["labels"]["tier"] == "gold").then_some(()))
    })
    .with_context(|| pair.mesh.logs())?;
    assert_eq!(
        deployment(&pair.b)?,
        (false, false),
        "a bound keeps its cluster"
    );

    let sampler = pair.sample()?;
    pair.mesh.relayctl_ok(&["label", "cluster", "a", "tier-"])?;
    pair.wait_for_web_on(false)?;
    let seen = sampler.finish();

    assert_made_before_broken(&seen);
    wait_for("the Placement counts b alone", SETTLE, || {
        let status = pair.mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == 1 && status["selected"] == 1).then_some(()))
    })
    .with_context(|| pair.mesh.logs())?;
    pair.stop()
}
