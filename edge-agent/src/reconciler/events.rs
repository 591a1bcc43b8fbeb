//! Reacting to the watch events on the objects the agent manages: drift
//! (a change that is not the agent's own write, or a deletion) makes the
//! object's placement due again, no sooner than [`DRIFT_SPACING`] after its
//! last pass; a changed health is reported. A watch that started over
//! makes the placements holding objects of its kind pass again.

use tokio::time::Instant;

use super::schedule::DRIFT_SPACING;
use kube::discovery::ApiResource;

use super::state::{Placement, Reconciler};
use crate::drift::{ClusterEvent, ObjectEvent};
use crate::manifest::{self, ObjectRef};
use crate::status;

impl Reconciler {
    /// Reacts to what a watch says.
    pub(super) async fn handle_event(&mut self, event: ClusterEvent) {
        match event {
            ClusterEvent::Object(event) => self.handle_object(event).await,
            ClusterEvent::Relisted(resource) => self.forget_held(&resource),
        }
    }

    /// After a watch on `resource`'s kind started over: none of its objects
    /// counts as held as written, and their placements pass again to write
    /// them (a deletion while it was broken is not reported by the list).
    fn forget_held(&mut self, resource: &ApiResource) {
        let of_kind =
            |object: &ObjectRef| object.group == resource.group && object.kind == resource.kind;
        for (key, placement) in &mut self.placements {
            let held = placement.held.len();
            placement.held.retain(|object| !of_kind(object));
            if placement.held.len() != held && placement.applied {
                tracing::info!(placement = %key, kind = %resource.kind, "watch started over; writing its objects of that kind again");
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
