//! From objects in the cluster to what the tree sees: each object's health,
//! a placement's phase on this cluster, and a reporter that only sends
//! changes. Pure apart from the channel the reporter sends on.
//!
//! Workloads are ready when their controller says so (Deployments by their
//! `Available` condition or ready replicas, StatefulSets, DaemonSets and
//! ReplicaSets by ready replicas, Jobs by `Complete`/`Failed`); every other
//! kind is ready once applied.

use std::collections::BTreeMap;

use relaymesh_protocol::{PhaseCounts, PlacementStatus};
use serde_json::Value;
use tokio::sync::mpsc;

/// How one applied object is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Doing what it should.
    Ready,
    /// Applied; its controller has not caught up yet.
    Progressing,
    /// It failed (a Job's `Failed` condition), with the reason.
    Failed(String),
}

/// The health of a live object of `group`/`kind`.
pub fn health(group: &str, kind: &str, object: &Value) -> Health {
    let status = object.get("status").unwrap_or(&Value::Null);
    let int = |value: &Value, field: &str| value.get(field).and_then(Value::as_i64).unwrap_or(0);
    match (group, kind) {
        ("apps", "Deployment") => {
            if condition(status, "Available") == Some(true) {
                return Health::Ready;
            }
            replicas_ready(object, int(status, "readyReplicas"))
        }
        ("apps", "StatefulSet" | "ReplicaSet") => {
            replicas_ready(object, int(status, "readyReplicas"))
        }
        ("apps", "DaemonSet") => {
            let desired = int(status, "desiredNumberScheduled");
            if status.get("desiredNumberScheduled").is_some()
                && int(status, "numberReady") >= desired
            {
                Health::Ready
            } else {
                Health::Progressing
            }
        }
        ("batch", "Job") => {
            if condition(status, "Failed") == Some(true) {
                let reason = condition_message(status, "Failed")
                    .unwrap_or_else(|| "the job failed".to_string());
                Health::Failed(reason)
            } else if condition(status, "Complete") == Some(true) {
                Health::Ready
            } else {
                Health::Progressing
            }
        }
        _ => Health::Ready,
    }
}

fn replicas_ready(object: &Value, ready: i64) -> Health {
    let desired = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if ready >= desired {
        Health::Ready
    } else {
        Health::Progressing
    }
}

fn condition(status: &Value, kind: &str) -> Option<bool> {
    find_condition(status, kind)
        .map(|found| found.get("status").and_then(Value::as_str) == Some("True"))
}

fn condition_message(status: &Value, kind: &str) -> Option<String> {
    let found = find_condition(status, kind)?;
    found
        .get("message")
        .or_else(|| found.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn find_condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|found| found.get("type").and_then(Value::as_str) == Some(kind))
}

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

/// The status one cluster reports for a placement: one count of 1.
pub fn placement_status(phase: &Phase, message: Option<String>) -> PlacementStatus {
    let mut counts = PhaseCounts::default();
    match phase {
        Phase::Pending => counts.pending = 1,
        Phase::Applied => counts.applied = 1,
        Phase::Ready => counts.ready = 1,
        Phase::Failed => counts.failed = 1,
    }
    PlacementStatus { counts, message }
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
    use serde_json::json;

    use super::*;

    #[test]
    fn workload_health() {
        let deployment = |status: Value| json!({"spec": {"replicas": 2}, "status": status});
        assert_eq!(
            health("apps", "Deployment", &deployment(json!({}))),
            Health::Progressing
        );
        assert_eq!(
            health(
                "apps",
                "Deployment",
                &deployment(json!({"readyReplicas": 2}))
            ),
            Health::Ready
        );
        assert_eq!(
            health(
                "apps",
                "Deployment",
                &deployment(json!({"conditions": [{"type": "Available", "status": "True"}]}))
            ),
            Health::Ready
        );
        assert_eq!(
            health(
                "apps",
                "StatefulSet",
                &deployment(json!({"readyReplicas": 1}))
            ),
            Health::Progressing
        );
        assert_eq!(
            health(
                "apps",
                "DaemonSet",
                &json!({"status": {"desiredNumberScheduled": 3, "numberReady": 3}})
            ),
            Health::Ready
        );
        assert_eq!(health("apps", "DaemonSet", &json!({})), Health::Progressing);
        assert_eq!(
            health(
                "batch",
                "Job",
                &json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
            ),
            Health::Ready
        );
        assert_eq!(
            health(
                "batch",
                "Job",
                &json!({"status": {"conditions": [{"type": "Failed", "status": "True", "message": "backoff limit"}]}})
            ),
            Health::Failed("backoff limit".into())
        );
        assert_eq!(health("", "ConfigMap", &json!({})), Health::Ready);
    }

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
        let status = placement_status(&Phase::Applied, None);
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
        let ready = placement_status(&Phase::Ready, None);
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
}
