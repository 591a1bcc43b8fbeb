//! Reporting one placement's status to the daemon: its phase, why it fails,
//! its status rules, its objects, and how this cluster counts in its
//! rollout. The reporter sends only what changed.

use tokio::time::Instant;

use super::rollout::rollout_counts;
use super::state::{Placement, Reconciler};
use crate::status::{self, Health};

impl Reconciler {
    /// Reports placement `key`'s status (if it changed).
    pub(super) async fn report(&mut self, key: &str) {
        let Some(placement) = self.placements.get_mut(key) else {
            return;
        };
        let draining = self
            .labels
            .get(relaymesh_topology::placement::DRAINING_LABEL)
            .is_some_and(|value| value == "true");
        if draining && placement.bounded {
            // Held here only until its replacement runs: the root counts
            // the clusters that replace this one, not this one.
            self.reporter.forget(key).await;
            return;
        }
        let mut phase = status::phase(
            placement.applied,
            placement.errors.len() + usize::from(placement.problem.is_some()),
            placement.health.values(),
        );
        if matches!(placement.wave, Some((_, false))) && placement.bundles.is_empty() {
            // Waiting for its wave, with no previous revision to run.
            phase = status::Phase::Pending;
        }
        let revision = rollout_counts(placement, &phase, Instant::now());
        let placement = &*placement;
        let message = failure_of(placement).map(|message| format!("{}: {message}", self.cluster));
        let mut status = status::placement_status(&self.cluster, &phase, message);
        status.rules = placement.rules.summaries(
            placement.live.values().map(|live| &live.object),
            &self.cluster,
            &self.labels,
            &phase,
        );
        status.objects = placement
            .live
            .iter()
            .filter_map(|(reference, live)| status::object_status(reference, live))
            .take(relaymesh_protocol::status::MAX_REPORTED_OBJECTS)
            .collect();
        status.revision_groups = match (&placement.wave_label, &revision) {
            (Some(label), Some(counts)) => vec![relaymesh_protocol::RevisionGroup {
                label: label.clone(),
                value: relaymesh_topology::rollout::key_of(&self.labels, label).to_string(),
                counts: *counts,
            }],
            _ => Vec::new(),
        };
        status.revisions = revision.into_iter().collect();
        status.applied_revisions = placement
            .applied_revision
            .map(|revision| relaymesh_protocol::AppliedRevision {
                revision,
                counts: status.counts,
            })
            .into_iter()
            .collect();
        self.reporter.report(key, status).await;
    }
}

/// Why `placement` fails, if it does, in one message: a failure that is
/// not one object's first, then the first object that could not be
/// applied, then the first failed workload.
fn failure_of(placement: &Placement) -> Option<String> {
    let failed_workload = placement
        .health
        .iter()
        .find_map(|(object, health)| match health {
            Health::Failed(reason) => Some(format!("{object}: {reason}")),
            _ => None,
        });
    placement
        .problem
        .clone()
        .or_else(|| {
            placement
                .errors
                .iter()
                .next()
                .map(|(object, reason)| format!("{object}: {reason}"))
        })
        .or(failed_workload)
}
