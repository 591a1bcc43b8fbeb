//! One apply pass of one placement: read its bundles from the store, record
//! its objects in the inventory, apply them in dependency order (waiting for
//! CRDs to be Established, creating namespaces the bundle uses but does not
//! carry), prune what left it, and remember what happened for status.
//!
//! Before an object is written, the agent's policy must allow its category
//! and, if it exists already, it must be the agent's own, or the placement
//! must ask to adopt it and the policy allow adoption where it lands (see
//! [`crate::policy`]); a refused object is left alone and reported, and the
//! pass goes on with the rest.

use std::collections::{BTreeMap, BTreeSet};

use super::read::{customized, Read};
use super::room::{self, Room};
use super::{backoff, Action, Placement, ReconcileError, Reconciler};
use crate::applier::{to_value, Applier, ApplyError};
use crate::inventory::Inventory;
use crate::manifest::{Manifest, ObjectRef};
use crate::order::{self, Stage};
use crate::policy::{self, Refusal, Takeover};
use crate::prune::{self, ApplySet, Pruned};
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
        let limit = reconciler.max_placements.unwrap_or_default();
        tracing::warn!(
            limit,
            "no room for the placement: the cluster runs as many as its capacity allows"
        );
        placement.applied = false;
        placement.problem = Some(format!(
            "this cluster runs at most {limit} placements (edge-agent join --max-placements): this one waits until another leaves"
        ));
        return Ok(Action::AwaitChange);
    }
    let applyset = ApplySet::of(key);
    let Some((manifests, not_customized)) = read_bundles(reconciler, &applyset, placement)? else {
        placement.applied = false;
        return Ok(Action::AwaitChange);
    };
    let asked = room::replicas_of(manifests.values());
    placement.replicas = Some(asked);
    match reconciler.room_for(key, asked)? {
        Room::Fits => placement.waiting_for_room = false,
        Room::Waits(why) => {
            tracing::warn!(asked, "no room for the placement's replicas");
            placement.waiting_for_room = true;
            placement.applied = false;
            placement.problem = Some(why);
            return Ok(Action::AwaitChange);
        }
    }
    let mut ordered: Vec<Manifest> = manifests.values().cloned().collect();
    order::sort(&mut ordered);

    // Record before touching the cluster: a crash mid-pass must not leave
    // an object we created unrecorded.
    let inventory = reconciler.inventory.clone();
    let mut record = inventory.placement(key)?.unwrap_or_default();
    record.applyset_id.clone_from(&applyset.id);
    let previous = record.objects.clone();
    record.objects.extend(manifests.keys().cloned());
    inventory.set_placement(key, &record).await?;
    if let Err(error) = applyset
        .write_parent(&mut reconciler.applier, &record.objects)
        .await
    {
        tracing::warn!(%error, "cannot write the ApplySet parent");
    }

    let bundled_namespaces: BTreeSet<&str> = manifests
        .keys()
        .filter(|object| object.group.is_empty() && object.kind == "Namespace")
        .map(|object| object.name.as_str())
        .collect();
    // The ApplySets of this agent's placements: a live object labelled
    // with one of them is the agent's own.
    let applysets: BTreeSet<String> = inventory
        .placements()?
        .into_values()
        .map(|record| record.applyset_id)
        .collect();
    let mut errors = BTreeMap::new();
    let mut refused = BTreeSet::new();
    let mut health = BTreeMap::new();
    let mut live_objects = BTreeMap::new();
    let mut written = BTreeMap::new();
    let mut checked_namespaces = BTreeSet::new();
    let mut definitions = Vec::new();
    for manifest in &ordered {
        let reference = &manifest.reference;
        if order::stage_of(manifest) > Stage::Definitions {
            await_definitions(&mut reconciler.applier, &mut definitions, &mut errors).await;
        }
        if let Some(error) = not_customized.get(reference) {
            // Never applied half-customized: the cluster reports why
            // (a label it lacks), and what it runs stays as it was.
            refused.insert(reference.clone());
            errors.insert(reference.clone(), format!("customization: {error}"));
            continue;
        }
        let namespace = match check_policy(reconciler, manifest).await {
            Ok(Ok(namespace)) => namespace,
            Ok(Err(refusal)) => {
                refused.insert(reference.clone());
                errors.insert(reference.clone(), refusal.to_string());
                continue;
            }
            Err(error) => {
                tracing::warn!(object = %reference, %error, "cannot tell where the object lands");
                errors.insert(reference.clone(), error.to_string());
                continue;
            }
        };
        if let Some(namespace) = &reference.namespace {
            if !bundled_namespaces.contains(namespace.as_str())
                && checked_namespaces.insert(namespace.clone())
            {
                if let Err(error) = ensure_namespace(reconciler, namespace).await? {
                    errors.insert(reference.clone(), format!("namespace {namespace}: {error}"));
                    continue;
                }
            }
        }
        if !manifest.create_only {
            // A create-only object that exists is left as it is anyway.
            let landing = Landing {
                namespace: namespace.as_deref(),
                applysets: &applysets,
            };
            match check_takeover(reconciler, manifest, landing, placement.adopt).await? {
                Ok(()) => {}
                Err(Blocked::Refused(refusal)) => {
                    // The object may go away (retried); the policy stays.
                    if matches!(refusal, Refusal::Category { .. }) {
                        refused.insert(reference.clone());
                    }
                    errors.insert(reference.clone(), refusal.to_string());
                    continue;
                }
                Err(Blocked::Failed(error)) => {
                    errors.insert(reference.clone(), error.to_string());
                    continue;
                }
            }
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
                let value = to_value(&live);
                health.insert(
                    reference.clone(),
                    status::health(&reference.group, &reference.kind, &value),
                );
                if let Some(bundle) = placement.origins.get(reference) {
                    let live = status::Live {
                        bundle: *bundle,
                        object: value,
                    };
                    live_objects.insert(reference.clone(), live);
                }
                if let Some(version) = live.metadata.resource_version {
                    written.insert(reference.clone(), version);
                }
            }
            Err(error) => {
                tracing::warn!(object = %reference, %error, "apply failed");
                errors.insert(reference.clone(), error.to_string());
            }
        }
    }
    await_definitions(&mut reconciler.applier, &mut definitions, &mut errors).await;

    let stale: Vec<ObjectRef> = previous
        .iter()
        .filter(|object| !manifests.contains_key(*object))
        .cloned()
        .collect();
    let pruned_any = !stale.is_empty();
    let remaining = prune(&mut reconciler.applier, &inventory, &applyset, stale).await?;
    for (object, error) in &remaining {
        errors.insert(object.clone(), format!("cannot prune: {error}"));
    }
    record.objects = manifests.keys().chain(remaining.keys()).cloned().collect();
    inventory.set_placement(key, &record).await?;
    if pruned_any {
        if let Err(error) = applyset
            .write_parent(&mut reconciler.applier, &record.objects)
            .await
        {
            tracing::warn!(%error, "cannot write the ApplySet parent");
        }
        reconciler.prune_namespaces().await?;
    }

    tracing::info!(
        objects = manifests.len(),
        failed = errors.len(),
        refused = refused.len(),
        "placement applied"
    );
    let mut manifests = manifests;
    // What the policy refused is not the agent's to watch for drift.
    manifests.retain(|object, _| !refused.contains(object));
    placement.desired = manifests;
    placement.applied = true;
    placement.applied_revision = placement.bundles.first().copied();
    placement.problem = None;
    placement.errors = errors;
    placement.health = health;
    placement.live = live_objects;
    placement.written = written;
    // What the policy refused, another try would refuse again.
    let retry = placement
        .errors
        .keys()
        .any(|object| !refused.contains(object));
    if !retry {
        placement.failures = 0;
        Ok(Action::AwaitChange)
    } else {
        placement.failures = placement.failures.saturating_add(1);
        Ok(Action::Requeue(backoff(placement.failures)))
    }
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

