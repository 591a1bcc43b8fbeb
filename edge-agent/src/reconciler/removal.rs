//! Taking away what is no longer assigned: the objects that left a
//! placement's bundles (after its pass), a whole placement gone from a
//! trusted slice (its objects, its ApplySet parent and its record), and the
//! namespaces relaymesh created that none of its objects use any more.
//! Only what the inventory recorded is ever deleted.

use std::collections::{BTreeMap, BTreeSet};

use super::error::ReconcileError;
use super::state::Reconciler;
use crate::applier::{Applier, ApplyError};
use crate::inventory::Inventory;
use crate::manifest::ObjectRef;
use crate::order;
use crate::prune::{self, ApplySet, Pruned};

impl Reconciler {
    /// Deletes everything recorded for a placement that is no longer
    /// assigned, then its ApplySet parent and its record.
    pub(super) async fn remove_placement(&mut self, key: &str) -> Result<(), ReconcileError> {
        let Some(mut record) = self.inventory.placement(key)? else {
            return Ok(());
        };
        tracing::info!(
            objects = record.objects.len(),
            "placement unassigned: pruning it"
        );
        let applyset = ApplySet::of(key);
        let remaining = prune(
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
    pub(super) async fn prune_namespaces(&mut self) -> Result<(), ReconcileError> {
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
