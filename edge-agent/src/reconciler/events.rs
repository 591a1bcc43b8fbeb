//! Reacting to the watch events on the objects the agent manages: drift
//! (a change that is not the agent's own write, or a deletion) makes the
//! object's placement due again, no sooner than [`DRIFT_SPACING`] after its
//! last pass; a changed health is reported.

use tokio::time::Instant;

use super::schedule::DRIFT_SPACING;
use super::state::Reconciler;
use crate::drift::ClusterEvent;
use crate::manifest;
use crate::status;

impl Reconciler {
    /// Reacts to a managed object changing in the cluster: drift makes its
    /// placement due; a changed health is reported.
    pub(super) async fn handle_event(&mut self, event: ClusterEvent) {
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
}