/// Creates `namespace` if it is missing, recording that relaymesh did.
async fn ensure_namespace(
    reconciler: &mut Reconciler,
    namespace: &str,
) -> Result<Result<(), ApplyError>, ReconcileError> {
    match reconciler.applier.ensure_namespace(namespace).await {
        Ok(true) => {
            let mut created = reconciler.inventory.created_namespaces()?;
            created.insert(namespace.to_string());
            reconciler
                .inventory
                .set_created_namespaces(&created)
                .await?;
            Ok(Ok(()))
        }
        Ok(false) => Ok(Ok(())),
        Err(error) => Ok(Err(error)),
    }
}

/// Whether the agent's policy lets it write `manifest`, judged on its body
/// and on the namespace it lands in (for a namespaced kind written without
/// one, the client's default namespace), which it returns (`None` for a
/// cluster-scoped object). The category alone decides first, so a refused
/// kind costs no discovery.
async fn check_policy(
    reconciler: &mut Reconciler,
    manifest: &Manifest,
) -> Result<Result<Option<String>, Refusal>, ApplyError> {
    let reference = &manifest.reference;
    let mut namespace = reference.namespace.clone();
    let mut verdict = reconciler
        .policy
        .check(reference, &manifest.body, namespace.as_deref());
    if verdict.is_ok() && namespace.is_none() {
        namespace = reconciler.applier.namespace_of(reference).await?;
        verdict = reconciler
            .policy
            .check(reference, &manifest.body, namespace.as_deref());
    }
    if let Err(refusal) = &verdict {
        let category = match refusal {
            Refusal::Category { category } => category.name(),
            _ => "",
        };
        tracing::warn!(object = %reference, category, reason = %refusal, "refused by the apply policy");
    }
    Ok(verdict.map(|()| namespace))
}

