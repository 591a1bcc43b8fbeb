//! What the reconciler holds: its own fields, how it is built, and what it
//! knows of each assigned placement. The leaf the other parts of the
//! reconciler share, so they read one another's state without importing one
//! another.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Client;
use relaymesh_node::daemon::AgentSlice;
use relaymesh_node::store::Store;
use relaymesh_protocol::{BundleId, PlacementStatus};
use relaymesh_topology::customization::Customization;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::error::ReconcileError;
use crate::applier::Applier;
use crate::drift::{ClusterEvent, Watches};
use crate::inventory::Inventory;
use crate::manifest::{Manifest, ObjectRef};
use crate::policy::Policy;
use crate::rules::PlacementRules;
use crate::status::{self, Health, Reporter};

/// What the reconciler knows of one assigned placement.
#[derive(Debug, Default)]
pub(super) struct Placement {
    pub(super) bundles: Vec<BundleId>,
    /// Its spec says `adopt: true`: it may take over existing objects.
    pub(super) adopt: bool,
    /// Its status rules and group labels.
    pub(super) rules: PlacementRules,
    /// Its templates and overrides.
    pub(super) customization: Customization,
    /// Why its entry's body could not be read: it is not applied, and
    /// fails saying so.
    pub(super) unreadable: Option<String>,
    /// The objects last read from its bundles.
    pub(super) desired: BTreeMap<ObjectRef, Manifest>,
    /// Every object of it was applied once (failures aside).
    pub(super) applied: bool,
    /// Objects that could not be applied, with why (refusals included).
    pub(super) errors: BTreeMap<ObjectRef, String>,
    /// A message for a failure that is not one object's.
    pub(super) problem: Option<String>,
    pub(super) health: BTreeMap<ObjectRef, Health>,
    /// Each applied object as the cluster last showed it (status included),
    /// with the bundle it came from: what status rules and the
    /// single-cluster status report read.
    pub(super) live: BTreeMap<ObjectRef, status::Live>,
    /// The bundle each object of the current bundles comes from.
    pub(super) origins: BTreeMap<ObjectRef, BundleId>,
    /// The resourceVersion our last apply returned, per object: watch
    /// events carrying it are our own writes.
    pub(super) written: BTreeMap<ObjectRef, String>,
    /// The objects of `desired` the cluster holds as this run of the agent
    /// last wrote them: a pass does not write them again while their
    /// manifest is unchanged (a no-op server-side apply is still a request
    /// and a write to the cluster's store). Drift, a deletion or a broken
    /// watch on their kind takes them out.
    pub(super) held: BTreeSet<ObjectRef>,
    /// The objects the ApplySet parent was last written with by this run:
    /// a pass that records the same set does not write it again.
    pub(super) parent_written: Option<BTreeSet<ObjectRef>>,
    /// The revision its last pass applied (the first of the bundles it
    /// applied then): what its status says it runs, so the root counts it
    /// as running the newest revision only once it does.
    pub(super) applied_revision: Option<BundleId>,
    /// While its newest revision rolls out: which it is, and whether this
    /// cluster's wave lets it run it (else it runs the previous one).
    pub(super) wave: Option<(BundleId, bool)>,
    /// The label the rollout's wave is keyed by: its counts are reported
    /// per value of it too.
    pub(super) wave_label: Option<String>,
    /// The rollout's timing, from its spec.
    pub(super) timing: Timing,
    /// The entry body `spec_adopt`, `timing`, `customization` and `rules`
    /// were read from (compared, not hashed: a few hundred bytes).
    pub(super) read_body: Option<Vec<u8>>,
    /// Its spec says `adopt: true` (applied to `adopt` with its bundles).
    pub(super) spec_adopt: bool,
    /// It is count-bounded (`maxClusters`): a drain places it elsewhere.
    pub(super) bounded: bool,
    /// It arrived when the cluster already ran as many placements as its
    /// capacity allows: it is not applied, and fails saying so.
    pub(super) over_capacity: bool,
    /// The replicas its workloads asked for at its last pass (`None`
    /// before its first since the agent started).
    pub(super) replicas: Option<u64>,
    /// It would pass the cluster's replica capacity: it is not applied,
    /// and fails saying so (see `reconciler/room.rs`).
    pub(super) waiting_for_room: bool,
    /// Since when it runs the newest revision, and since when that is
    /// ready: what `minSuccessTime` and `progressDeadline` are measured by.
    pub(super) updating_since: Option<Instant>,
    pub(super) ready_since: Option<Instant>,
    /// When to report again because a rollout's time runs out.
    pub(super) report_at: Option<Instant>,
    /// When to reconcile it next; `None` waits for a change.
    pub(super) due: Option<Instant>,
    pub(super) failures: u32,
    pub(super) last_pass: Option<Instant>,
}

