//! The reconciler: a kube-rs style controller loop that keeps every
//! placement assigned to this cluster applied, pruned and reported.
//!
//! Inputs: the slice the daemon publishes (a `watch` channel of
//! [`AgentSlice`]), bundles in the node's sled [`Store`], and events from
//! the watchers on applied kinds ([`crate::drift`]). Output: the cluster's
//! objects, the local [`Inventory`], and per-placement status on the
//! daemon's channel.
//!
//! [`Reconciler::reconcile`] handles one placement and returns an
//! [`Action`]: requeue after a backoff (something failed), or await a change
//! (a new slice, a stored bundle, drift, a status change). Everything it
//! needs is local, so it keeps working with the uplink down and after a
//! restart. It never prunes a whole placement on an untrusted slice: until
//! the daemon has synchronized with its parent once (`parent_position` is
//! set), a placement missing from the slice is kept.
//!
//! What it may write is its [`Policy`]'s decision (see [`crate::policy`]):
//! a refused object is reported as a failure of its placement and the rest
//! of the bundle is applied.
//!
//! The apply pass of one placement is in `reconciler/pass.rs`.

mod pass;
mod reachability;
mod read;
mod room;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Client;
use relaymesh_node::daemon::AgentSlice;
use relaymesh_node::store::{Store, StoreError};
use relaymesh_protocol::{BundleId, PlacementStatus};
use relaymesh_topology::customization::Customization;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::applier::Applier;
use crate::drift::{ClusterEvent, Watches};
use crate::inventory::{Inventory, InventoryError};
use crate::manifest::{self, Manifest, ObjectRef};
use crate::policy::{self, Policy};
use crate::prune::{self, ApplySet};
use crate::rules::PlacementRules;
use crate::status::{self, Health, Reporter};

use relaymesh_protocol::placement::KEY_PREFIX as PLACEMENT_PREFIX;

/// The first retry after a failure; doubled per failure up to
/// [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The shortest time between two passes of one placement triggered by
/// drift, so a field the cluster normalizes cannot make a hot loop.
pub const DRIFT_SPACING: Duration = Duration::from_millis(500);

/// Why the reconciler stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReconcileError {
    /// The node's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The inventory failed; the agent stops rather than change the cluster
    /// without a record.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
}

/// What to do with a placement after reconciling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long.
    Requeue(Duration),
    /// Reconcile again when something changes.
    AwaitChange,
}

/// What the reconciler knows of one assigned placement.
#[derive(Debug, Default)]
struct Placement {
    bundles: Vec<BundleId>,
    /// Its spec says `adopt: true`: it may take over existing objects.
    adopt: bool,
    /// Its status rules and group labels.
    rules: PlacementRules,
    /// Its templates and overrides, with the spec field they were read
    /// from (to tell a change).
    customization: (Option<Value>, Customization),
    /// The objects last read from its bundles.
    desired: BTreeMap<ObjectRef, Manifest>,
    /// Every object of it was applied once (failures aside).
    applied: bool,
    /// Objects that could not be applied, with why (refusals included).
    errors: BTreeMap<ObjectRef, String>,
    /// A message for a failure that is not one object's.
    problem: Option<String>,
    health: BTreeMap<ObjectRef, Health>,
    /// Each applied object as the cluster last showed it (status included),
    /// with the bundle it came from: what status rules and the
    /// single-cluster status report read.
    live: BTreeMap<ObjectRef, status::Live>,
    /// The bundle each object of the current bundles comes from.
    origins: BTreeMap<ObjectRef, BundleId>,
    /// The resourceVersion our last apply returned, per object: watch
    /// events carrying it are our own writes.
    written: BTreeMap<ObjectRef, String>,
    /// The revision its last pass applied (the first of the bundles it
    /// applied then): what its status says it runs, so the root counts it
    /// as running the newest revision only once it does.
    applied_revision: Option<BundleId>,
    /// While its newest revision rolls out: which it is, and whether this
    /// cluster's wave lets it run it (else it runs the previous one).
    wave: Option<(BundleId, bool)>,
    /// The label the rollout's wave is keyed by: its counts are reported
    /// per value of it too.
    wave_label: Option<String>,
    /// The rollout's timing, from its spec.
    timing: Timing,
    /// The entry body `spec_adopt`, `timing`, `customization` and `rules`
    /// were read from (compared, not hashed: a few hundred bytes).
    read_body: Option<Vec<u8>>,
    /// Its spec says `adopt: true` (applied to `adopt` with its bundles).
    spec_adopt: bool,
    /// It is count-bounded (`maxClusters`): a drain places it elsewhere.
    bounded: bool,
    /// It arrived when the cluster already ran as many placements as its
    /// capacity allows: it is not applied, and fails saying so.
    over_capacity: bool,
    /// The replicas its workloads asked for at its last pass (`None`
    /// before its first since the agent started).
    replicas: Option<u64>,
    /// It would pass the cluster's replica capacity: it is not applied,
    /// and fails saying so (see `reconciler/room.rs`).
    waiting_for_room: bool,
    /// Since when it runs the newest revision, and since when that is
    /// ready: what `minSuccessTime` and `progressDeadline` are measured by.
    updating_since: Option<Instant>,
    ready_since: Option<Instant>,
    /// When to report again because a rollout's time runs out.
    report_at: Option<Instant>,
    /// When to reconcile it next; `None` waits for a change.
    due: Option<Instant>,
    failures: u32,
    last_pass: Option<Instant>,
}

