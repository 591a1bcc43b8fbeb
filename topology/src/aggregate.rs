//! A subtree's clusters summarised for placement.
//!
//! An [`Aggregate`] counts a subtree's clusters by their exact label set. A
//! fleet of a million clusters has few distinct label sets (regions × zones ×
//! tiers), so a relay holds one small aggregate per child and answers "how
//! many clusters below this child match, per value of the spread label" in
//! time proportional to the distinct label sets, never to the clusters.
//!
//! Aggregates form a commutative monoid under [`Aggregate::merge`] with the
//! empty aggregate as identity, so a relay's own aggregate is the merge of its
//! children's, whatever order they report in. Removing a cluster is the
//! inverse of adding it.

use std::collections::BTreeMap;

use relaymesh_protocol::{LabelSelector, LabelSet};

use crate::selector;

/// A cluster's labels.
pub type Labels = BTreeMap<String, String>;

/// How many clusters of a subtree carry each distinct label set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Aggregate {
    /// Each distinct label set with its count. The sets are shared with
    /// the records they came from, so a leaf's aggregate of one cluster
    /// holds a pointer, not a second copy of its labels. A map, not a
    /// sorted vector (which would save a leaf about 130 bytes per child):
    /// a fleet whose clusters each carry a label of their own (a site
    /// name) has as many sets as clusters, and inserting into a vector
    /// would move half of it each time.
    counts: BTreeMap<LabelSet, u64>,
}

/// How many clusters of a subtree a placement could select.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Supply {
    /// Matching clusters (with `spread_by`: only those carrying the label).
    pub total: u64,
    /// With `spread_by`: matching clusters per value of the label. Values
    /// with no matching cluster are absent.
    pub per_value: BTreeMap<String, u64>,
}

impl Aggregate {
    /// The empty aggregate, the identity of [`merge`](Self::merge).
    pub fn new() -> Self {
        Self::default()
    }

    /// The aggregate of a single cluster, as a leaf reports itself.
    pub fn of_cluster(labels: &LabelSet) -> Self {
        Self {
            counts: BTreeMap::from([(labels.clone(), 1)]),
        }
    }

    /// Counts one more cluster with `labels`.
    pub fn add(&mut self, labels: &LabelSet) {
        self.add_many(labels, 1);
    }

    /// Counts `count` more clusters with `labels`.
    pub fn add_many(&mut self, labels: &LabelSet, count: u64) {
        if count == 0 {
            return;
        }
        match self.counts.get_mut(labels) {
            Some(existing) => *existing = existing.saturating_add(count),
            None => {
                self.counts.insert(labels.clone(), count);
            }
        }
    }

    /// Forgets one cluster with `labels`; false if there was none.
    pub fn remove(&mut self, labels: &LabelSet) -> bool {
        let Some(count) = self.counts.get_mut(labels) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(labels);
        }
        true
    }

    /// Adds every cluster of `other`.
    pub fn merge(&mut self, other: &Aggregate) {
        for (labels, count) in &other.counts {
            self.add_many(labels, *count);
        }
    }

    /// Forgets every cluster of `other`, which must have been merged in
    /// before (a child's old aggregate, when it reports a new one). Counts
    /// never go below zero; false if `other` held clusters this did not.
    pub fn subtract(&mut self, other: &Aggregate) -> bool {
        let mut contained = true;
        for (labels, count) in &other.counts {
            match self.counts.get_mut(labels) {
                Some(existing) if *existing > *count => *existing -= count,
                Some(existing) => {
                    contained &= *existing == *count;
                    self.counts.remove(labels);
                }
                None => contained = false,
            }
        }
        contained
    }

    /// How many clusters in all. Saturates, as every sum of counts here
    /// does: aggregates are merged from what children report, and a hostile
    /// child's huge counts must not overflow a parent's.
    pub fn clusters(&self) -> u64 {
        self.counts
            .values()
            .fold(0, |sum, count| sum.saturating_add(*count))
    }

    /// How many distinct label sets: the cost of [`supply`](Self::supply).
    pub fn label_sets(&self) -> usize {
        self.counts.len()
    }

    /// Whether the subtree holds no cluster.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Each distinct label set with its count, in label-set order.
    pub fn iter(&self) -> impl Iterator<Item = (&LabelSet, u64)> + '_ {
        self.counts.iter().map(|(labels, count)| (labels, *count))
    }

    /// How many clusters match `selector` (`None`: every cluster), counted
    /// per value of `spread_by` when set. With `spread_by`, a cluster without
    /// that label is not counted at all.
    pub fn supply(&self, selector: Option<&LabelSelector>, spread_by: Option<&str>) -> Supply {
        let mut supply = Supply::default();
        for (labels, count) in self.matching(selector, spread_by) {
            supply.total = supply.total.saturating_add(count);
            if let Some(value) = spread_by.and_then(|key| labels.get(key)) {
                let per_value = supply.per_value.entry(value.to_string()).or_default();
                *per_value = per_value.saturating_add(count);
            }
        }
        supply
    }

    /// [`Self::supply`]'s total alone, with no map of values built.
    pub fn supply_total(&self, selector: Option<&LabelSelector>, spread_by: Option<&str>) -> u64 {
        self.matching(selector, spread_by)
            .fold(0u64, |total, (_, count)| total.saturating_add(count))
    }

    /// The label sets [`Self::supply`] counts, with their clusters.
    fn matching<'a>(
        &'a self,
        selector: Option<&'a LabelSelector>,
        spread_by: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a LabelSet, u64)> + 'a {
        self.counts.iter().filter_map(move |(labels, count)| {
            let selected = selector.is_none_or(|selector| selector::matches(selector, labels));
            let spread = spread_by.is_none_or(|key| labels.contains_key(key));
            (selected && spread).then_some((labels, *count))
        })
    }
}

