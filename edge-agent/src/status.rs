//! From objects in the cluster to what the tree sees: each object's health,
//! a placement's phase on this cluster, and a reporter that only sends
//! changes. Pure apart from the channel the reporter sends on.
//!
//! Each object's health follows kstatus's rules (see [`crate::health`]).

use std::collections::BTreeMap;

use relaymesh_protocol::status::MAX_OBJECT_STATUS_BYTES;
use relaymesh_protocol::{BundleId, FailingCluster, ObjectStatus, PhaseCounts, PlacementStatus};
use serde_json::Value;
use tokio::sync::mpsc;

pub use crate::health::{health, Health};

/// A placement's phase on this cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Not applied yet (its bundle may still be on its way).
    Pending,
    /// Applied, some workload not ready yet.
    Applied,
    /// Applied and every object ready.
    Ready,
    /// An object could not be applied, or a workload failed.
    Failed,
}

/// The phase of a placement: `applied` once every object was applied
/// (failures aside), `errors` for objects that could not be, and the health
/// of each applied object.
pub fn phase<'a>(
    applied: bool,
    errors: usize,
    healths: impl IntoIterator<Item = &'a Health>,
) -> Phase {
    if errors > 0 {
        return Phase::Failed;
    }
    if !applied {
        return Phase::Pending;
    }
    let mut phase = Phase::Ready;
    for health in healths {
        match health {
            Health::Failed(_) => return Phase::Failed,
            Health::Progressing => phase = Phase::Applied,
            Health::Ready => {}
        }
    }
    phase
}

/// The status cluster `cluster` reports for a placement: one count of 1,
/// and itself as failing, with `message`, if it failed.
pub fn placement_status(cluster: &str, phase: &Phase, message: Option<String>) -> PlacementStatus {
    let mut counts = PhaseCounts::default();
    match phase {
        Phase::Pending => counts.pending = 1,
        Phase::Applied => counts.applied = 1,
        Phase::Ready => counts.ready = 1,
        Phase::Failed => counts.failed = 1,
    }
    let failing = match phase {
        // The message names the cluster for people reading it alone; the
        // entry names it already.
        Phase::Failed => vec![FailingCluster {
            cluster: cluster.to_string(),
            message: message
                .as_deref()
                .map(|text| text.strip_prefix(&format!("{cluster}: ")).unwrap_or(text))
                .unwrap_or("failed")
                .to_string(),
        }],
        _ => Vec::new(),
    };
    PlacementStatus {
        counts,
        message,
        failing,
        ..PlacementStatus::default()
    }
}

/// An applied object as the cluster last showed it, and the bundle it came
/// from.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    /// The bundle the applied object came from.
    pub bundle: BundleId,
    /// The object, status included.
    pub object: Value,
}

/// What the tree hears of one applied object's own status, for the root to
/// copy onto its object while this is the placement's only cluster; `None`
/// if the object has no status or it is too large to travel
/// ([`MAX_OBJECT_STATUS_BYTES`]).
pub fn object_status(reference: &crate::manifest::ObjectRef, live: &Live) -> Option<ObjectStatus> {
    let status = live
        .object
        .get("status")
        .filter(|status| status.is_object())?;
    let bytes = serde_json::to_vec(status).ok()?;
    if bytes.len() > MAX_OBJECT_STATUS_BYTES {
        return None;
    }
    // Controllers that report `observedGeneration` say so when they have
    // seen the spec the agent applied; other kinds' status is always of
    // the object as it is.
    let generation = live
        .object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed_generation = status.get("observedGeneration").and_then(Value::as_i64);
    let observed = match (generation, observed_generation) {
        (Some(generation), Some(observed)) => observed >= generation,
        _ => true,
    };
    Some(ObjectStatus {
        group: reference.group.clone(),
        kind: reference.kind.clone(),
        namespace: reference.namespace.clone(),
        name: reference.name.clone(),
        bundle: live.bundle,
        observed,
        status: bytes,
    })
}