/// A rollout's times, as its spec says (`minSuccessTime`,
/// `progressDeadline`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Timing {
    min_success: Duration,
    deadline: Option<Duration>,
}

/// The controller. Build it with [`Reconciler::new`], then [`Reconciler::run`].
pub struct Reconciler {
    cluster: String,
    /// The cluster's labels: templates, status rules and group labels read
    /// them. Those it registered with, changed as the root says
    /// (`relayctl label cluster`).
    labels: BTreeMap<String, String>,
    /// The labels it registered with.
    base_labels: BTreeMap<String, String>,
    /// Its annotations, as the root set them (`relayctl annotate
    /// cluster`): templates read them.
    annotations: BTreeMap<String, String>,
    store: Store,
    applier: Applier,
    inventory: Inventory,
    slice: watch::Receiver<AgentSlice>,
    reporter: Reporter,
    watches: Watches,
    events: mpsc::Receiver<ClusterEvent>,
    placements: BTreeMap<String, Placement>,
    /// The slice comes from a daemon that synchronized with its parent.
    trusted: bool,
    /// What the agent agrees to write.
    policy: Policy,
    /// The most placements it runs (`edge-agent join --max-placements`).
    max_placements: Option<usize>,
    /// The most replicas its placements' workloads ask for in all
    /// (`edge-agent join --max-replicas`).
    max_replicas: Option<u64>,
    /// The replicas of what runs, when last counted.
    replicas_used: u64,
    /// Where it tells the daemon whether the cluster is out of room.
    out_of_room: Option<watch::Sender<bool>>,
    /// Why the cluster's API cannot be reached (`ClusterUnreachable`), or
    /// `None` while it answers: see `reconciler/reachability.rs`.
    unreachable: Option<String>,
    /// Where it tells the daemon whether the cluster's API does not answer.
    unreachable_flag: Option<watch::Sender<bool>>,
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