/// Why an object was not written.
enum Blocked {
    /// The policy or the adoption rule refused it.
    Refused(Refusal),
    /// The live object could not be read.
    Failed(ApplyError),
}

/// Where an object lands, for the takeover check.
#[derive(Clone, Copy)]
struct Landing<'a> {
    /// Its namespace (`None` for a cluster-scoped object).
    namespace: Option<&'a str>,
    /// The ApplySets of this agent's placements: a live object labelled
    /// with one of them is the agent's own.
    applysets: &'a BTreeSet<String>,
}

/// Whether the agent may write over the live object of `manifest`: it does
/// not exist, it is the agent's own, or the placement asks to `adopt` it
/// and the policy allows adoption where it lands (then it is recorded as
/// adopted before it is touched).
async fn check_takeover(
    reconciler: &mut Reconciler,
    manifest: &Manifest,
    landing: Landing<'_>,
    adopt: bool,
) -> Result<Result<(), Blocked>, ReconcileError> {
    let reference = &manifest.reference;
    let live = match reconciler.applier.get(reference).await {
        Ok(live) => live,
        Err(error) => {
            tracing::warn!(object = %reference, %error, "cannot read the live object");
            return Ok(Err(Blocked::Failed(error)));
        }
    };
    let ownership = live
        .as_ref()
        .map(|live| policy::ownership(live.metadata.labels.as_ref(), landing.applysets));
    match reconciler
        .policy
        .check_takeover(reference, landing.namespace, ownership, adopt)
    {
        Ok(Takeover::Update) => Ok(Ok(())),
        Ok(Takeover::Create) => {
            // Adopted once, gone since: what the agent creates now is its own.
            let mut adopted = reconciler.inventory.adopted()?;
            if adopted.remove(reference) {
                reconciler.inventory.set_adopted(&adopted).await?;
            }
            Ok(Ok(()))
        }
        Ok(Takeover::Adopt) => {
            let mut adopted = reconciler.inventory.adopted()?;
            if adopted.insert(reference.clone()) {
                reconciler.inventory.set_adopted(&adopted).await?;
                tracing::info!(object = %reference, "adopting an existing object (spec.adopt: true); it will be released, not deleted, when it leaves");
            }
            Ok(Ok(()))
        }
        Err(refusal) => {
            tracing::warn!(object = %reference, reason = %refusal, "refused to take over an object relaymesh did not create");
            Ok(Err(Blocked::Refused(refusal)))
        }
    }
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

/// Prunes `stale` members of `applyset`, workloads first; returns those
/// that could not be, with why. An object whose kind is no longer served
/// is gone with its definition. Adopted objects are released, not deleted,
/// and forgotten as adopted once they are.
pub(super) async fn prune(
    applier: &mut Applier,
    inventory: &Inventory,
    applyset: &ApplySet,
    mut stale: Vec<ObjectRef>,
) -> Result<BTreeMap<ObjectRef, String>, ReconcileError> {
    stale.sort_by_key(|object| {
        order::prune_rank(&object.group, &object.kind, object.namespace.is_some())
    });
    let mut adopted = inventory.adopted()?;
    let adopted_before = adopted.len();
    let mut remaining = BTreeMap::new();
    for object in stale {
        let was_adopted = adopted.contains(&object);
        match prune::prune_object(applier, applyset, &object, was_adopted).await {
            Ok(Pruned::Deleted | Pruned::Missing | Pruned::Released) => {
                adopted.remove(&object);
            }
            // Someone else's now: it may belong to another of our
            // placements, which keeps what it knows of it.
            Ok(Pruned::NotOurs) => {}
            Err(ApplyError::UnknownKind { .. }) => {
                tracing::info!(object = %object, "kind no longer served; nothing to prune");
                adopted.remove(&object);
            }
            Err(error) => {
                tracing::warn!(object = %object, %error, "prune failed");
                remaining.insert(object, error.to_string());
            }
        }
    }
    if adopted.len() != adopted_before {
        inventory.set_adopted(&adopted).await?;
    }
    Ok(remaining)
}
