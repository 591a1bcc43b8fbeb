//! One apply pass of one placement: read its bundles from the store, record
//! its objects in the inventory, apply them in dependency order (waiting for
//! CRDs to be Established), prune what left it, and remember what happened
//! for status.
//!
//! Each object is written only once `reconciler/admit.rs` admits it; a
//! refused object is left alone and reported, and the pass goes on with the
//! rest.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::DynamicObject;
use relaymesh_protocol::BundleId;

use super::admit::{Admission, Skipped};
use super::error::ReconcileError;
use super::read::{customized, Read};
use super::removal::prune;
use super::room::{self, Room};
use super::schedule::{backoff, Action};
use super::state::{Placement, Reconciler};
use crate::applier::{into_value, Applier};
use crate::inventory::PlacementRecord;
use crate::manifest::{Manifest, ObjectRef};
use crate::metrics;
use crate::order::{self, Stage};
use crate::prune::ApplySet;
use crate::status;

/// Runs one pass of placement `key`.
pub(super) async fn run(reconciler: &mut Reconciler, key: &str) -> Result<Action, ReconcileError> {
    // Taken out of the map for the pass, so the rest of the reconciler can
    // be borrowed alongside; put back whatever happens.
    let Some(mut placement) = reconciler.placements.remove(key) else {
        return Ok(Action::AwaitChange);
    };
    let result = apply_placement(reconciler, key, &mut placement).await;
    reconciler.placements.insert(key.to_string(), placement);
    result
}

async fn apply_placement(
    reconciler: &mut Reconciler,
    key: &str,
    placement: &mut Placement,
) -> Result<Action, ReconcileError> {
    if placement.over_capacity {
        wait_for_capacity(reconciler.max_placements.unwrap_or_default(), placement);
        return Ok(Action::AwaitChange);
    }
    if let Some(why) = &placement.unreadable {
        placement.applied = false;
        placement.problem = Some(why.clone());
        return Ok(Action::AwaitChange);
    }
    let applyset = ApplySet::of(key);
    let Some((manifests, not_customized)) = read_bundles(reconciler, &applyset, placement)? else {
        placement.applied = false;
        return Ok(Action::AwaitChange);
    };
    if !has_room(reconciler, key, placement, &manifests)? {
        return Ok(Action::AwaitChange);
    }
    let started = std::time::Instant::now();
    metrics::APPLIES.inc();
    let applied = async {
        let recorded = record(reconciler, key, &applyset, placement, &manifests).await?;
        let admission = Admission::new(reconciler, &manifests, &not_customized, placement.adopt)?;
        let mut outcome = apply_objects(reconciler, placement, &manifests, admission).await?;
        prune_left(
            reconciler,
            (key, placement),
            &applyset,
            recorded,
            &manifests,
            &mut outcome,
        )
        .await?;
        Ok::<_, ReconcileError>(outcome)
    }
    .await;
    metrics::APPLY.observe(started.elapsed().as_secs_f64());
    let outcome = applied.inspect_err(|_| metrics::APPLY_ERRORS.inc())?;
    metrics::APPLY_ERRORS.inc_by(outcome.errors.len() as u64);
    tracing::info!(
        objects = manifests.len(),
        failed = outcome.errors.len(),
        refused = outcome.refused.len(),
        "placement applied"
    );
    Ok(settle(placement, manifests, outcome))
}

/// Holds a placement that arrived when the cluster already ran as many
/// placements as its `limit` allows: it fails, saying so.
fn wait_for_capacity(limit: usize, placement: &mut Placement) {
    tracing::warn!(
        limit,
        "no room for the placement: the cluster runs as many as its capacity allows"
    );
    placement.applied = false;
    placement.problem = Some(format!(
        "this cluster runs at most {limit} placements (edge-agent join --max-placements): this one waits until another leaves"
    ));
}

/// What a placement's bundles hold for this cluster: every object,
/// customized for it, and why some could not be (those stay as bundled and
/// are not applied).
type Customized = (BTreeMap<ObjectRef, Manifest>, BTreeMap<ObjectRef, String>);

/// The placement's objects from its bundles, customized for this cluster
/// (`spec.customization`); `None` while a bundle is not stored yet or
/// cannot be read (the placement's problem says why).
fn read_bundles(
    reconciler: &Reconciler,
    applyset: &ApplySet,
    placement: &mut Placement,
) -> Result<Option<Customized>, ReconcileError> {
    match customized(reconciler, &applyset.id, placement)? {
        Read::Waiting => Ok(None),
        Read::Unreadable(problem) => {
            placement.problem = Some(problem);
            Ok(None)
        }
        Read::Objects(manifests, not_customized, origins) => {
            placement.problem = None;
            placement.origins = origins;
            Ok(Some((manifests, not_customized)))
        }
    }
}