impl<'a> FromIterator<&'a LabelSet> for Aggregate {
    fn from_iter<I: IntoIterator<Item = &'a LabelSet>>(clusters: I) -> Self {
        let mut aggregate = Self::new();
        for labels in clusters {
            aggregate.add(labels);
        }
        aggregate
    }
}

impl Supply {
    /// Adds `other`'s clusters to this supply.
    pub fn merge(&mut self, other: &Supply) {
        self.total = self.total.saturating_add(other.total);
        for (value, count) in &other.per_value {
            let per_value = self.per_value.entry(value.clone()).or_default();
            *per_value = per_value.saturating_add(*count);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> LabelSet {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn supply_counts_matching_clusters_per_spread_value() {
        let eu_edge = labels(&[("region", "eu"), ("tier", "edge")]);
        let us_edge = labels(&[("region", "us"), ("tier", "edge")]);
        let bare_edge = labels(&[("tier", "edge")]);
        let eu_core = labels(&[("region", "eu"), ("tier", "core")]);
        let mut aggregate = Aggregate::new();
        aggregate.add_many(&eu_edge, 3);
        aggregate.add(&us_edge);
        aggregate.add(&bare_edge);
        aggregate.add(&eu_core);
        assert_eq!(aggregate.clusters(), 6);
        assert_eq!(aggregate.label_sets(), 4);

        let edge = selector::parse("tier=edge").expect("valid");
        let plain = aggregate.supply(Some(&edge), None);
        assert_eq!((plain.total, plain.per_value.len()), (5, 0));
        let spread = aggregate.supply(Some(&edge), Some("region"));
        assert_eq!(
            spread.total, 4,
            "the cluster without a region is not counted"
        );
        assert_eq!(
            spread.per_value,
            [("eu".into(), 3), ("us".into(), 1)].into()
        );
        assert_eq!(aggregate.supply(None, None).total, 6);

        assert!(aggregate.remove(&us_edge));
        assert!(!aggregate.remove(&us_edge));
        assert_eq!(aggregate.label_sets(), 3);
        assert_eq!(aggregate.supply(Some(&edge), Some("region")).total, 3);
    }

    fn label_set() -> impl Strategy<Value = LabelSet> {
        prop::collection::btree_map("[a-c]", "[x-z]", 0..3).prop_map(LabelSet::from)
    }

    fn aggregate() -> impl Strategy<Value = Aggregate> {
        prop::collection::vec(label_set(), 0..12)
            .prop_map(|clusters| clusters.iter().collect::<Aggregate>())
    }

    fn merged(a: &Aggregate, b: &Aggregate) -> Aggregate {
        let mut out = a.clone();
        out.merge(b);
        out
    }

    proptest! {
        #[test]
        fn merge_is_a_commutative_monoid(a in aggregate(), b in aggregate(), c in aggregate()) {
            prop_assert_eq!(merged(&a, &b), merged(&b, &a));
            prop_assert_eq!(merged(&merged(&a, &b), &c), merged(&a, &merged(&b, &c)));
            prop_assert_eq!(merged(&a, &Aggregate::new()), a.clone());
            prop_assert_eq!(merged(&Aggregate::new(), &a), a.clone());
        }

        #[test]
        fn subtract_and_remove_undo_merge_and_add(a in aggregate(), b in aggregate(), one in label_set()) {
            let mut both = merged(&a, &b);
            prop_assert!(both.subtract(&b));
            prop_assert_eq!(&both, &a);
            both.add(&one);
            prop_assert!(both.remove(&one));
            prop_assert_eq!(both, a);
        }

        #[test]
        fn huge_counts_saturate_instead_of_overflowing(
            counts in prop::collection::vec((label_set(), any::<u64>()), 1..6),
            spread in proptest::option::of("[a-c]"),
        ) {
            let mut a = Aggregate::new();
            let mut b = Aggregate::new();
            for (labels, count) in &counts {
                a.add_many(labels, *count);
                b.add_many(labels, u64::MAX - count / 2);
            }
            let mut both = merged(&a, &b);
            prop_assert!(both.clusters() >= a.clusters().max(b.clusters()));
            let supply = |x: &Aggregate| x.supply(None, spread.as_deref());
            let mut sum = supply(&a);
            sum.merge(&supply(&b));
            prop_assert_eq!(&supply(&both), &sum);
            prop_assert!(sum.total >= supply(&a).total);
            both.merge(&b);
            prop_assert_eq!(both.clusters(), u64::MAX);
        }

        #[test]
        fn supply_of_a_merge_is_the_sum(
            a in aggregate(),
            b in aggregate(),
            key in "[a-c]",
            value in "[x-z]",
            spread in proptest::option::of("[a-c]"),
        ) {
            let selector = selector::parse(&format!("{key}!={value}")).expect("valid");
            let supply = |x: &Aggregate| x.supply(Some(&selector), spread.as_deref());
            let mut sum = supply(&a);
            sum.merge(&supply(&b));
            prop_assert_eq!(supply(&merged(&a, &b)), sum);
        }

        #[test]
        fn supply_total_is_the_supplys_total(
            a in aggregate(),
            key in "[a-c]",
            value in "[x-z]",
            selected in any::<bool>(),
            spread in proptest::option::of("[a-c]"),
        ) {
            let selector = selector::parse(&format!("{key}={value}")).expect("valid");
            let selector = selected.then_some(&selector);
            prop_assert_eq!(
                a.supply_total(selector, spread.as_deref()),
                a.supply(selector, spread.as_deref()).total
            );
        }
    }
}