/// Sends statuses up to the daemon, only when they change.
#[derive(Debug)]
pub struct Reporter {
    sender: mpsc::Sender<(String, Option<PlacementStatus>)>,
    sent: BTreeMap<String, PlacementStatus>,
}

impl Reporter {
    /// A reporter on the daemon's status channel.
    pub fn new(sender: mpsc::Sender<(String, Option<PlacementStatus>)>) -> Self {
        Self {
            sender,
            sent: BTreeMap::new(),
        }
    }

    /// Reports `status` for placement `key` unless it was the last one sent.
    pub async fn report(&mut self, key: &str, status: PlacementStatus) {
        if self.sent.get(key) == Some(&status) {
            return;
        }
        tracing::debug!(placement = key, counts = ?status.counts, message = ?status.message, "status changed");
        self.sent.insert(key.to_string(), status.clone());
        let _ = self.sender.send((key.to_string(), Some(status))).await;
    }

    /// Forgets placement `key` upstream.
    pub async fn forget(&mut self, key: &str) {
        if self.sent.remove(key).is_some() {
            let _ = self.sender.send((key.to_string(), None)).await;
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn phases_and_counts() {
        let ready = Health::Ready;
        let slow = Health::Progressing;
        assert_eq!(phase(false, 0, []), Phase::Pending);
        assert_eq!(phase(true, 0, [&ready]), Phase::Ready);
        assert_eq!(phase(true, 0, [&ready, &slow]), Phase::Applied);
        assert_eq!(phase(true, 1, [&ready]), Phase::Failed);
        assert_eq!(
            phase(true, 0, [&slow, &Health::Failed("x".into())]),
            Phase::Failed
        );
        let status = placement_status("edge-1", &Phase::Applied, None);
        assert_eq!(
            status.counts,
            PhaseCounts {
                applied: 1,
                ..PhaseCounts::default()
            }
        );
    }

    #[tokio::test]
    async fn reporter_sends_changes_only() {
        let (sender, mut receiver) = mpsc::channel(8);
        let mut reporter = Reporter::new(sender);
        let ready = placement_status("edge-1", &Phase::Ready, None);
        reporter.report("placement/a/b", ready.clone()).await;
        reporter.report("placement/a/b", ready.clone()).await;
        reporter.forget("placement/a/b").await;
        reporter.forget("placement/a/b").await;
        assert_eq!(
            receiver.recv().await,
            Some(("placement/a/b".into(), Some(ready)))
        );
        assert_eq!(receiver.recv().await, Some(("placement/a/b".into(), None)));
        assert!(receiver.try_recv().is_err());
    }

    #[test]
    fn an_object_status_says_whether_its_controller_saw_the_applied_spec() {
        let reference = crate::manifest::ObjectRef {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let bundle = BundleId::of(b"bundle");
        let live = |generation: i64, observed: i64| Live {
            bundle,
            object: serde_json::json!({
                "metadata": {"generation": generation},
                "status": {"observedGeneration": observed, "readyReplicas": 2},
            }),
        };
        let caught_up = object_status(&reference, &live(3, 3)).expect("has a status");
        assert!(caught_up.observed);
        assert_eq!(caught_up.bundle, bundle);
        assert_eq!(
            serde_json::from_slice::<Value>(&caught_up.status).expect("JSON"),
            serde_json::json!({"observedGeneration": 3, "readyReplicas": 2})
        );
        assert!(
            !object_status(&reference, &live(4, 3))
                .expect("status")
                .observed
        );
        let no_status = Live {
            bundle,
            object: serde_json::json!({"metadata": {"generation": 1}}),
        };
        assert_eq!(object_status(&reference, &no_status), None);
        let huge = Live {
            bundle,
            object: serde_json::json!({"status": {"blob": "x".repeat(MAX_OBJECT_STATUS_BYTES)}}),
        };
        assert_eq!(object_status(&reference, &huge), None);
    }
}