/// A rollout's times, as its spec says (`minSuccessTime`,
/// `progressDeadline`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) min_success: Duration,
    pub(super) deadline: Option<Duration>,
}

/// The controller. Build it with [`Reconciler::new`], then [`Reconciler::run`].
pub struct Reconciler {
    pub(super) cluster: String,
    /// The cluster's labels: templates, status rules and group labels read
    /// them. Those it registered with, changed as the root says
    /// (`relayctl label cluster`).
    pub(super) labels: BTreeMap<String, String>,
    /// The labels it registered with.
    pub(super) base_labels: BTreeMap<String, String>,
    /// Its annotations, as the root set them (`relayctl annotate
    /// cluster`): templates read them.
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) store: Store,
    pub(super) applier: Applier,
    pub(super) inventory: Inventory,
    pub(super) slice: watch::Receiver<AgentSlice>,
    pub(super) reporter: Reporter,
    pub(super) watches: Watches,
    pub(super) events: mpsc::Receiver<ClusterEvent>,
    pub(super) placements: BTreeMap<String, Placement>,
    /// The slice comes from a daemon that synchronized with its parent.
    pub(super) trusted: bool,
    /// What the agent agrees to write.
    pub(super) policy: Policy,
    /// The most placements it runs (`edge-agent join --max-placements`).
    pub(super) max_placements: Option<usize>,
    /// The most replicas its placements' workloads ask for in all
    /// (`edge-agent join --max-replicas`).
    pub(super) max_replicas: Option<u64>,
    /// The replicas of what runs, when last counted.
    pub(super) replicas_used: u64,
    /// Where it tells the daemon whether the cluster is out of room.
    pub(super) out_of_room: Option<watch::Sender<bool>>,
    /// Why the cluster's API cannot be reached (`ClusterUnreachable`), or
    /// `None` while it answers: see `reconciler/reachability.rs`.
    pub(super) unreachable: Option<String>,
    /// Where it tells the daemon whether the cluster's API does not answer.
    pub(super) unreachable_flag: Option<watch::Sender<bool>>,
}

impl Reconciler {
    /// A reconciler for cluster `cluster` (its name, for status messages)
    /// reached by `client`, on the node's `store` (bundles, its position in
    /// the parent's history, and the `applied` inventory tree), fed by the
    /// daemon's `slice` and reporting on `status` (the two ends of
    /// [`relaymesh_node::daemon::AgentHooks`]).
    pub fn new(
        client: Client,
        store: Store,
        cluster: impl Into<String>,
        slice: watch::Receiver<AgentSlice>,
        status: mpsc::Sender<(String, Option<PlacementStatus>)>,
    ) -> Result<Self, ReconcileError> {
        let inventory = Inventory::new(store.open_tree(crate::inventory::TREE)?);
        let config = store.config()?;
        let max_placements = config.as_ref().and_then(|config| {
            config
                .capacity
                .get(relaymesh_protocol::inventory::PLACEMENTS_CAPACITY)
                .and_then(|limit| limit.parse().ok())
        });
        let max_replicas = config.as_ref().and_then(|config| {
            config
                .capacity
                .get(relaymesh_protocol::inventory::REPLICAS_CAPACITY)
                .and_then(|limit| limit.parse().ok())
        });
        let labels = config.map(|config| config.labels).unwrap_or_default();
        let (events_tx, events) = mpsc::channel(1024);
        Ok(Self {
            cluster: cluster.into(),
            base_labels: labels.clone(),
            labels,
            annotations: BTreeMap::new(),
            store,
            applier: Applier::new(client.clone()),
            inventory,
            slice,
            reporter: Reporter::new(status),
            watches: Watches::new(client, events_tx),
            events,
            placements: BTreeMap::new(),
            trusted: false,
            policy: Policy::default(),
            max_placements,
            max_replicas,
            replicas_used: 0,
            out_of_room: None,
            unreachable: None,
            unreachable_flag: None,
        })
    }

    /// The reconciler telling `out_of_room` whether its cluster has room
    /// left for more replicas (for a cluster joined with `--max-replicas`).
    pub fn with_room(mut self, out_of_room: watch::Sender<bool>) -> Self {
        self.out_of_room = Some(out_of_room);
        self
    }

    /// The reconciler telling `unreachable` whether its cluster's API does
    /// not answer (the node labels itself so: see `reconciler/reachability.rs`).
    pub fn with_reachability(mut self, unreachable: watch::Sender<bool>) -> Self {
        self.unreachable_flag = Some(unreachable);
        self
    }

    /// The reconciler with apply policy `policy` instead of the default.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// This cluster, as templates and overrides see it.
    pub(crate) fn cluster(&self) -> relaymesh_topology::customization::Cluster<'_> {
        relaymesh_topology::customization::Cluster {
            name: &self.cluster,
            labels: &self.labels,
            annotations: &self.annotations,
        }
    }
}
