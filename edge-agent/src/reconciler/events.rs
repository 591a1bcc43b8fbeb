//! Reacting to the watch events on the objects the agent manages: drift
//! (a change that is not the agent's own write, or a deletion) makes the
//! object's placement due again, no sooner than [`DRIFT_SPACING`] after its
//! last pass; a changed health is reported. A managed object missing from
//! its kind's list (a watch starting, or starting over after 410 Gone) was
//! deleted unseen, and is restored the same way.

use std::collections::BTreeSet;

use kube::discovery::ApiResource;
use tokio::time::Instant;

use super::schedule::DRIFT_SPACING;
use super::state::{Placement, Reconciler};
use crate::drift::{ClusterEvent, ObjectEvent};
use crate::manifest::{self, ObjectRef};
use crate::status;

impl Reconciler {
    /// Reacts to what a watch says.
    pub(super) async fn handle_event(&mut self, event: ClusterEvent) {
        match event {
            ClusterEvent::Object(event) => self.handle_object(event).await,
            ClusterEvent::Listed { resource, present } => {
                self.find_missing(&resource, &present).await;
            }
        }
    }

    /// After a watch listed `resource`'s kind (`present` is what it
    /// held): a managed object of that kind missing from the list may have
    /// been deleted unseen, or written after the list was taken; one the
    /// cluster does not hold (or that cannot be read) is not held as
    /// written any more, and its placement passes again to write it.
    async fn find_missing(
        &mut self,
        resource: &ApiResource,
        present: &BTreeSet<(Option<String>, String)>,
    ) {
        // A namespaced object written without a namespace lands in the
        // client's default one.
        let default_namespace = self.applier.client().default_namespace().to_string();
        let listed = |object: &ObjectRef| {
            let name = object.name.clone();
            present.contains(&(object.namespace.clone(), name.clone()))
                || (object.namespace.is_none()
                    && present.contains(&(Some(default_namespace.clone()), name)))
        };
        let missing: Vec<(String, ObjectRef)> = self
            .placements
            .iter()
            .flat_map(|(key, placement)| {
                placement
                    .held
                    .iter()
                    .filter(|object| {
                        object.group == resource.group
                            && object.kind == resource.kind
                            && !listed(object)
                    })
                    .map(move |object| (key.clone(), object.clone()))
            })
            .collect();
        for (key, object) in missing {
            if let Ok(Some(_)) = self.applier.get(&object).await {
                continue;
            }
            let Some(placement) = self.placements.get_mut(&key) else {
                continue;
            };
            tracing::info!(placement = %key, %object, "managed object gone from the cluster; restoring it");
            placement.held.remove(&object);
            placement.live.remove(&object);
            if placement.applied {
                make_due(placement);
            }
        }
    }

    /// Reacts to a managed object changing in the cluster: drift makes its
    /// placement due; a changed health is reported.
    async fn handle_object(&mut self, event: ObjectEvent) {
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
        let drifted = match event.object {
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
                let health = status::health(&event.reference.group, &event.reference.kind, &live);
                placement.health.insert(event.reference.clone(), health);
                let drifted =
                    !ours && !manifest.create_only && !manifest::contains(&live, &manifest.body);
                if drifted {
                    tracing::info!(placement = %key, object = %event.reference, "managed object changed; restoring it");
                }
                if let Some(known) = placement.live.get_mut(&event.reference) {
                    // Moved, not copied: an event may carry a 100 KB object.
                    known.object = live;
                }
                drifted
            }
        };
        if drifted {
            placement.held.remove(&event.reference);
        }
        if drifted && placement.applied {
            make_due(placement);
        }
        self.report(&key).await;
    }
}

/// Makes `placement` due again, no sooner than [`DRIFT_SPACING`] after its
/// last pass.
fn make_due(placement: &mut Placement) {
    let earliest = placement
        .last_pass
        .map_or_else(Instant::now, |last| last + DRIFT_SPACING);
    let due = earliest.max(Instant::now());
    placement.due = Some(placement.due.map_or(due, |current| current.min(due)));
}
