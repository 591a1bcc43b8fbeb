//! The edge agent's real reconciler against a hollow cluster: it applies a
//! bundle in dependency order, the cluster makes the Deployment ready after
//! its delay and the reconciler reports the placement ready; an object
//! removed from the bundle, then the whole placement removed from the slice,
//! are pruned.
//!
//! On real time with a short delay: the reconciler's inventory flushes sled
//! on sled's own threads, and a paused clock would jump ahead while it waits.
//! Every wait is on a condition, bounded by [`PATIENCE`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_edge_agent::reconciler::{ReconcileError, Reconciler};
use relaymesh_node::daemon::AgentSlice;
use relaymesh_node::store::{Mutation, Store};
use relaymesh_protocol::message::Resume;
use relaymesh_protocol::{BundleId, PlacementStatus, SliceEntry, Target};
use relaymesh_testbed::cluster::SimulatorOptions;
use relaymesh_testbed::hollow::{AppliedRecord, Discovery, HollowCluster, Operation};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const KEY: &str = "placement/shop/web";
const DELAY: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_reconciler_applies_in_order_reports_ready_and_prunes() -> anyhow::Result<()> {
    let options = SimulatorOptions {
        delay: DELAY,
        nodes: 1,
        failures: Vec::new(),
    };
    let cluster = HollowCluster::new("edge-1", options, Arc::new(Discovery::builtin()));
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, Store::open(dir.path())?)?;

    // Deliberately out of order: the agent sorts.
    agent.assign(vec![
        deployment(),
        config_map(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    ])?;
    let ready = agent
        .status_of(|status| status.counts.ready == 1 || status.counts.failed == 1)
        .await?;
    assert_eq!(ready.counts.ready, 1, "{ready:?}");
    let web = cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .context("the deployment exists")?;
    assert_eq!(
        web["status"]["conditions"][0]["type"], "Available",
        "ready because the cluster said so: {web}"
    );

    let applied = cluster.applied();
    let position = |kind: &str, name: &str| {
        applied
            .iter()
            .position(|record| record.kind == kind && record.name == name)
    };
    let namespace_at = position("Namespace", "shop").context("the namespace was applied")?;
    let config_at = position("ConfigMap", "conf").context("the config map was applied")?;
    let deployment_at = position("Deployment", "web").context("the deployment was applied")?;
    assert_eq!(
        cluster
            .first_write("ConfigMap", Some("shop"), "conf")
            .as_ref(),
        Some(&applied[config_at]),
        "first_write finds the same record"
    );
    assert_eq!(
        cluster.first_write("ConfigMap", Some("other"), "conf"),
        None
    );
    assert!(
        namespace_at < config_at && config_at < deployment_at,
        "namespace, then configuration, then workload: {applied:#?}"
    );
    let system_at = position("Namespace", "relaymesh-system").context("the system namespace")?;
    let parent_at = position("ConfigMap", "placement.shop.web").context("the ApplySet parent")?;
    assert!(system_at < parent_at, "{applied:#?}");
    // Objects are applied; the namespace the agent needed for the parent
    // is created (one request, refused if it exists).
    assert!(
        applied.iter().all(|record| match record.name.as_str() {
            "relaymesh-system" => record.operation == Operation::Create,
            _ => record.operation == Operation::Apply,
        }),
        "{applied:#?}"
    );

    // The config map leaves the bundle: it is pruned, the rest stays.
    agent.assign(vec![
        deployment(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    ])?;
    eventually("the config map is pruned", || async {
        Ok(cluster
            .object("", "ConfigMap", Some("shop"), "conf")
            .is_none())
    })
    .await?;
    assert!(cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .is_some());

    // The placement leaves the slice: everything of it is pruned, workloads
    // before the namespace they are in.
    let before = cluster.applied().len();
    agent.publish(Vec::new());
    eventually("the placement is pruned", || async {
        Ok(cluster.object("", "Namespace", None, "shop").is_none()
            && cluster
                .object(
                    "",
                    "ConfigMap",
                    Some("relaymesh-system"),
                    "placement.shop.web",
                )
                .is_none())
    })
    .await?;
    let deletes: Vec<AppliedRecord> = cluster.applied()[before..]
        .iter()
        .filter(|record| record.operation == Operation::Delete)
        .cloned()
        .collect();
    let deleted = |kind: &str, name: &str| {
        deletes
            .iter()
            .position(|record| record.kind == kind && record.name == name)
    };
    let workload_at = deleted("Deployment", "web").context("the deployment was deleted")?;
    let namespace_at = deleted("Namespace", "shop").context("the namespace was deleted")?;
    assert!(workload_at < namespace_at, "{deletes:#?}");
    assert!(cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .is_none());
    agent.stop().await
}

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
}

fn config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "conf", "namespace": "shop"}, "data": {"key": "1"}})
}

/// One agent's reconciler on its own store, fed slices as its daemon would.
struct Agent {
    store: Store,
    slice: watch::Sender<AgentSlice>,
    status: mpsc::Receiver<(String, Option<PlacementStatus>)>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ReconcileError>>,
    bundles_stored: u64,
}

impl Agent {
    /// Starts a reconciler on `store`, marked as synchronized with its
    /// parent once (so a slice may remove placements).
    fn start(cluster: &HollowCluster, store: Store) -> anyhow::Result<Self> {
        store.apply(&[Mutation::SetParentPosition(Resume {
            epoch: 1,
            revision: 1,
        })])?;
        let (slice, slice_rx) = watch::channel(AgentSlice::default());
        let (status_tx, status) = mpsc::channel(256);
        let reconciler = Reconciler::new(
            cluster.client(),
            store.clone(),
            cluster.name(),
            slice_rx,
            status_tx,
        )?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reconciler.run(shutdown.clone()));
        Ok(Self {
            store,
            slice,
            status,
            shutdown,
            task,
            bundles_stored: 0,
        })
    }

    /// Publishes a slice of placement [`KEY`] with `objects` packed into a
    /// bundle, stored first.
    fn assign(&mut self, objects: Vec<Value>) -> anyhow::Result<()> {
        let refs: Vec<&Value> = objects.iter().collect();
        let bytes = relaymesh_root::placement::pack(&refs);
        let id = BundleId::of(&bytes);
        self.store.put_bundle(&id, &bytes)?;
        self.bundles_stored += 1;
        // The body the root writes for a placement with a default spec.
        let body = relaymesh_protocol::PlacementBody {
            namespace: "shop".into(),
            name: "web".into(),
            ..Default::default()
        }
        .encode()?;
        self.publish(vec![SliceEntry {
            key: KEY.to_string(),
            target: Target::Everywhere,
            bundles: vec![id],
            body,
            serial: 0,
            signature: Vec::new(),
        }]);
        Ok(())
    }

    fn publish(&self, entries: Vec<SliceEntry>) {
        self.slice.send_replace(AgentSlice {
            entries: Arc::new(entries),
            bundles_stored: self.bundles_stored,
        });
    }

    /// Waits for a status of [`KEY`] that `accept` takes.
    async fn status_of(
        &mut self,
        accept: impl Fn(&PlacementStatus) -> bool,
    ) -> anyhow::Result<PlacementStatus> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let next = tokio::time::timeout_at(deadline, self.status.recv())
                .await
                .context("no such status in time")?;
            match next {
                Some((key, Some(status))) if key == KEY && accept(&status) => return Ok(status),
                Some(_) => {}
                None => bail!("the reconciler stopped"),
            }
        }
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task.await??;
        Ok(())
    }
}

/// Checks `check` until it holds, for at most [`PATIENCE`].
async fn eventually<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await? {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
