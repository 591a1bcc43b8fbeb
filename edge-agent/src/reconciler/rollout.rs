//! This cluster's part in a placement's rollout: which revision its wave
//! lets it run, the rollout's times from the placement's spec, and how the
//! cluster counts in the rollout's revision counts as time goes by.

use std::collections::BTreeMap;

use relaymesh_protocol::BundleId;
use tokio::time::Instant;

use super::state::Placement;
use crate::status;

/// Takes the rollout of slice `entry` into `placement`: its wave and the
/// label it is keyed by. Returns the bundles this cluster runs now, and
/// whether its wave changed (what its status reports changes with it).
pub(super) fn take_rollout(
    placement: &mut Placement,
    entry: &relaymesh_protocol::SliceEntry,
    labels: &BTreeMap<String, String>,
) -> (Vec<BundleId>, bool) {
    let (mut bundles, wave) = self_bundles(entry, labels);
    if bundles.is_empty() && matches!(wave, Some((_, false))) {
        // Outside the wave with no previous revision to run: what
        // it runs already (a revision the root no longer offers)
        // stays, rather than being pruned for want of one.
        bundles.clone_from(&placement.bundles);
    }
    let changed = placement.wave != wave;
    if changed {
        tracing::info!(?wave, "the rollout's wave changed for this cluster");
        placement.updating_since = None;
        placement.ready_since = None;
        placement.wave = wave;
    }
    placement.wave_label = match &entry.target {
        relaymesh_protocol::Target::Placement(target) => {
            target.wave.as_ref().and_then(|wave| wave.key_label.clone())
        }
        _ => None,
    };
    (bundles, changed)
}

/// The bundles this cluster applies of `entry`, and the rollout's newest
/// revision with whether this cluster's wave lets it run it: while a
/// rollout runs (the entry has a wave), the newest revision (the first
/// bundle) if the wave says so, else the previous (the second, if any);
/// otherwise every bundle.
fn self_bundles(
    entry: &relaymesh_protocol::SliceEntry,
    labels: &BTreeMap<String, String>,
) -> (Vec<BundleId>, Option<(BundleId, bool)>) {
    let relaymesh_protocol::Target::Placement(target) = &entry.target else {
        return (entry.bundles.clone(), None);
    };
    let (Some(wave), Some(&newest)) = (&target.wave, entry.bundles.first()) else {
        return (entry.bundles.clone(), None);
    };
    let admitted = relaymesh_topology::rollout::leaf_in_wave(wave, labels);
    let bundles = if admitted {
        vec![newest]
    } else {
        entry.bundles.get(1).copied().into_iter().collect()
    };
    (bundles, Some((newest, admitted)))
}

/// How this cluster counts in its placement's rollout, and when that
/// changes by itself (schedules a report then): waiting outside the wave;
/// failed if the placement failed or was not ready within the deadline;
/// succeeded once ready for `minSuccessTime`; updating before.
pub(super) fn rollout_counts(
    placement: &mut Placement,
    phase: &status::Phase,
    now: Instant,
) -> Option<relaymesh_protocol::RevisionCounts> {
    let (revision, admitted) = placement.wave?;
    let mut counts = relaymesh_protocol::RevisionCounts {
        revision,
        waiting: 0,
        updating: 0,
        succeeded: 0,
        failed: 0,
    };
    if !admitted {
        counts.waiting = 1;
        return Some(counts);
    }
    let since = *placement.updating_since.get_or_insert(now);
    let timing = placement.timing;
    match phase {
        status::Phase::Failed => counts.failed = 1,
        status::Phase::Ready => {
            let ready = *placement.ready_since.get_or_insert(now);
            let done_at = ready + timing.min_success;
            if done_at <= now {
                counts.succeeded = 1;
            } else {
                counts.updating = 1;
                placement.report_at = Some(done_at);
            }
        }
        status::Phase::Pending | status::Phase::Applied => {
            placement.ready_since = None;
            match timing.deadline.map(|deadline| since + deadline) {
                Some(late) if late <= now => counts.failed = 1,
                Some(late) => {
                    counts.updating = 1;
                    placement.report_at = Some(late);
                }
                None => counts.updating = 1,
            }
        }
    }
    if *phase != status::Phase::Ready {
        placement.ready_since = None;
    }
    Some(counts)
}
