//! The root's own metrics, beside every node's (`relaymesh_node::metrics`):
//! each placement's clusters by phase, as its status says, and how long
//! its revisions take to reach the clusters. Labelled by placement, never
//! by cluster: a fleet of a million clusters is five series per placement.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;
use std::time::Instant;

use prometheus::{GaugeVec, Histogram, Opts};
use relaymesh_node::metrics::{exponential, histogram};
use relaymesh_protocol::{BundleId, PlacementStatus};

/// The phases a Placement's `status.clusters` counts.
pub const PHASES: [&str; 5] = ["pending", "applied", "ready", "failed", "offline"];

static CLUSTERS: LazyLock<GaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "relaymesh_placement_clusters",
        "A placement's clusters by phase, as its status counts them.",
        &["namespace", "placement", "phase"],
    )
});

static SELECTED: LazyLock<GaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "relaymesh_placement_selected_clusters",
        "The clusters a placement selects.",
        &["namespace", "placement"],
    )
});

/// From the root's decision (a placement's new revision) to the root
/// learning that a cluster applied it: down the tree, the apply, and the
/// status back up.
static APPLIED: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "relaymesh_placement_applied_seconds",
        "Time from a placement revision's decision at the root to the root learning a cluster applied it.",
        exponential(0.05, 2.0, 14),
    )
});

/// Registers the root's metrics, so they are served before the first
/// placement.
pub fn register() {
    LazyLock::force(&CLUSTERS);
    LazyLock::force(&SELECTED);
    LazyLock::force(&APPLIED);
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let gauges = GaugeVec::new(Opts::new(name, help), labels).expect("constant, valid gauges");
    relaymesh_node::metrics::register(Box::new(gauges.clone()));
    gauges
}

/// What the placement controller tracks between its status writes: the
/// placements it set gauges for, and when each one's revision was decided.
#[derive(Debug, Default)]
pub struct PlacementMetrics {
    /// (namespace, name) of the placements with gauges.
    shown: BTreeSet<(String, String)>,
    /// By placement: its revision, when the root first saw it, and how
    /// many clusters were counted as having applied it so far.
    revisions: BTreeMap<(String, String), (BundleId, Instant, u64)>,
    /// The placements seen in this round.
    seen: BTreeSet<(String, String)>,
}

impl PlacementMetrics {
    /// Sets one placement's gauges from the `clusters` counts of the status
    /// written for it, and observes the clusters that applied `revision`
    /// since the last round; returns how many.
    pub fn placement(
        &mut self,
        namespace: &str,
        name: &str,
        clusters: &serde_json::Value,
        revision: Option<BundleId>,
        status: &PlacementStatus,
    ) -> u64 {
        let mut observed = 0;
        let id = (namespace.to_string(), name.to_string());
        for phase in PHASES {
            let count = clusters[phase].as_f64().unwrap_or_default();
            CLUSTERS
                .with_label_values(&[namespace, name, phase])
                .set(count);
        }
        let selected = clusters["selected"].as_f64().unwrap_or_default();
        SELECTED.with_label_values(&[namespace, name]).set(selected);
        if let Some(revision) = revision {
            let applied = status
                .applied_revisions
                .iter()
                .find(|applied| applied.revision == revision)
                .map_or(0, |applied| applied.counts.applied + applied.counts.ready);
            let now = Instant::now();
            let tracked = self
                .revisions
                .entry(id.clone())
                .or_insert((revision, now, 0));
            if tracked.0 != revision {
                *tracked = (revision, now, 0);
            }
            let decided = tracked.1;
            for _ in tracked.2..applied {
                APPLIED.observe(now.duration_since(decided).as_secs_f64());
            }
            observed = applied.saturating_sub(tracked.2);
            tracked.2 = tracked.2.max(applied);
        }
        self.seen.insert(id);
        observed
    }

    /// Ends a round: the gauges of placements that are gone are removed.
    pub fn finish_round(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        for (namespace, name) in self.shown.difference(&seen) {
            for phase in PHASES {
                let _ = CLUSTERS.remove_label_values(&[namespace, name, phase]);
            }
            let _ = SELECTED.remove_label_values(&[namespace, name]);
        }
        self.revisions.retain(|id, _| seen.contains(id));
        self.shown = seen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaymesh_protocol::{AppliedRevision, PhaseCounts};

    fn applied(revision: BundleId, applied: u64) -> PlacementStatus {
        PlacementStatus {
            applied_revisions: vec![AppliedRevision {
                revision,
                counts: PhaseCounts {
                    ready: applied,
                    ..PhaseCounts::default()
                },
            }],
            ..PlacementStatus::default()
        }
    }

    #[test]
    fn each_cluster_that_applied_a_revision_is_observed_once() {
        let mut metrics = PlacementMetrics::default();
        let revision = BundleId([7; 32]);
        let newer = BundleId([8; 32]);
        let clusters = serde_json::json!({"selected": 3, "ready": 2});
        let mut round = |revision, status: PlacementStatus| {
            let observed = metrics.placement("ns", "once", &clusters, Some(revision), &status);
            metrics.finish_round();
            observed
        };
        assert_eq!(round(revision, applied(revision, 2)), 2);
        assert_eq!(round(revision, applied(revision, 3)), 1);
        assert_eq!(round(revision, applied(revision, 3)), 0);
        // A new revision starts from nobody.
        assert_eq!(round(newer, applied(revision, 3)), 0);
        assert_eq!(round(newer, applied(newer, 1)), 1);
        let ready = CLUSTERS.with_label_values(&["ns", "once", "ready"]).get();
        assert_eq!(ready, 2.0);
    }

    #[test]
    fn a_placement_that_is_gone_loses_its_gauges() {
        let mut metrics = PlacementMetrics::default();
        let clusters = serde_json::json!({"selected": 1, "pending": 1});
        metrics.placement("ns", "gone", &clusters, None, &PlacementStatus::default());
        metrics.finish_round();
        assert!(relaymesh_node::metrics::encode().contains("placement=\"gone\""));
        metrics.finish_round();
        assert!(!relaymesh_node::metrics::encode().contains("placement=\"gone\""));
    }
}
