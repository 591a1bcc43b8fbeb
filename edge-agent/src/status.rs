//! From objects in the cluster to what the tree sees: each object's health,
//! a placement's phase on this cluster, and a reporter that only sends
//! changes. Pure apart from the channel the reporter sends on.
//!
//! Each object's health follows kstatus's rules (see [`crate::health`]).

use std::collections::BTreeMap;

use relaymesh_protocol::{FailingCluster, PhaseCounts, PlacementStatus};
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
}
