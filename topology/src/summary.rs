//! The status-summary algebra: placement status merges by adding counts, so
//! a relay can combine its children's summaries in any order and forward one.

use relaymesh_protocol::{PhaseCounts, PlacementStatus};

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
/// result.
pub fn merge<'a>(statuses: impl IntoIterator<Item = &'a PlacementStatus>) -> PlacementStatus {
    let mut merged = PlacementStatus::default();
    for status in statuses {
        merged.counts = add(&merged.counts, &status.counts);
        if merged.message.is_none() {
            merged.message.clone_from(&status.message);
        }
    }
    merged
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
                &PlacementStatus { counts: a, message: None },
                &PlacementStatus { counts: b, message: None },
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
        fn merge_sums_whatever_the_grouping(parts in prop::collection::vec(counts(), 0..8), cut in 0usize..8) {
            let statuses: Vec<PlacementStatus> = parts
                .iter()
                .map(|counts| PlacementStatus { counts: *counts, message: None })
                .collect();
            let cut = cut.min(statuses.len());
            let left = merge(&statuses[..cut]);
            let right = merge(&statuses[cut..]);
            prop_assert_eq!(merge(&statuses).counts, merge([&left, &right]).counts);
        }
    }
}