    /// Runs until `shutdown` is cancelled or the slice's sender is gone. The
    /// first slice handled is the first one published after the reconciler
    /// was built (the channel's initial value says nothing).
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), ReconcileError> {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            changed = self.slice.changed() => if changed.is_err() { return Ok(()) },
        }
        self.sync_slice().await?;
        let mut reachability = reachability::probe(self.applier.client().clone(), shutdown.clone());
        loop {
            self.reconcile_due().await?;
            self.report_due().await;
            let next = self
                .placements
                .values()
                .flat_map(|p| [p.due, p.report_at])
                .flatten()
                .min();
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = self.slice.changed() => match changed {
                    Ok(()) => self.sync_slice().await?,
                    Err(_) => return Ok(()),
                },
                Some(event) = self.events.recv() => self.handle_event(event).await,
                Ok(()) = reachability.changed() => {
                    let unreachable = reachability.borrow_and_update().clone();
                    self.set_unreachable(unreachable).await;
                }
                () = sleep_until(next) => {}
            }
        }
    }

    /// Reconciles the placements that are due, in key order.
    async fn reconcile_due(&mut self) -> Result<(), ReconcileError> {
        if self.unreachable.is_some() {
            self.hold_due().await;
            return Ok(());
        }
        let now = Instant::now();
        let mut due: Vec<String> = self
            .placements
            .iter()
            .filter(|(_, placement)| placement.due.is_some_and(|due| due <= now))
            .map(|(key, _)| key.clone())
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        if self.max_replicas.is_some() {
            // Those the cluster runs first: what they ask for now is what
            // the others' room is counted against.
            let running = self.inventory.placements()?;
            due.sort_by_key(|key| !running.contains_key(key));
        }
        for key in due {
            let span = tracing::info_span!("placement", key = %key);
            let action = self.reconcile(&key).instrument(span).await?;
            if let Some(placement) = self.placements.get_mut(&key) {
                placement.last_pass = Some(Instant::now());
                placement.due = match action {
                    Action::Requeue(after) => Some(Instant::now() + after),
                    Action::AwaitChange => None,
                };
            }
        }
        self.update_room()
    }

    /// Reports the placements whose rollout times ran out.
    async fn report_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .placements
            .iter()
            .filter(|(_, placement)| placement.report_at.is_some_and(|at| at <= now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if let Some(placement) = self.placements.get_mut(&key) {
                placement.report_at = None;
            }
            self.report(&key).await;
        }
    }

    /// Takes the newest slice: new and changed placements become due,
    /// placements gone from a trusted slice are removed from the cluster.
    async fn sync_slice(&mut self) -> Result<(), ReconcileError> {
        let slice = self.slice.borrow_and_update().clone();
        if !self.trusted {
            self.trusted = self.store.load()?.parent_position.is_some();
        }
        let labels_key = relaymesh_protocol::ClusterLabels::key_for(&self.cluster);
        let change = slice
            .entries
            .iter()
            .find(|entry| entry.key == labels_key)
            .and_then(relaymesh_protocol::ClusterLabels::from_entry)
            .and_then(Result::ok);
        let labels = change.as_ref().map_or_else(
            || self.base_labels.clone(),
            |change| change.apply(&self.base_labels),
        );
        let annotations = change.map(|change| change.annotations).unwrap_or_default();
        let relabelled = labels != self.labels;
        if relabelled {
            tracing::info!(
                ?labels,
                "the cluster's labels changed: customizing and summarizing again"
            );
            self.labels = labels;
        }
        let reannotated = annotations != self.annotations;
        if reannotated {
            tracing::info!(
                annotations = annotations.len(),
                "the cluster's annotations changed: customizing again"
            );
            self.annotations = annotations;
        }
        let mut assigned = BTreeSet::new();
        let mut rules_changed = Vec::new();
        for entry in slice.entries.iter() {
            if !entry.key.starts_with(PLACEMENT_PREFIX) {
                continue;
            }
            assigned.insert(entry.key.clone());
            let placement = self.placements.entry(entry.key.clone()).or_default();
            // The body is read (and its status rules compiled) once per
            // body, not on every slice the node publishes.
            if placement.read_body.as_deref() != Some(entry.body.as_slice()) {
                placement.read_body = Some(entry.body.clone());
                let body = serde_json::from_slice::<Value>(&entry.body).unwrap_or_default();
                placement.spec_adopt = policy::adopt_requested_in(&body);
                placement.timing = timing_of(&body);
                let customization = customization_of(&body);
                if placement.customization.0 != customization.0 {
                    placement.customization = customization;
                    placement.applied = false;
                }
                let rules = PlacementRules::from_entry_body(&body);
                if !placement.rules.same_source(&rules) {
                    placement.rules = rules;
                    // Only what is reported changes: no pass is needed.
                    rules_changed.push(entry.key.clone());
                }
            }
            if relabelled {
                rules_changed.push(entry.key.clone());
            }
            let adopt = placement.spec_adopt;
            if relabelled || reannotated {
                // Templates and overrides may read them.
                placement.applied = false;
            }
            let (mut bundles, wave) = self_bundles(entry, &self.labels);
            if bundles.is_empty() && matches!(wave, Some((_, false))) {
                // Outside the wave with no previous revision to run: what
                // it runs already (a revision the root no longer offers)
                // stays, rather than being pruned for want of one.
                bundles.clone_from(&placement.bundles);
            }
            if placement.wave != wave {
                tracing::info!(?wave, "the rollout's wave changed for this cluster");
                placement.updating_since = None;
                placement.ready_since = None;
                placement.wave = wave;
                rules_changed.push(entry.key.clone());
            }
            placement.wave_label = match &entry.target {
                relaymesh_protocol::Target::Placement(target) => {
                    target.wave.as_ref().and_then(|wave| wave.key_label.clone())
                }
                _ => None,
            };
            placement.bounded = matches!(
                &entry.target,
                relaymesh_protocol::Target::Placement(target)
                    if target.max_clusters.is_some() || target.quota.is_some()
            );
            // A changed entry, or one still waiting for its bundles.
            if placement.bundles != bundles || placement.adopt != adopt || !placement.applied {
                placement.bundles = bundles;
                placement.adopt = adopt;
                placement.failures = 0;
                placement.due = Some(Instant::now());
            }
        }
        self.check_capacity(&assigned)?;
        for key in rules_changed {
            self.report(&key).await;
        }
        let gone: Vec<String> = self
            .placements
            .keys()
            .filter(|key| !assigned.contains(*key))
            .cloned()
            .collect();
        for key in gone {
            self.placements.remove(&key);
            self.reporter.forget(&key).await;
        }
        if self.trusted {
            for key in self.inventory.placements()?.into_keys() {
                if !assigned.contains(&key) {
                    let span = tracing::info_span!("placement", key = %key);
                    self.remove_placement(&key).instrument(span).await?;
                }
            }
        } else if assigned.is_empty() && !self.inventory.placements()?.is_empty() {
            tracing::warn!("empty slice before the first sync with the parent: pruning nothing");
        }
        self.update_room()
    }

    /// Marks the placements this cluster has no room for: beyond its
    /// capacity, the ones it never applied, last by key, wait (failing,
    /// saying why) until others leave.
    fn check_capacity(&mut self, assigned: &BTreeSet<String>) -> Result<(), ReconcileError> {
        let Some(limit) = self.max_placements else {
            return Ok(());
        };
        let applied = self.inventory.placements()?;
        let mut room = limit.saturating_sub(
            assigned
                .iter()
                .filter(|key| applied.contains_key(*key))
                .count(),
        );
        for key in assigned {
            let Some(placement) = self.placements.get_mut(key) else {
                continue;
            };
            let over = if applied.contains_key(key) {
                false
            } else if room > 0 {
                room -= 1;
                false
            } else {
                true
            };
            if placement.over_capacity != over {
                placement.over_capacity = over;
                placement.due = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// This cluster, as templates and overrides see it.
    pub(crate) fn cluster(&self) -> relaymesh_topology::customization::Cluster<'_> {
        relaymesh_topology::customization::Cluster {
            name: &self.cluster,
            labels: &self.labels,
            annotations: &self.annotations,
        }
    }

    /// Reconciles placement `key`: applies its bundles, prunes what left
    /// them, and reports its status.
    pub async fn reconcile(&mut self, key: &str) -> Result<Action, ReconcileError> {
        let action = pass::run(self, key).await?;
        self.report(key).await;
        Ok(action)
    }

    /// Deletes everything recorded for a placement that is no longer
    /// assigned, then its ApplySet parent and its record.
    async fn remove_placement(&mut self, key: &str) -> Result<(), ReconcileError> {
        let Some(mut record) = self.inventory.placement(key)? else {
            return Ok(());
        };
        tracing::info!(
            objects = record.objects.len(),
            "placement unassigned: pruning it"
        );
        let applyset = ApplySet::of(key);
        let remaining = pass::prune(
            &mut self.applier,
            &self.inventory,
            &applyset,
            record.objects.iter().cloned().collect(),
        )
        .await?;
        record.objects = remaining.keys().cloned().collect();
        if record.objects.is_empty() {
            if let Err(error) = applyset.delete_parent(&mut self.applier).await {
                tracing::warn!(%error, "cannot delete the ApplySet parent");
            }
            self.inventory.remove_placement(key).await?;
        } else {
            self.inventory.set_placement(key, &record).await?;
        }
        self.prune_namespaces().await?;
        Ok(())
    }

    /// Deletes the namespaces relaymesh created that none of its objects
    /// use any more.
    async fn prune_namespaces(&mut self) -> Result<(), ReconcileError> {
        let created = self.inventory.created_namespaces()?;
        if created.is_empty() {
            return Ok(());
        }
        let in_use: BTreeSet<String> = self
            .inventory
            .placements()?
            .values()
            .flat_map(|record| record.objects.iter())
            .filter_map(|object| object.namespace.clone())
            .collect();
        let kept = prune::prune_namespaces(&mut self.applier, &created, &in_use).await;
        if kept != created {
            self.inventory.set_created_namespaces(&kept).await?;
        }
        Ok(())
    }

    /// Reacts to a managed object changing in the cluster: drift makes its
    /// placement due; a changed health is reported.
    async fn handle_event(&mut self, event: ClusterEvent) {
        let Some((key, placement)) = self
            .placements
            .iter_mut()
            .find(|(_, placement)| placement.desired.contains_key(&event.reference))
        else {
            return;
        };
        let key = key.clone();
        let Some(manifest) = placement.desired.get(&event.reference) else {
            return;
        };
        let drifted = match &event.object {
            None => {
                tracing::info!(placement = %key, object = %event.reference, "managed object deleted; restoring it");
                placement.live.remove(&event.reference);
                true
            }
            Some(live) => {
                let version = live
                    .pointer("/metadata/resourceVersion")
                    .and_then(serde_json::Value::as_str);
                let ours = version.is_some()
                    && version == placement.written.get(&event.reference).map(String::as_str);
                let health = status::health(&event.reference.group, &event.reference.kind, live);
                placement.health.insert(event.reference.clone(), health);
                if let Some(known) = placement.live.get_mut(&event.reference) {
                    known.object.clone_from(live);
                }
                let drifted =
                    !ours && !manifest.create_only && !manifest::contains(live, &manifest.body);
                if drifted {
                    tracing::info!(placement = %key, object = %event.reference, "managed object changed; restoring it");
                }
                drifted
            }
        };
        if drifted && placement.applied {
            let earliest = placement
                .last_pass
                .map_or_else(Instant::now, |last| last + DRIFT_SPACING);
            let due = earliest.max(Instant::now());
            placement.due = Some(placement.due.map_or(due, |current| current.min(due)));
        }
        self.report(&key).await;
    }

    /// Reports placement `key`'s status (if it changed).
    async fn report(&mut self, key: &str) {
        let Some(placement) = self.placements.get_mut(key) else {
            return;
        };
        let draining = self
            .labels
            .get(relaymesh_topology::placement::DRAINING_LABEL)
            .is_some_and(|value| value == "true");
        if draining && placement.bounded {
            // Held here only until its replacement runs: the root counts
            // the clusters that replace this one, not this one.
            self.reporter.forget(key).await;
            return;
        }
        let mut phase = status::phase(
            placement.applied,
            placement.errors.len() + usize::from(placement.problem.is_some()),
            placement.health.values(),
        );
        if matches!(placement.wave, Some((_, false))) && placement.bundles.is_empty() {
            // Waiting for its wave, with no previous revision to run.
            phase = status::Phase::Pending;
        }
        let revision = rollout_counts(placement, &phase, Instant::now());
        let placement = &*placement;
        let failed_workload = placement
            .health
            .iter()
            .find_map(|(object, health)| match health {
                Health::Failed(reason) => Some(format!("{object}: {reason}")),
                _ => None,
            });
        let message = placement
            .problem
            .clone()
            .or_else(|| {
                placement
                    .errors
                    .iter()
                    .next()
                    .map(|(object, reason)| format!("{object}: {reason}"))
            })
            .or(failed_workload)
            .map(|message| format!("{}: {message}", self.cluster));
        let mut status = status::placement_status(&self.cluster, &phase, message);
        status.rules = placement.rules.summaries(
            placement.live.values().map(|live| &live.object),
            &self.cluster,
            &self.labels,
            &phase,
        );
        status.objects = placement
            .live
            .iter()
            .filter_map(|(reference, live)| status::object_status(reference, live))
            .take(relaymesh_protocol::status::MAX_REPORTED_OBJECTS)
            .collect();
        status.revision_groups = match (&placement.wave_label, &revision) {
            (Some(label), Some(counts)) => vec![relaymesh_protocol::RevisionGroup {
                label: label.clone(),
                value: relaymesh_topology::rollout::key_of(&self.labels, label).to_string(),
                counts: *counts,
            }],
            _ => Vec::new(),
        };
        status.revisions = revision.into_iter().collect();
        status.applied_revisions = placement
            .applied_revision
            .map(|revision| relaymesh_protocol::AppliedRevision {
                revision,
                counts: status.counts,
            })
            .into_iter()
            .collect();
        self.reporter.report(key, status).await;
    }
}

/// The backoff after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    MIN_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The bundles this cluster applies of `entry`, and the rollout's newest
/// revision with whether this cluster's wave lets it run it: while a
/// rollout runs (the entry has a wave), the newest revision (the first
/// bundle) if the wave says so, else the previous (the second, if any);
/// otherwise every bundle.
fn self_bundles(
    entry: &relaymesh_protocol::SliceEntry,
    labels: &BTreeMap<String, String>,
) -> (Vec<BundleId>, Option<(BundleId, bool)>) {
    let relaymesh_protocol::Target::Placement(target) = &entry.target else {
        return (entry.bundles.clone(), None);
    };
    let (Some(wave), Some(&newest)) = (&target.wave, entry.bundles.first()) else {
        return (entry.bundles.clone(), None);
    };
    let admitted = relaymesh_topology::rollout::leaf_in_wave(wave, labels);
    let bundles = if admitted {
        vec![newest]
    } else {
        entry.bundles.get(1).copied().into_iter().collect()
    };
    (bundles, Some((newest, admitted)))
}

/// How this cluster counts in its placement's rollout, and when that
/// changes by itself (schedules a report then): waiting outside the wave;
/// failed if the placement failed or was not ready within the deadline;
/// succeeded once ready for `minSuccessTime`; updating before.
fn rollout_counts(
    placement: &mut Placement,
    phase: &status::Phase,
    now: Instant,
) -> Option<relaymesh_protocol::RevisionCounts> {
    let (revision, admitted) = placement.wave?;
    let mut counts = relaymesh_protocol::RevisionCounts {
        revision,
        waiting: 0,
        updating: 0,
        succeeded: 0,
        failed: 0,
    };
    if !admitted {
        counts.waiting = 1;
        return Some(counts);
    }
    let since = *placement.updating_since.get_or_insert(now);
    let timing = placement.timing;
    match phase {
        status::Phase::Failed => counts.failed = 1,
        status::Phase::Ready => {
            let ready = *placement.ready_since.get_or_insert(now);
            let done_at = ready + timing.min_success;
            if done_at <= now {
                counts.succeeded = 1;
            } else {
                counts.updating = 1;
                placement.report_at = Some(done_at);
            }
        }
        status::Phase::Pending | status::Phase::Applied => {
            placement.ready_since = None;
            match timing.deadline.map(|deadline| since + deadline) {
                Some(late) if late <= now => counts.failed = 1,
                Some(late) => {
                    counts.updating = 1;
                    placement.report_at = Some(late);
                }
                None => counts.updating = 1,
            }
        }
    }
    if *phase != status::Phase::Ready {
        placement.ready_since = None;
    }
    Some(counts)
}

/// A placement's rollout times, read from its slice entry's body (the root
/// checked them; unreadable ones count as none).
fn timing_of(body: &Value) -> Timing {
    match relaymesh_topology::spec::rollout::rollout(body.pointer("/spec/rollout")) {
        Ok(spec) => Timing {
            min_success: spec.min_success_time,
            deadline: spec.progress_deadline,
        },
        Err(_) => Timing::default(),
    }
}

/// A placement's `spec.customization`, read from its slice entry's body. The
/// root checked it before signing; one this agent cannot read (a newer
/// root's) is logged and left out.
fn customization_of(body: &Value) -> (Option<Value>, Customization) {
    let source = body.pointer("/spec/customization").cloned();
    match relaymesh_topology::spec::customization(source.as_ref()) {
        Ok(customization) => (source, customization),
        Err(error) => {
            tracing::warn!(%error, "customization left out");
            (source, Customization::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
