//! One apply pass of one placement: read its bundles from the store, record
//! its objects in the inventory, apply them in dependency order (waiting for
//! CRDs to be Established, creating namespaces the bundle uses but does not
//! carry), prune what left it, and remember what happened for status.

use std::collections::{BTreeMap, BTreeSet};

use super::{backoff, Action, Placement, ReconcileError, Reconciler};
use crate::applier::{to_value, Applier, ApplyError};
use crate::manifest::{self, Manifest, ObjectRef};
use crate::order::{self, Stage};
use crate::prune::{self, ApplySet};
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
    let applyset = ApplySet::of(key);
    let Some(manifests) = read_bundles(reconciler, &applyset, placement)? else {
        placement.applied = false;
        return Ok(Action::AwaitChange);
    };
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
    let mut errors = BTreeMap::new();
    let mut health = BTreeMap::new();
    let mut written = BTreeMap::new();
    let mut checked_namespaces = BTreeSet::new();
    let mut definitions = Vec::new();
    for manifest in &ordered {
        let reference = &manifest.reference;
        if order::stage_of(manifest) > Stage::Definitions {
            await_definitions(&mut reconciler.applier, &mut definitions, &mut errors).await;
        }
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
    let remaining = prune(&mut reconciler.applier, &applyset, stale).await;
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
        "placement applied"
    );
    placement.desired = manifests;
    placement.applied = true;
    placement.problem = None;
    placement.errors = errors;
    placement.health = health;
    placement.written = written;
    if placement.errors.is_empty() {
        placement.failures = 0;
        Ok(Action::AwaitChange)
    } else {
        placement.failures = placement.failures.saturating_add(1);
        Ok(Action::Requeue(backoff(placement.failures)))
    }
}

/// The placement's objects from its bundles; `None` while a bundle is not
/// stored yet or cannot be read (the placement's problem says why).
fn read_bundles(
    reconciler: &Reconciler,
    applyset: &ApplySet,
    placement: &mut Placement,
) -> Result<Option<BTreeMap<ObjectRef, Manifest>>, ReconcileError> {
    let mut manifests = BTreeMap::new();
    for id in &placement.bundles {
        let Some(bytes) = reconciler.store.bundle(id)? else {
            tracing::debug!(bundle = %id, "waiting for a bundle");
            return Ok(None);
        };
        match manifest::parse_bundle(&bytes, &applyset.id) {
            Ok(parsed) => {
                for manifest in parsed {
                    manifests.insert(manifest.reference.clone(), manifest);
                }
            }
            Err(error) => {
                tracing::warn!(bundle = %id, %error, "unreadable bundle");
                placement.problem = Some(format!("bundle {id}: {error}"));
                return Ok(None);
            }
        }
    }
    placement.problem = None;
    Ok(Some(manifests))
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
/// is gone with its definition.
pub(super) async fn prune(
    applier: &mut Applier,
    applyset: &ApplySet,
    mut stale: Vec<ObjectRef>,
) -> BTreeMap<ObjectRef, String> {
    stale.sort_by_key(|object| {
        order::prune_rank(&object.group, &object.kind, object.namespace.is_some())
    });
    let mut remaining = BTreeMap::new();
    for object in stale {
        match prune::prune_object(applier, applyset, &object).await {
            Ok(_) => {}
            Err(ApplyError::UnknownKind { .. }) => {
                tracing::info!(object = %object, "kind no longer served; nothing to prune");
            }
            Err(error) => {
                tracing::warn!(object = %object, %error, "prune failed");
                remaining.insert(object, error.to_string());
            }
        }
    }
    remaining
}
