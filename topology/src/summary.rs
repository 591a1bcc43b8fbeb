//! The status-summary algebra: placement status merges by adding counts, so
//! a relay can combine its children's summaries in any order and forward one.

use relaymesh_protocol::status::MAX_FAILING_CLUSTERS;
use relaymesh_protocol::{FailingCluster, PhaseCounts, PlacementStatus};

/// The sum of two counts (a commutative monoid with the zero counts).
pub fn add(a: &PhaseCounts, b: &PhaseCounts) -> PhaseCounts {
    PhaseCounts {
        pending: a.pending.saturating_add(b.pending),
        applied: a.applied.saturating_add(b.applied),
        ready: a.ready.saturating_add(b.ready),
        failed: a.failed.saturating_add(b.failed),
        offline: a.offline.saturating_add(b.offline),
    }
}

/// Every cluster of `counts`, counted as offline: what a parent reports for
/// a child whose link is down.
pub fn offline(counts: &PhaseCounts) -> PhaseCounts {
    PhaseCounts {
        offline: total(counts),
        ..PhaseCounts::default()
    }
}

/// How many clusters the counts cover. Saturates, like [`add`]: counts come
/// from children, and a hostile child's huge numbers must not overflow.
pub fn total(counts: &PhaseCounts) -> u64 {
    [counts.applied, counts.ready, counts.failed, counts.offline]
        .into_iter()
        .fold(counts.pending, u64::saturating_add)
}

/// Merges statuses: counts add up; the message kept is the first one in
/// `statuses` order, so callers pass children sorted by name for a stable
/// result. The failing clusters are the first [`MAX_FAILING_CLUSTERS`] by
/// name of all of them, each once ([`bounded`]).
pub fn merge<'a>(statuses: impl IntoIterator<Item = &'a PlacementStatus>) -> PlacementStatus {
    let mut merged = PlacementStatus::default();
    let mut failing = Vec::new();
    for status in statuses {
        merged.counts = add(&merged.counts, &status.counts);
        if merged.message.is_none() {
            merged.message.clone_from(&status.message);
        }
        failing.extend(status.failing.iter().take(MAX_FAILING_CLUSTERS).cloned());
        if failing.len() > 4 * MAX_FAILING_CLUSTERS {
            failing = bounded(failing);
        }
    }
    merged.failing = bounded(failing);
    merged
}

/// The first [`MAX_FAILING_CLUSTERS`] clusters by name, each once (the
/// smallest message if a hostile child named one twice). Keeping the
/// smallest names of a union is associative and commutative, so the root's
/// list does not depend on the tree's shape or the order reports arrive.
pub fn bounded(mut failing: Vec<FailingCluster>) -> Vec<FailingCluster> {
    failing.sort();
    failing.dedup_by(|later, earlier| later.cluster == earlier.cluster);
    failing.truncate(MAX_FAILING_CLUSTERS);
    failing
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counts() -> impl Strategy<Value = PhaseCounts> {
        any::<[u32; 5]>().prop_map(|n| PhaseCounts {
            pending: n[0].into(),
            applied: n[1].into(),
            ready: n[2].into(),
            failed: n[3].into(),
            offline: n[4].into(),
        })
    }

    fn failure() -> impl Strategy<Value = FailingCluster> {
        ("c[0-9]{1,2}", "[a-z]{0,3}")
            .prop_map(|(cluster, message)| FailingCluster { cluster, message })
    }

    fn failing() -> impl Strategy<Value = Vec<FailingCluster>> {
        prop::collection::vec(failure(), 0..6)
    }

    /// Any counts at all, as a hostile child may report them.
    fn any_counts() -> impl Strategy<Value = PhaseCounts> {
        any::<[u64; 5]>().prop_map(|n| PhaseCounts {
            pending: n[0],
            applied: n[1],
            ready: n[2],
            failed: n[3],
            offline: n[4],
        })
    }

    proptest! {
        #[test]
        fn hostile_counts_saturate_instead_of_overflowing(a in any_counts(), b in any_counts()) {
            let sum = add(&a, &b);
            prop_assert!(total(&sum) >= total(&a).max(total(&b)));
            prop_assert_eq!(total(&offline(&sum)), total(&sum));
            let merged = merge([
                &PlacementStatus { counts: a, ..PlacementStatus::default() },
                &PlacementStatus { counts: b, ..PlacementStatus::default() },
            ]);
            prop_assert_eq!(merged.counts, sum);
        }

        #[test]
        fn add_is_a_commutative_monoid(a in counts(), b in counts(), c in counts()) {
            prop_assert_eq!(add(&a, &b), add(&b, &a));
            prop_assert_eq!(add(&add(&a, &b), &c), add(&a, &add(&b, &c)));
            prop_assert_eq!(add(&a, &PhaseCounts::default()), a);
            prop_assert_eq!(total(&add(&a, &b)), total(&a) + total(&b));
        }

        #[test]
        fn offline_keeps_the_total(a in counts()) {
            prop_assert_eq!(total(&offline(&a)), total(&a));
        }

        #[test]
        fn merge_is_the_same_whatever_the_grouping_and_order(
            parts in prop::collection::vec((counts(), failing()), 0..8),
            cut in 0usize..8,
        ) {
            let statuses: Vec<PlacementStatus> = parts
                .iter()
                .map(|(counts, failing)| PlacementStatus {
                    counts: *counts,
                    failing: bounded(failing.clone()),
                    ..PlacementStatus::default()
                })
                .collect();
            let cut = cut.min(statuses.len());
            let left = merge(&statuses[..cut]);
            let right = merge(&statuses[cut..]);
            let whole = merge(&statuses);
            prop_assert_eq!(whole.counts, merge([&left, &right]).counts);
            prop_assert_eq!(&whole.failing, &merge([&left, &right]).failing);
            prop_assert_eq!(&whole.failing, &merge([&right, &left]).failing);
            let reversed: Vec<&PlacementStatus> = statuses.iter().rev().collect();
            prop_assert_eq!(&whole.failing, &merge(reversed).failing);
            // Exactly the first names of the union, each once.
            let expected: Vec<String> = parts
                .iter()
                .flat_map(|(_, failing)| bounded(failing.clone()))
                .map(|failing| failing.cluster)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .take(MAX_FAILING_CLUSTERS)
                .collect();
            let got: Vec<String> = whole.failing.iter().map(|failing| failing.cluster.clone()).collect();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn a_hostile_list_is_bounded(failing in prop::collection::vec(failure(), 0..40)) {
            let merged = merge([&PlacementStatus { failing, ..PlacementStatus::default() }]);
            prop_assert!(merged.failing.len() <= MAX_FAILING_CLUSTERS);
            prop_assert!(merged.failing.windows(2).all(|pair| pair[0].cluster < pair[1].cluster));
        }
    }
}