/// Whether the cluster has room for the replicas `manifests` ask for
/// (remembered as the placement's); if not, the placement waits, failing
/// with why.
fn has_room(
    reconciler: &Reconciler,
    key: &str,
    placement: &mut Placement,
    manifests: &BTreeMap<ObjectRef, Manifest>,
) -> Result<bool, ReconcileError> {
    let asked = room::replicas_of(manifests.values());
    placement.replicas = Some(asked);
    match reconciler.room_for(key, asked)? {
        Room::Fits => {
            placement.waiting_for_room = false;
            Ok(true)
        }
        Room::Waits(why) => {
            tracing::warn!(asked, "no room for the placement's replicas");
            placement.waiting_for_room = true;
            placement.applied = false;
            placement.problem = Some(why);
            Ok(false)
        }
    }
}

/// The placement's inventory record during its pass, and the objects it
/// held before that its bundles no longer do.
struct Recorded {
    record: PlacementRecord,
    stale: Vec<ObjectRef>,
}

/// Adds the objects of `manifests` to placement `key`'s record, and
/// writes its ApplySet parent with them (unless this run wrote it with the
/// same objects already), before the cluster is touched: a crash mid-pass
/// must not leave an object we created unrecorded.
async fn record(
    reconciler: &mut Reconciler,
    key: &str,
    applyset: &ApplySet,
    placement: &mut Placement,
    manifests: &BTreeMap<ObjectRef, Manifest>,
) -> Result<Recorded, ReconcileError> {
    let inventory = reconciler.inventory.clone();
    let stored = inventory.placement(key)?;
    let mut record = stored.clone().unwrap_or_default();
    record.applyset_id.clone_from(&applyset.id);
    let stale = record
        .objects
        .iter()
        .filter(|object| !manifests.contains_key(*object))
        .cloned()
        .collect();
    record.objects.extend(manifests.keys().cloned());
    // Each write waits for sled's flush: none when nothing is new.
    if stored.as_ref() != Some(&record) {
        inventory.set_placement(key, &record).await?;
    }
    write_parent(reconciler, applyset, placement, &record.objects).await;
    Ok(Recorded { record, stale })
}

/// Writes the ApplySet parent of `placement` with `objects`, unless this
/// run wrote it with those already.
async fn write_parent(
    reconciler: &mut Reconciler,
    applyset: &ApplySet,
    placement: &mut Placement,
    objects: &BTreeSet<ObjectRef>,
) {
    if placement.parent_written.as_ref() == Some(objects) {
        return;
    }
    placement.parent_written = None;
    match applyset
        .write_parent(&mut reconciler.applier, objects)
        .await
    {
        Ok(()) => placement.parent_written = Some(objects.clone()),
        Err(error) => tracing::warn!(%error, "cannot write the ApplySet parent"),
    }
}

/// What applying a placement's objects gave: what its status and drift
/// detection read.
#[derive(Default)]
struct Outcome {
    /// Objects not written or not pruned, with why (refusals included).
    errors: BTreeMap<ObjectRef, String>,
    /// Objects another try would refuse again.
    refused: BTreeSet<ObjectRef>,
    health: BTreeMap<ObjectRef, status::Health>,
    live: BTreeMap<ObjectRef, status::Live>,
    /// The resourceVersion each apply returned.
    written: BTreeMap<ObjectRef, String>,
    /// The objects the cluster holds as this pass wrote or found them.
    held: BTreeSet<ObjectRef>,
}

impl Outcome {
    fn skipped(&mut self, reference: &ObjectRef, skipped: Skipped) {
        if skipped.refused {
            self.refused.insert(reference.clone());
        }
        self.errors.insert(reference.clone(), skipped.reason);
    }

    /// Remembers `live`, what applying `reference` returned; `origin` is
    /// the bundle it comes from.
    fn applied(&mut self, reference: &ObjectRef, origin: Option<&BundleId>, live: DynamicObject) {
        let resource_version = live.metadata.resource_version.clone();
        let value = into_value(live);
        self.health.insert(
            reference.clone(),
            status::health(&reference.group, &reference.kind, &value),
        );
        if let Some(bundle) = origin {
            let live = status::Live {
                bundle: *bundle,
                object: value,
            };
            self.live.insert(reference.clone(), live);
        }
        if let Some(version) = resource_version {
            self.written.insert(reference.clone(), version);
        }
        self.held.insert(reference.clone());
    }

    /// Keeps what the last pass learnt of `reference`, which the cluster
    /// still holds as written then; `origin` is the bundle it comes from
    /// now.
    fn kept(&mut self, reference: &ObjectRef, origin: Option<&BundleId>, placement: &Placement) {
        if let Some(health) = placement.health.get(reference) {
            self.health.insert(reference.clone(), health.clone());
        }
        if let (Some(bundle), Some(live)) = (origin, placement.live.get(reference)) {
            let live = status::Live {
                bundle: *bundle,
                object: live.object.clone(),
            };
            self.live.insert(reference.clone(), live);
        }
        if let Some(version) = placement.written.get(reference) {
            self.written.insert(reference.clone(), version.clone());
        }
        self.held.insert(reference.clone());
    }
}

