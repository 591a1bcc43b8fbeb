//! Faults on real links between real processes: a subtree cut off from its
//! parent and healed, links that lose, delay, duplicate, reorder and
//! throttle, a mid relay killed with SIGKILL while a revision propagates,
//! and a mid relay whose store cannot write.
//!
//! The link faults come from `relaymesh_testbed::faults::Proxy`, a loopback
//! UDP proxy in this test process, put between the mid relay and the root
//! with `relay run --parent-address`. Every assertion is about what the
//! application did (objects on the simulated clusters, the root's Placement
//! status, the tree's acknowledged revisions, the stores), never about
//! bytes on the wire or how long anything took. docs/reliability.md says
//! what each test showed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_testbed::faults::{FaultHandle, Faults, Proxy};
use relaymesh_tests::{
    assert_counted_once, connected_under, find_node, kubectl, kubectl_get, observe, wait_for,
    ApiReader, Mesh, RelayProcess, Sampler,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// The clusters below the mid relay.
const AGENTS: [&str; 2] = ["edge-1", "edge-2"];

/// root ── (proxy) ── mid ─┬─ edge-1 → simulated cluster
///                         └─ edge-2 → simulated cluster
struct Subtree {
    runtime: tokio::runtime::Runtime,
    mesh: Mesh,
    _root: RelayProcess,
    mid: RelayProcess,
    agents: Vec<RelayProcess>,
    clusters: Vec<SimulatedCluster>,
    proxy: Proxy,
}

impl Subtree {
    fn start(seed: u64) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Runtime::new()?;
        let (mesh, root) = Mesh::init()?;
        let root_address: SocketAddr = mesh
            .advertised_address("root")?
            .parse()
            .context("the root's QUIC address")?;
        let proxy = runtime.block_on(Proxy::start(root_address, seed))?;
        let through_proxy = proxy.address().to_string();
        let mid = mesh.add_relay_with("mid", "root", &["--parent-address", &through_proxy])?;
        wait_for("mid in the tree", SETTLE, || {
            Ok(connected_under(&mesh.tree()?, "mid", "root").then_some(()))
        })
        .with_context(|| mesh.logs())?;
        let mut clusters = Vec::new();
        let mut agents = Vec::new();
        for name in AGENTS {
            let cluster = runtime.block_on(SimulatedCluster::start(
                name,
                &mesh.dir.path().join(format!("cluster-{name}")),
                SimulatorOptions {
                    delay: Duration::from_millis(200),
                    ..SimulatorOptions::default()
                },
            ))?;
            agents.push(mesh.add_agent_for(name, "mid", "region=eu", cluster.kubeconfig())?);
            clusters.push(cluster);
        }
        wait_for("both agents in the tree", SETTLE, || {
            let tree = mesh.tree()?;
            Ok(AGENTS
                .iter()
                .all(|name| connected_under(&tree, name, "mid"))
                .then_some(()))
        })
        .with_context(|| mesh.logs())?;
        Ok(Self {
            runtime,
            mesh,
            _root: root,
            mid,
            agents,
            clusters,
            proxy,
        })
    }

    fn faults(&self) -> FaultHandle {
        self.proxy.handle()
    }

    fn kubeconfigs(&self) -> Vec<PathBuf> {
        self.clusters
            .iter()
            .map(|cluster| cluster.kubeconfig().to_path_buf())
            .collect()
    }

    /// `kubectl apply --server-side` at the root (server-side, so a large
    /// ConfigMap is not copied into a last-applied annotation).
    fn apply(&self, text: &str) -> anyhow::Result<()> {
        let output = kubectl(
            &self.mesh.kubeconfig(),
            &["apply", "--server-side", "-f", "-"],
            Some(text),
        )?;
        if !output.status.success() {
            bail!("kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }

    /// Waits until every cluster runs revision `tag` (its image and its
    /// ConfigMap).
    fn wait_for_revision(&self, tag: &str) -> anyhow::Result<()> {
        for kubeconfig in self.kubeconfigs() {
            wait_for(&format!("revision {tag} on {kubeconfig:?}"), SETTLE, || {
                Ok((revision(&kubeconfig)?.as_deref() == Some(tag)).then_some(()))
            })
            .with_context(|| self.mesh.logs())?;
        }
        Ok(())
    }

    /// Waits until the root's Placement status counts both clusters as
    /// applied or ready.
    fn wait_for_status(&self) -> anyhow::Result<Value> {
        wait_for("the root's status of both clusters", SETTLE, || {
            let clusters = placement_status(&self.mesh.kubeconfig())?;
            let done = count(&clusters, "selected") == 2
                && count(&clusters, "applied") + count(&clusters, "ready") == 2;
            Ok(done.then_some(clusters))
        })
        .with_context(|| self.mesh.logs())
    }

    /// The mid relay's acknowledged revision, as the root's tree reports it.
    fn mid_acked(&self) -> anyhow::Result<u64> {
        let tree = self.mesh.tree()?;
        let (mid, _) = find_node(&tree, "mid").context("mid in the tree")?;
        mid["ackedRevision"].as_u64().context("mid's ackedRevision")
    }

    fn shutdown(mut self) -> anyhow::Result<()> {
        for agent in &mut self.agents {
            agent.stop()?;
        }
        self.mid.stop()?;
        for cluster in self.clusters.drain(..) {
            self.runtime.block_on(cluster.shutdown())?;
        }
        Ok(())
    }
}

/// Revision `tag` of the workload: a Deployment whose image and a
/// ConfigMap whose `revision` key say `tag`, with `padding` bytes more in
/// the ConfigMap (to make the bundle large).
fn workload(tag: &str, padding: usize) -> String {
    // Text that does not compress into nothing, in case anything on the way
    // compresses: a cheap deterministic generator.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let padding: String = (0..padding)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: shop}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop, labels: {{app: web}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: "nginx:{tag}"}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: web, namespace: shop, labels: {{app: web}}}}
data: {{revision: "{tag}", padding: "{padding}"}}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {{name: web, namespace: shop}}
spec:
  workloads: [{{labelSelector: {{matchLabels: {{app: web}}}}}}]
  clusters: {{labelSelector: {{matchLabels: {{region: eu}}}}}}
"#
    )
}

/// The revision a cluster runs: the Deployment's image tag, if its
/// ConfigMap says the same revision (otherwise the cluster is between
/// revisions, and this says `mixed`).
fn revision(kubeconfig: &Path) -> anyhow::Result<Option<String>> {
    Ok(match object_revisions(kubeconfig)? {
        (Some(image), Some(config)) if image == config => Some(image),
        (None, None) => None,
        _ => Some("mixed".into()),
    })
}

/// The revision of each object of the workload on the cluster: the
/// Deployment's image tag and the ConfigMap's `revision` (`None` for an
/// object not there).
fn object_revisions(kubeconfig: &Path) -> anyhow::Result<(Option<String>, Option<String>)> {
    let deployment = kubectl_get(kubeconfig, &["deployment", "web", "-n", "shop"])?;
    let image = deployment.as_ref().and_then(|deployment| {
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .and_then(|image| image.strip_prefix("nginx:"))
            .map(str::to_string)
    });
    let config = kubectl_get(kubeconfig, &["configmap", "web", "-n", "shop"])?;
    let config_revision = config
        .as_ref()
        .and_then(|config| config["data"]["revision"].as_str().map(str::to_string));
    Ok((image, config_revision))
}

/// The root's `status.clusters` of Placement shop/web (`null` before the
/// first).
fn placement_status(root: &Path) -> anyhow::Result<Value> {
    Ok(kubectl_get(root, &["placements", "web", "-n", "shop"])?
        .map(|placement| placement["status"]["clusters"].clone())
        .unwrap_or_default())
}

fn count(clusters: &Value, phase: &str) -> u64 {
    clusters[phase].as_u64().unwrap_or_default()
}

/// The length of a log now, to look only at what comes after.
fn log_length(process: &RelayProcess) -> anyhow::Result<usize> {
    Ok(std::fs::read_to_string(&process.log)?.len())
}

/// Waits until `process`'s log says `needle` after `since` bytes.
fn wait_for_log(
    mesh: &Mesh,
    process: &RelayProcess,
    since: usize,
    needle: &str,
) -> anyhow::Result<()> {
    wait_for(
        &format!("{} to log {needle:?}", process.name),
        SETTLE,
        || {
            let log = std::fs::read_to_string(&process.log)?;
            Ok(log
                .get(since..)
                .unwrap_or_default()
                .contains(needle)
                .then_some(()))
        },
    )
    .with_context(|| mesh.logs())
}

#[test]
fn a_partitioned_subtree_keeps_its_state_and_converges_after_healing() -> anyhow::Result<()> {
    let subtree = Subtree::start(11)?;
    subtree.apply(&workload("1.26", 0))?;
    subtree.wait_for_revision("1.26")?;
    subtree.wait_for_status()?;

    // The cut: the root stops hearing mid (its link times out) and mid
    // fails to redial; only then does the root move on.
    let since = log_length(&subtree.mid)?;
    subtree.faults().partition();
    wait_for("the root to see mid disconnected", SETTLE, || {
        let tree = subtree.mesh.tree()?;
        Ok(find_node(&tree, "mid")
            .is_some_and(|(node, _)| node["connected"] == false)
            .then_some(()))
    })
    .with_context(|| subtree.mesh.logs())?;
    wait_for_log(&subtree.mesh, &subtree.mid, since, "cannot reach parent")?;
    subtree.apply(&workload("1.27", 0))?;
    // The root has published 1.27 (its own head moved past what mid
    // acknowledged) and nothing of it can have crossed the cut.
    let acked_before = subtree.mid_acked()?;
    for kubeconfig in subtree.kubeconfigs() {
        assert_eq!(
            revision(&kubeconfig)?.as_deref(),
            Some("1.26"),
            "a cut-off cluster keeps running its last revision"
        );
    }
    for agent in &subtree.agents {
        assert!(
            !std::fs::read_to_string(&agent.log)?.contains("panicked"),
            "{} kept running",
            agent.name
        );
    }

    subtree.faults().heal();
    subtree.wait_for_revision("1.27")?;
    subtree.wait_for_status()?;
    wait_for("mid to acknowledge past the cut", SETTLE, || {
        Ok((subtree.mid_acked()? > acked_before).then_some(()))
    })?;
    subtree.shutdown()
}

#[test]
fn a_lossy_link_delays_but_converges() -> anyhow::Result<()> {
    let subtree = Subtree::start(12)?;
    subtree.apply(&workload("1.26", 0))?;
    subtree.wait_for_revision("1.26")?;

    // 30 % loss both ways, 20–60 ms of delay, 10 % duplicates and 10 %
    // reordered, on the link the whole subtree depends on.
    subtree.faults().set(Faults {
        loss: 0.3,
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(40),
        duplicate: 0.1,
        reorder: 0.1,
        ..Faults::default()
    });
    subtree.apply(&workload("1.27", 20_000))?;
    subtree.wait_for_revision("1.27")?;
    subtree.wait_for_status()?;
    let (_, dropped) = subtree.faults().counts();
    assert!(dropped > 0, "the proxy did drop datagrams");
    subtree.shutdown()
}

#[test]
fn a_slow_link_carries_a_large_bundle() -> anyhow::Result<()> {
    let subtree = Subtree::start(13)?;
    // 200 KB/s each way, and a revision whose bundle is about 300 KB.
    subtree.faults().set(Faults {
        bandwidth: Some(200_000),
        ..Faults::default()
    });
    subtree.apply(&workload("1.26", 300_000))?;
    subtree.wait_for_revision("1.26")?;
    subtree.wait_for_status()?;
    for kubeconfig in subtree.kubeconfigs() {
        let config = kubectl_get(&kubeconfig, &["configmap", "web", "-n", "shop"])?
            .context("the ConfigMap")?;
        assert_eq!(
            config["data"]["padding"].as_str().map(str::len),
            Some(300_000),
            "the whole bundle arrived"
        );
    }
    subtree.shutdown()
}

#[test]
fn a_mid_relay_killed_during_a_revision_loses_nothing_and_counts_no_cluster_twice(
) -> anyhow::Result<()> {
    let mut subtree = Subtree::start(14)?;
    let root = subtree.mesh.kubeconfig();
    let root_reader = ApiReader::new(&root)?;
    let watch = Sampler::start(move || root_reader.placement_clusters("shop", "web"));
    subtree.apply(&workload("1.26", 0))?;
    subtree.wait_for_revision("1.26")?;
    subtree.wait_for_status()?;

    // A slow link, so that the new revision's bundle is still crossing it
    // when mid has acknowledged the revision's slice entry and dies.
    subtree.faults().set(Faults {
        bandwidth: Some(200_000),
        ..Faults::default()
    });
    let acked_before = subtree.mid_acked()?;
    subtree.apply(&workload("1.27", 300_000))?;
    let acked = wait_for("mid to acknowledge the new revision", SETTLE, || {
        let acked = subtree.mid_acked()?;
        Ok((acked > acked_before).then_some(acked))
    })
    .with_context(|| subtree.mesh.logs())?;
    subtree.mid.kill()?;

    // What mid acknowledged is in its store: the revision's placement entry
    // at or past the acknowledged revision.
    let stored = subtree.mesh.inspect("mid")?;
    observe(&stored);
    let parent_revision = stored["parentRevision"].as_u64().unwrap_or_default();
    assert!(
        parent_revision >= acked,
        "mid's store holds the parent revision it acknowledged ({acked}): {stored}"
    );
    assert!(
        stored["entries"]
            .as_array()
            .is_some_and(|entries| entries.iter().any(|key| key == "placement/shop/web")),
        "{stored}"
    );

    subtree.mid = subtree.mesh.start("mid")?;
    subtree.wait_for_revision("1.27")?;
    subtree.wait_for_status()?;
    // Once more after everything settled, so the last summary is a settled
    // one.
    let settled = placement_status(&subtree.mesh.kubeconfig())?;
    let mut seen = watch.finish();
    seen.push(settled);
    assert!(seen.len() > 3, "the status was polled throughout: {seen:?}");
    for clusters in &seen {
        assert_counted_once(clusters, AGENTS.len() as u64);
    }
    subtree.shutdown()
}

/// The largest file under `dir`, in bytes.
fn largest_file(dir: &Path) -> anyhow::Result<u64> {
    let mut largest = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        largest = largest.max(if metadata.is_dir() {
            largest_file(&entry.path())?
        } else {
            metadata.len()
        });
    }
    Ok(largest)
}

#[test]
fn a_mid_relay_whose_store_cannot_write_stops_loudly_and_loses_nothing() -> anyhow::Result<()> {
    let mut subtree = Subtree::start(15)?;
    subtree.apply(&workload("1.26", 0))?;
    subtree.wait_for_revision("1.26")?;
    subtree.wait_for_status()?;

    // Root ignores file modes, so `chmod` cannot make the store unwritable
    // for a relay running as root (the tests do). A file-size limit on the
    // running process can: from now on, no file of mid's may grow past the
    // size of its largest store file, so sled's next new segment fails with
    // EFBIG. Its log may still grow (it is smaller than the limit).
    let limit = largest_file(&subtree.mesh.data_dir("mid").join("store"))?;
    let log = std::fs::metadata(&subtree.mid.log)?.len();
    anyhow::ensure!(
        log + 64 * 1024 < limit,
        "mid's log ({log} bytes) would hit the limit ({limit} bytes) too"
    );
    let pid = subtree.mid.id().context("mid runs")?.to_string();
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid, &format!("--fsize={limit}:{limit}")])
        .output()?;
    anyhow::ensure!(
        limited.status.success(),
        "prlimit: {}",
        String::from_utf8_lossy(&limited.stderr)
    );
    let since = log_length(&subtree.mid)?;

    // A revision large enough that mid's store must grow to take it.
    subtree.apply(&workload("1.27", 600_000))?;
    wait_for_log(&subtree.mesh, &subtree.mid, since, "the store cannot write")?;
    let status = wait_for("mid to stop", SETTLE, || subtree.mid.exit_status())
        .with_context(|| subtree.mesh.logs())?;
    assert!(!status.success(), "mid fails rather than run on: {status}");

    // While mid is down its acknowledged revision stays where it stopped,
    // as the root publishes more.
    let acked = subtree.mid_acked()?;
    subtree.apply(&workload("1.28", 0))?;
    wait_for("the root to see mid disconnected", SETTLE, || {
        let tree = subtree.mesh.tree()?;
        Ok(find_node(&tree, "mid")
            .is_some_and(|(node, _)| node["connected"] == false)
            .then_some(()))
    })?;
    assert_eq!(
        subtree.mid_acked()?,
        acked,
        "a failed store acknowledges nothing"
    );
    // Nothing acknowledged was lost: mid's store holds at least that.
    let stored = subtree.mesh.inspect("mid")?;
    let parent_revision = stored["parentRevision"].as_u64().unwrap_or_default();
    assert!(parent_revision >= acked, "acknowledged {acked}: {stored}");
    // The clusters keep only what the root published before mid stopped:
    // each object at the revision they had, or at the one mid was storing
    // when it failed, if it passed that down first (sled takes a write into
    // memory before the flush that fails, and a relay need not wait for its
    // flush to serve its children); never one published after mid stopped.
    // The two objects may differ: `kubectl apply` writes them one after the
    // other, so the root can publish the new Deployment before the new
    // ConfigMap, and mid may fail on the second (CI run 46 caught that).
    for kubeconfig in subtree.kubeconfigs() {
        let (image, config) = wait_for("both objects on the cluster", SETTLE, || {
            Ok(match object_revisions(&kubeconfig)? {
                (Some(image), Some(config)) => Some((image, config)),
                _ => None,
            })
        })?;
        for revision in [&image, &config] {
            assert!(
                revision == "1.26" || revision == "1.27",
                "a cluster runs image {image} and config {config} while mid is down"
            );
        }
    }

    // Writing works again (a new process, without the limit): the subtree
    // catches up with the latest revision.
    subtree.mid = subtree.mesh.start("mid")?;
    subtree.wait_for_revision("1.28")?;
    subtree.wait_for_status()?;
    wait_for("mid to acknowledge again", SETTLE, || {
        Ok((subtree.mid_acked()? > acked).then_some(()))
    })?;
    subtree.shutdown()
}
