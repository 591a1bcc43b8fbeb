//! Room for placements and replicas: a cluster joined with `edge-agent join
//! --max-placements N` runs at most N placements, and one joined with
//! `--max-replicas N` runs placements whose workloads ask for at most N
//! replicas in all (`spec.replicas` of Deployments, StatefulSets and
//! ReplicaSets, 1 where unset, read after customization: an override may
//! set them per cluster).
//!
//! Beyond its placement count, the placements it does not run yet wait,
//! last by key, failing and saying why, until others leave: what already
//! runs is never taken away for one that arrived later.
//!
//! Only the agent can count replicas (the relays never read a bundle, and an
//! override may change the number per cluster), so the agent decides: a
//! placement it does not run yet and that would pass the limit is not
//! applied and fails saying so, until another leaves or shrinks; one it
//! already runs is never held back, even when a new revision asks for more.
//! While one waits, or the sum is reached, the agent tells its daemon the
//! cluster is out of room, which labels it `relaymesh.dev/full` (see
//! `Core::set_out_of_room`), so count-bounded placements go elsewhere.

use std::collections::BTreeSet;

use serde_json::Value;
use tokio::time::Instant;

use super::error::ReconcileError;
use super::read::{customized, Read};
use super::state::Reconciler;
use crate::manifest::Manifest;
use crate::prune::ApplySet;

/// The kinds whose `spec.replicas` count.
const REPLICATED: [&str; 3] = ["Deployment", "StatefulSet", "ReplicaSet"];

/// The replicas the workloads among `manifests` ask for, summed.
pub(crate) fn replicas_of<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> u64 {
    manifests
        .into_iter()
        .filter(|manifest| {
            manifest.reference.group == "apps"
                && REPLICATED.contains(&manifest.reference.kind.as_str())
        })
        .map(|manifest| replicas_in(&manifest.body))
        .fold(0, u64::saturating_add)
}

/// One workload's `spec.replicas`: 1 where unset (the API server's
/// default); a value that is no count (the apply will fail on it) asks for
/// none.
fn replicas_in(body: &Value) -> u64 {
    match body.get("spec").and_then(|spec| spec.get("replicas")) {
        None | Some(Value::Null) => 1,
        Some(value) => value.as_u64().unwrap_or(0),
    }
}

/// Whether a placement may run here.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room {
    /// It fits, or the cluster has no replica limit, or it runs already.
    Fits,
    /// It waits: the message says why.
    Waits(String),
}

impl Reconciler {
    /// Marks the placements this cluster has no room for: beyond its
    /// capacity, the ones it never applied, last by key, wait (failing,
    /// saying why) until others leave.
    pub(super) fn check_capacity(
        &mut self,
        assigned: &BTreeSet<String>,
    ) -> Result<(), ReconcileError> {
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

    /// Whether the placement `key`, whose workloads ask for `asked`
    /// replicas, may run here. The others that run count with what they
    /// asked at their last pass; one that has not had a pass since the
    /// agent started counts with what its stored bundles ask for.
    pub(super) fn room_for(&self, key: &str, asked: u64) -> Result<Room, ReconcileError> {
        let Some(limit) = self.max_replicas else {
            return Ok(Room::Fits);
        };
        let running = self.inventory.placements()?;
        if running.contains_key(key) {
            return Ok(Room::Fits);
        }
        let used = self.replicas_running(running.keys())?;
        if used.saturating_add(asked) <= limit {
            return Ok(Room::Fits);
        }
        Ok(Room::Waits(format!(
            "its workloads ask for {asked} replicas and this cluster runs {used} of at most {limit} (edge-agent join --max-replicas): it waits until another placement leaves or shrinks"
        )))
    }

    /// The replicas of the placements the cluster runs (`running`, from the
    /// inventory), as each last read them.
    fn replicas_running<'a>(
        &self,
        running: impl Iterator<Item = &'a String>,
    ) -> Result<u64, ReconcileError> {
        let mut used = 0u64;
        for key in running {
            // One gone from the slice is pruned next; it counts no more.
            let Some(placement) = self.placements.get(key) else {
                continue;
            };
            let asked = match placement.replicas {
                Some(asked) => asked,
                None => match customized(self, &ApplySet::of(key).id, placement)? {
                    Read::Objects(manifests, _, _) => replicas_of(manifests.values()),
                    // Not readable: its pass will say why; nothing to count.
                    Read::Waiting | Read::Unreadable(_) => 0,
                },
            };
            used = used.saturating_add(asked);
        }
        Ok(used)
    }

    /// After a change of what runs: tells the daemon whether the cluster is
    /// out of room, and hands the placements waiting for room another pass
    /// when replicas were freed.
    pub(super) fn update_room(&mut self) -> Result<(), ReconcileError> {
        let Some(limit) = self.max_replicas else {
            return Ok(());
        };
        let running = self.inventory.placements()?;
        let used = self.replicas_running(running.keys())?;
        let waiting = self
            .placements
            .values()
            .any(|placement| placement.waiting_for_room);
        if used < self.replicas_used {
            let now = Instant::now();
            for placement in self.placements.values_mut() {
                if placement.waiting_for_room {
                    placement.due = Some(now);
                }
            }
        }
        self.replicas_used = used;
        let out_of_room = used >= limit || waiting;
        if let Some(sender) = &self.out_of_room {
            sender.send_if_modified(|said| std::mem::replace(said, out_of_room) != out_of_room);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(body: Value) -> Manifest {
        Manifest {
            reference: crate::manifest::ObjectRef::of(&body).expect("an object"),
            body,
            create_only: false,
        }
    }

    #[test]
    fn workloads_count_their_replicas_and_others_none() {
        let manifests = [
            manifest(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "a", "namespace": "n"}, "spec": {"replicas": 3}})),
            // Unset: the API server's default of one.
            manifest(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "b", "namespace": "n"}, "spec": {}})),
            manifest(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "c", "namespace": "n"}, "spec": {"replicas": 0}})),
            // Not a count: the apply fails on it, it asks for none.
            manifest(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "n"}, "spec": {"replicas": "{{ x }}"}})),
            // A DaemonSet runs one per node, whatever the limit says.
            manifest(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "e", "namespace": "n"}, "spec": {"replicas": 9}})),
            // Another group's Deployment is not a workload here.
            manifest(json!({"apiVersion": "example.com/v1", "kind": "Deployment",
                "metadata": {"name": "f", "namespace": "n"}, "spec": {"replicas": 9}})),
            manifest(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "g", "namespace": "n"}, "data": {"replicas": "7"}})),
        ];
        assert_eq!(replicas_of(&manifests), 4);
    }
}