/// Whether the cluster holds `manifest` as this run last wrote it, so
/// that writing it again would change nothing.
fn is_held(placement: &Placement, manifest: &Manifest) -> bool {
    let reference = &manifest.reference;
    placement.held.contains(reference) && placement.desired.get(reference) == Some(manifest)
}

/// Applies `manifests` in dependency order, each once `admission` admits
/// it; a CRD is Established before anything that may use it is applied.
async fn apply_objects(
    reconciler: &mut Reconciler,
    placement: &Placement,
    manifests: &BTreeMap<ObjectRef, Manifest>,
    mut admission: Admission<'_>,
) -> Result<Outcome, ReconcileError> {
    let mut ordered: Vec<Manifest> = manifests.values().cloned().collect();
    order::sort(&mut ordered);
    let mut outcome = Outcome::default();
    let mut definitions = Vec::new();
    for manifest in &ordered {
        let reference = &manifest.reference;
        if is_held(placement, manifest) {
            tracing::trace!(object = %reference, "held as written; not written again");
            outcome.kept(reference, placement.origins.get(reference), placement);
            continue;
        }
        if order::stage_of(manifest) > Stage::Definitions {
            await_definitions(
                &mut reconciler.applier,
                &mut definitions,
                &mut outcome.errors,
            )
            .await;
        }
        if let Err(skipped) = admission.admit(reconciler, manifest).await? {
            outcome.skipped(reference, skipped);
            continue;
        }
        match reconciler.applier.apply(manifest).await {
            Ok(live) => {
                tracing::debug!(object = %reference, "applied");
                if order::stage_of(manifest) == Stage::Definitions {
                    definitions.push(reference.clone());
                }
                if let Ok(kind) = reconciler.applier.kind(reference).await {
                    reconciler.watches.watch(&kind.resource);
                }
                outcome.applied(reference, placement.origins.get(reference), live);
            }
            Err(error) => {
                tracing::warn!(object = %reference, %error, "apply failed");
                outcome.errors.insert(reference.clone(), error.to_string());
            }
        }
    }
    await_definitions(
        &mut reconciler.applier,
        &mut definitions,
        &mut outcome.errors,
    )
    .await;
    Ok(outcome)
}

/// Waits for the CRDs applied so far to be Established.
async fn await_definitions(
    applier: &mut Applier,
    definitions: &mut Vec<ObjectRef>,
    errors: &mut BTreeMap<ObjectRef, String>,
) {
    for definition in definitions.drain(..) {
        if let Err(error) = applier.wait_established(&definition.name).await {
            errors.insert(definition, error.to_string());
        }
    }
}

/// Prunes what left placement `key`'s bundles and records what it holds
/// now: `manifests`, and what could not be pruned (an error of the pass).
async fn prune_left(
    reconciler: &mut Reconciler,
    (key, placement): (&str, &mut Placement),
    applyset: &ApplySet,
    recorded: Recorded,
    manifests: &BTreeMap<ObjectRef, Manifest>,
    outcome: &mut Outcome,
) -> Result<(), ReconcileError> {
    let Recorded { mut record, stale } = recorded;
    let inventory = reconciler.inventory.clone();
    let pruned_any = !stale.is_empty();
    let remaining = prune(&mut reconciler.applier, &inventory, applyset, stale).await?;
    for (object, error) in &remaining {
        outcome
            .errors
            .insert(object.clone(), format!("cannot prune: {error}"));
    }
    let holds: BTreeSet<ObjectRef> = manifests.keys().chain(remaining.keys()).cloned().collect();
    if holds != record.objects {
        record.objects = holds;
        inventory.set_placement(key, &record).await?;
    }
    if pruned_any {
        write_parent(reconciler, applyset, placement, &record.objects).await;
        reconciler.prune_namespaces().await?;
    }
    Ok(())
}

/// Remembers what the pass did, for status and drift, and says when to
/// pass again: after a backoff while something failed that another try
/// may not.
fn settle(
    placement: &mut Placement,
    mut manifests: BTreeMap<ObjectRef, Manifest>,
    outcome: Outcome,
) -> Action {
    // What the policy refused is not the agent's to watch for drift.
    manifests.retain(|object, _| !outcome.refused.contains(object));
    placement.desired = manifests;
    placement.applied = true;
    placement.applied_revision = placement.bundles.first().copied();
    placement.problem = None;
    placement.errors = outcome.errors;
    placement.health = outcome.health;
    placement.live = outcome.live;
    placement.written = outcome.written;
    placement.held = outcome.held;
    // What the policy refused, another try would refuse again.
    let retry = placement
        .errors
        .keys()
        .any(|object| !outcome.refused.contains(object));
    if !retry {
        placement.failures = 0;
        Action::AwaitChange
    } else {
        placement.failures = placement.failures.saturating_add(1);
        Action::Requeue(backoff(placement.failures))
    }
}
