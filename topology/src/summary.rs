//! The status-summary algebra. A placement's status below a node is a
//! [`PlacementStatus`]; a relay merges its children's with [`merge`] and
//! forwards one. Every part merges associatively and commutatively, so the
//! root's status does not depend on the tree's shape or the order reports
//! arrive, and a relay that keeps each child's last report and merges again
//! replaces a child's contribution exactly (no double counting when a child
//! resends, reconnects or moves):
//!
//! * phase counts add ([`add`]);
//! * the failing clusters are the first [`MAX_FAILING_CLUSTERS`] by name
//!   ([`bounded`]);
//! * each status rule's [`RuleSummary`] merges by rule name: counts and sums
//!   add, minima and maxima combine, the largest [`MAX_TOP`] values are
//!   kept with their clusters, and groups merge by key, the first
//!   [`MAX_GROUPS`] keys kept and the rest folded into `other`
//!   ([`merge_rules`]);
//! * the objects' own statuses survive only while the merged status covers
//!   exactly one cluster ([`PlacementStatus::objects`]).
//!
//! Everything a child reports is bounded again on merge: a hostile child's
//! huge counts saturate, its long lists are cut, its non-finite numbers are
//! dropped.

use std::collections::BTreeMap;

use relaymesh_protocol::status::{
    MAX_FAILING_CLUSTERS, MAX_GROUPS, MAX_OBJECT_STATUS_BYTES, MAX_REPORTED_OBJECTS, MAX_REVISIONS,
    MAX_REVISION_GROUPS, MAX_RULE_SUMMARIES, MAX_TOP,
};
use relaymesh_protocol::{
    AppliedRevision, BundleId, FailingCluster, Number, ObjectStatus, PhaseCounts, PlacementStatus,
    Ranked, RevisionCounts, RevisionGroup, RuleSummary, Summary,
};

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
/// name of all of them, each once ([`bounded`]); rule summaries merge by
/// rule ([`merge_rules`]); objects' statuses are kept only if the merged
/// counts cover exactly one cluster.
pub fn merge<'a>(statuses: impl IntoIterator<Item = &'a PlacementStatus>) -> PlacementStatus {
    let mut merged = PlacementStatus::default();
    let mut failing = Vec::new();
    let mut rules: Vec<&RuleSummary> = Vec::new();
    let mut objects: Option<&Vec<ObjectStatus>> = None;
    let mut revisions: BTreeMap<BundleId, RevisionCounts> = BTreeMap::new();
    let mut revision_groups: BTreeMap<(&str, &str), BTreeMap<BundleId, RevisionCounts>> =
        BTreeMap::new();
    let mut applied: BTreeMap<BundleId, PhaseCounts> = BTreeMap::new();
    for status in statuses {
        for counts in status.applied_revisions.iter().take(MAX_REVISIONS) {
            let merged = applied.entry(counts.revision).or_default();
            *merged = add(merged, &counts.counts);
        }
        for counts in status.revisions.iter().take(MAX_REVISIONS) {
            add_revision(&mut revisions, counts);
        }
        for group in status.revision_groups.iter().take(MAX_REVISION_GROUPS) {
            let by_revision = revision_groups
                .entry((group.label.as_str(), group.value.as_str()))
                .or_default();
            add_revision(by_revision, &group.counts);
        }
        merged.counts = add(&merged.counts, &status.counts);
        if merged.message.is_none() {
            merged.message.clone_from(&status.message);
        }
        failing.extend(status.failing.iter().take(MAX_FAILING_CLUSTERS).cloned());
        if failing.len() > 4 * MAX_FAILING_CLUSTERS {
            failing = bounded(failing);
        }
        rules.extend(status.rules.iter());
        if total(&status.counts) == 1 && !status.objects.is_empty() {
            objects = Some(&status.objects);
        }
    }
    merged.failing = bounded(failing);
    merged.rules = merge_rules(rules);
    merged.revisions = bounded_revisions(revisions);
    merged.revision_groups = bounded_revision_groups(revision_groups);
    merged.applied_revisions = bounded_applied(applied);
    if total(&merged.counts) == 1 {
        merged.objects = objects
            .map(|objects| bounded_objects(objects))
            .unwrap_or_default();
    }
    merged
}

fn add_revision(revisions: &mut BTreeMap<BundleId, RevisionCounts>, counts: &RevisionCounts) {
    let merged = revisions.entry(counts.revision).or_insert(RevisionCounts {
        revision: counts.revision,
        waiting: 0,
        updating: 0,
        succeeded: 0,
        failed: 0,
    });
    merged.waiting = merged.waiting.saturating_add(counts.waiting);
    merged.updating = merged.updating.saturating_add(counts.updating);
    merged.succeeded = merged.succeeded.saturating_add(counts.succeeded);
    merged.failed = merged.failed.saturating_add(counts.failed);
}

/// The [`MAX_REVISION_GROUPS`] groups that count the most clusters (the
/// smaller key first on a tie), sorted. A rollout keys its wave by one
/// label, whose values a fleet has few of; only a hostile child's
/// inventions or a label with very many values are ever left out, and the
/// root then gives the values it does not hear of no budget.
fn bounded_revision_groups(
    groups: BTreeMap<(&str, &str), BTreeMap<BundleId, RevisionCounts>>,
) -> Vec<RevisionGroup> {
    let mut kept: Vec<RevisionGroup> = groups
        .into_iter()
        .flat_map(|((label, value), by_revision)| {
            by_revision.into_values().map(move |counts| RevisionGroup {
                label: label.to_string(),
                value: value.to_string(),
                counts,
            })
        })
        .collect();
    if kept.len() > MAX_REVISION_GROUPS {
        let clusters = |group: &RevisionGroup| {
            let counts = &group.counts;
            counts
                .waiting
                .saturating_add(counts.updating)
                .saturating_add(counts.succeeded)
                .saturating_add(counts.failed)
        };
        kept.sort_by(|a, b| clusters(b).cmp(&clusters(a)).then_with(|| a.cmp(b)));
        kept.truncate(MAX_REVISION_GROUPS);
        kept.sort();
    }
    kept
}

/// The [`MAX_REVISIONS`] revisions that count the most clusters (the
/// smaller revision first on a tie), sorted by revision. Clusters know of
/// at most two revisions of a placement at once in a healthy tree (the
/// newest is on its way down), so only a hostile child's inventions are
/// ever left out, and they only skew its own subtree's counts.
fn bounded_revisions(revisions: BTreeMap<BundleId, RevisionCounts>) -> Vec<RevisionCounts> {
    let mut kept: Vec<RevisionCounts> = revisions.into_values().collect();
    if kept.len() > MAX_REVISIONS {
        let clusters = |counts: &RevisionCounts| {
            counts
                .waiting
                .saturating_add(counts.updating)
                .saturating_add(counts.succeeded)
                .saturating_add(counts.failed)
        };
        kept.sort_by(|a, b| {
            clusters(b)
                .cmp(&clusters(a))
                .then(a.revision.cmp(&b.revision))
        });
        kept.truncate(MAX_REVISIONS);
        kept.sort_by_key(|counts| counts.revision);
    }
    kept
}

/// The [`MAX_REVISIONS`] applied revisions that count the most clusters
/// (the smaller revision first on a tie), sorted by revision, as
/// [`bounded_revisions`] keeps them. Left out, a revision only counts no
/// cluster as updated: the root's `Ready` errs towards not ready.
fn bounded_applied(applied: BTreeMap<BundleId, PhaseCounts>) -> Vec<AppliedRevision> {
    let mut kept: Vec<AppliedRevision> = applied
        .into_iter()
        .map(|(revision, counts)| AppliedRevision { revision, counts })
        .collect();
    if kept.len() > MAX_REVISIONS {
        kept.sort_by(|a, b| {
            total(&b.counts)
                .cmp(&total(&a.counts))
                .then(a.revision.cmp(&b.revision))
        });
        kept.truncate(MAX_REVISIONS);
        kept.sort_by_key(|applied| applied.revision);
    }
    kept
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

/// Merges rule summaries by rule name, sorted by name; at most
/// [`MAX_RULE_SUMMARIES`] (the first by name), as many as a placement's
/// rules and group labels make.
pub fn merge_rules<'a>(rules: impl IntoIterator<Item = &'a RuleSummary>) -> Vec<RuleSummary> {
    let mut by_rule: BTreeMap<&str, Vec<&RuleSummary>> = BTreeMap::new();
    for rule in rules {
        by_rule.entry(&rule.rule).or_default().push(rule);
    }
    by_rule
        .into_iter()
        .take(MAX_RULE_SUMMARIES)
        .map(|(name, parts)| merge_rule(name, parts))
        .collect()
}

/// Merges one rule's summaries: every value in `all`; groups merged by
/// key, the first [`MAX_GROUPS`] keys kept and the others' values in
/// `other`. A key among the first of the whole union is among the first of
/// every part of it, so its values are never folded into `other` on the
/// way: the result does not depend on grouping or order.
fn merge_rule(name: &str, parts: Vec<&RuleSummary>) -> RuleSummary {
    let mut groups: BTreeMap<&str, Vec<&Summary>> = BTreeMap::new();
    let mut other: Vec<&Summary> = Vec::new();
    for part in &parts {
        other.push(&part.other);
        for (key, summary) in &part.groups {
            groups.entry(key).or_default().push(summary);
        }
    }
    let mut kept = Vec::new();
    for (index, (key, summaries)) in groups.into_iter().enumerate() {
        if index < MAX_GROUPS {
            kept.push((key.to_string(), merge_summaries(summaries)));
        } else {
            other.extend(summaries);
        }
    }
    RuleSummary {
        rule: name.to_string(),
        all: merge_summaries(parts.iter().map(|part| &part.all)),
        groups: kept,
        other: merge_summaries(other),
    }
}

/// Merges summaries of numbers. A summary holding a non-finite number (only
/// a hostile child sends one) is left out whole.
pub fn merge_summaries<'a>(summaries: impl IntoIterator<Item = &'a Summary>) -> Summary {
    let mut merged = Summary::default();
    for summary in summaries {
        if summary.count == 0 || !finite(summary) {
            continue;
        }
        merged.count = merged.count.saturating_add(summary.count);
        merged.sum = Number(merged.sum.0 + summary.sum.0);
        merged.min = [merged.min, summary.min].into_iter().flatten().min();
        merged.max = [merged.max, summary.max].into_iter().flatten().max();
        merged.top.extend(summary.top.iter().take(MAX_TOP).cloned());
        if merged.top.len() > 4 * MAX_TOP {
            merged.top = top(std::mem::take(&mut merged.top));
        }
    }
    merged.top = top(merged.top);
    merged
}

/// The summary of one value reported by `cluster`.
pub fn single(value: f64, cluster: &str) -> Summary {
    if !value.is_finite() {
        return Summary::default();
    }
    let value = Number(value);
    Summary {
        count: 1,
        sum: value,
        min: Some(value),
        max: Some(value),
        top: vec![Ranked {
            value,
            cluster: cluster.to_string(),
        }],
    }
}

/// The average of the summary's values, if it has any.
pub fn average(summary: &Summary) -> Option<f64> {
    (summary.count > 0).then(|| summary.sum.0 / summary.count as f64)
}

/// The largest [`MAX_TOP`] values, largest first, ties by cluster name: a
/// total order, so keeping the first of a union is associative.
fn top(mut ranked: Vec<Ranked>) -> Vec<Ranked> {
    ranked.sort_by(|a, b| {
        b.value
            .cmp(&a.value)
            .then_with(|| a.cluster.cmp(&b.cluster))
    });
    ranked.truncate(MAX_TOP);
    ranked
}

fn finite(summary: &Summary) -> bool {
    let numbers = [Some(summary.sum), summary.min, summary.max];
    numbers.iter().flatten().all(|number| number.0.is_finite())
        && summary.top.iter().all(|ranked| ranked.value.0.is_finite())
}

/// At most [`MAX_REPORTED_OBJECTS`] objects, none with a status over
/// [`MAX_OBJECT_STATUS_BYTES`].
fn bounded_objects(objects: &[ObjectStatus]) -> Vec<ObjectStatus> {
    objects
        .iter()
        .filter(|object| object.status.len() <= MAX_OBJECT_STATUS_BYTES)
        .take(MAX_REPORTED_OBJECTS)
        .cloned()
        .collect()
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

        /// Per-revision counts of clusters that know at most two revisions
        /// (as in a healthy tree) add up exactly whatever the grouping.
        #[test]
        fn revision_counts_add_up_whatever_the_grouping(
            parts in prop::collection::vec((0u8..2, 0u64..3, 0u64..3, 0u64..3, 0u64..3), 0..10),
            cut in 0usize..10,
        ) {
            let statuses: Vec<PlacementStatus> = parts
                .iter()
                .map(|(revision, waiting, updating, succeeded, failed)| {
                    let counts = RevisionCounts {
                        revision: BundleId([*revision; 32]),
                        waiting: *waiting,
                        updating: *updating,
                        succeeded: *succeeded,
                        failed: *failed,
                    };
                    PlacementStatus {
                        revisions: vec![counts],
                        // Each counted under a zone chosen by its counts.
                        revision_groups: vec![RevisionGroup {
                            label: "zone".into(),
                            value: format!("z{}", waiting % 2),
                            counts,
                        }],
                        ..PlacementStatus::default()
                    }
                })
                .collect();
            let cut = cut.min(statuses.len());
            let whole = merge(&statuses);
            let grouped = merge([&merge(&statuses[..cut]), &merge(&statuses[cut..])]);
            prop_assert_eq!(&whole.revisions, &grouped.revisions);
            prop_assert_eq!(&whole.revision_groups, &grouped.revision_groups);
            let in_groups: u64 = whole
                .revision_groups
                .iter()
                .map(|group| group.counts.waiting + group.counts.updating + group.counts.succeeded + group.counts.failed)
                .sum();
            let in_revisions: u64 = whole
                .revisions
                .iter()
                .map(|c| c.waiting + c.updating + c.succeeded + c.failed)
                .sum();
            prop_assert_eq!(in_groups, in_revisions, "the groups split the same clusters");
            for revision in 0u8..2 {
                let expected: u64 = parts
                    .iter()
                    .filter(|part| part.0 == revision)
                    .map(|part| part.1 + part.2 + part.3 + part.4)
                    .sum();
                let got = whole
                    .revisions
                    .iter()
                    .find(|counts| counts.revision == BundleId([revision; 32]))
                    .map_or(0, |c| c.waiting + c.updating + c.succeeded + c.failed);
                prop_assert_eq!(got, expected);
            }
        }

        /// Clusters per applied revision add up exactly whatever the
        /// grouping and order, and every cluster counted in a revision is
        /// counted once, in the phase it reported.
        #[test]
        fn applied_revisions_add_up_whatever_the_grouping(
            parts in prop::collection::vec((0u8..3, counts()), 0..10),
            cut in 0usize..10,
        ) {
            let statuses: Vec<PlacementStatus> = parts
                .iter()
                .map(|(revision, counts)| PlacementStatus {
                    counts: *counts,
                    applied_revisions: vec![AppliedRevision {
                        revision: BundleId([*revision; 32]),
                        counts: *counts,
                    }],
                    ..PlacementStatus::default()
                })
                .collect();
            let cut = cut.min(statuses.len());
            let whole = merge(&statuses);
            let grouped = merge([&merge(&statuses[..cut]), &merge(&statuses[cut..])]);
            let reversed: Vec<&PlacementStatus> = statuses.iter().rev().collect();
            prop_assert_eq!(&whole.applied_revisions, &grouped.applied_revisions);
            prop_assert_eq!(&whole.applied_revisions, &merge(reversed).applied_revisions);
            for revision in 0u8..3 {
                let expected = parts
                    .iter()
                    .filter(|part| part.0 == revision)
                    .fold(PhaseCounts::default(), |sum, part| add(&sum, &part.1));
                let got = whole
                    .applied_revisions
                    .iter()
                    .find(|applied| applied.revision == BundleId([revision; 32]))
                    .map_or(PhaseCounts::default(), |applied| applied.counts);
                prop_assert_eq!(got, expected);
            }
            let in_revisions = whole
                .applied_revisions
                .iter()
                .fold(PhaseCounts::default(), |sum, applied| add(&sum, &applied.counts));
            prop_assert_eq!(in_revisions, whole.counts);
        }

        #[test]
        fn applied_revisions_past_the_bound_keep_the_most_clusters(count in 0u8..20) {
            // One child each: a child's own list past the bound is cut on
            // merge, so many revisions come from many children.
            let statuses: Vec<PlacementStatus> = (0..count)
                .map(|revision| PlacementStatus {
                    applied_revisions: vec![AppliedRevision {
                        revision: BundleId([revision; 32]),
                        counts: PhaseCounts { ready: u64::from(revision), ..PhaseCounts::default() },
                    }],
                    ..PlacementStatus::default()
                })
                .collect();
            let merged = merge(&statuses);
            prop_assert_eq!(merged.applied_revisions.len(), usize::from(count).min(MAX_REVISIONS));
            if usize::from(count) > MAX_REVISIONS {
                let smallest = merged.applied_revisions.iter().map(|a| a.counts.ready).min();
                prop_assert_eq!(smallest, Some(u64::from(count) - MAX_REVISIONS as u64));
            }
        }

        #[test]
        fn a_hostile_list_of_revisions_is_bounded(count in 0u8..20) {
            let revisions = (0..count)
                .map(|index| RevisionCounts {
                    revision: BundleId([index; 32]),
                    waiting: 1,
                    updating: 0,
                    succeeded: 0,
                    failed: 0,
                })
                .collect();
            let merged = merge([&PlacementStatus { revisions, ..PlacementStatus::default() }]);
            prop_assert!(merged.revisions.len() <= MAX_REVISIONS);
        }

        #[test]
        fn a_hostile_list_is_bounded(failing in prop::collection::vec(failure(), 0..40)) {
            let merged = merge([&PlacementStatus { failing, ..PlacementStatus::default() }]);
            prop_assert!(merged.failing.len() <= MAX_FAILING_CLUSTERS);
            prop_assert!(merged.failing.windows(2).all(|pair| pair[0].cluster < pair[1].cluster));
        }
    }

    /// A cluster's report for one rule: integer values (so sums are exact
    /// whatever the order), grouped by a key from a small set, so bounds
    /// are reached in some cases.
    fn rule_report(rule: &'static str) -> impl Strategy<Value = RuleSummary> {
        (
            "c[0-9]{1,2}",
            prop::collection::vec((0u16..40, -1000i32..1000), 0..4),
        )
            .prop_map(move |(cluster, values)| {
                let mut groups: BTreeMap<String, Vec<Summary>> = BTreeMap::new();
                let mut all = Vec::new();
                for (group, value) in values {
                    let one = single(f64::from(value), &cluster);
                    groups
                        .entry(format!("g{group:02}"))
                        .or_default()
                        .push(one.clone());
                    all.push(one);
                }
                let groups: Vec<(String, Summary)> = groups
                    .into_iter()
                    .map(|(key, values)| (key, merge_summaries(&values)))
                    .collect();
                // What one cluster reports is already bounded like a merge.
                merge_rules([&RuleSummary {
                    rule: rule.to_string(),
                    all: merge_summaries(&all),
                    groups,
                    other: Summary::default(),
                }])
                .remove(0)
            })
    }

    fn with_rules(rules: Vec<RuleSummary>) -> PlacementStatus {
        PlacementStatus {
            rules,
            ..PlacementStatus::default()
        }
    }

    proptest! {
        #[test]
        fn rule_merge_is_the_same_whatever_the_grouping_and_order(
            reports in prop::collection::vec((rule_report("a"), rule_report("b")), 0..12),
            cut in 0usize..12,
        ) {
            let statuses: Vec<PlacementStatus> = reports
                .iter()
                .map(|(a, b)| with_rules(vec![a.clone(), b.clone()]))
                .collect();
            let cut = cut.min(statuses.len());
            let whole = merge(&statuses);
            let left = merge(&statuses[..cut]);
            let right = merge(&statuses[cut..]);
            prop_assert_eq!(&whole.rules, &merge([&left, &right]).rules);
            prop_assert_eq!(&whole.rules, &merge([&right, &left]).rules);
            let reversed: Vec<&PlacementStatus> = statuses.iter().rev().collect();
            prop_assert_eq!(&whole.rules, &merge(reversed).rules);
        }

        #[test]
        fn every_value_is_counted_once_in_a_group_or_in_other(
            reports in prop::collection::vec(rule_report("a"), 0..30),
        ) {
            let statuses: Vec<PlacementStatus> =
                reports.iter().map(|a| with_rules(vec![a.clone()])).collect();
            let merged = merge(&statuses);
            let values: Vec<f64> = reports
                .iter()
                .flat_map(|report| report.groups.iter().map(|(_, summary)| summary))
                .map(|summary| summary.sum.0)
                .collect();
            let count: u64 = reports.iter().map(|report| report.all.count).sum();
            if count == 0 {
                prop_assert!(merged.rules.iter().all(|rule| rule.all.count == 0));
                return Ok(());
            }
            let rule = &merged.rules[0];
            prop_assert_eq!(rule.all.count, count);
            prop_assert_eq!(rule.all.sum.0, values.iter().sum::<f64>());
            prop_assert!(rule.groups.len() <= MAX_GROUPS);
            prop_assert!(rule.groups.windows(2).all(|pair| pair[0].0 < pair[1].0));
            let grouped: u64 = rule.groups.iter().map(|(_, summary)| summary.count).sum();
            prop_assert_eq!(grouped + rule.other.count, count);
            let grouped_sum: f64 = rule.groups.iter().map(|(_, summary)| summary.sum.0).sum();
            prop_assert_eq!(grouped_sum + rule.other.sum.0, rule.all.sum.0);
            prop_assert!(rule.all.top.len() <= MAX_TOP);
            prop_assert_eq!(rule.all.top.first().map(|ranked| ranked.value), rule.all.max);
            prop_assert!(rule.all.top.windows(2).all(|pair| pair[0].value >= pair[1].value));
            prop_assert!(rule.all.min <= rule.all.max);
        }

        #[test]
        fn a_non_finite_summary_from_a_hostile_child_is_left_out(
            report in rule_report("a"),
            poison in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)],
        ) {
            let mut hostile = report.clone();
            hostile.all.sum = Number(poison);
            let merged = merge([&with_rules(vec![report.clone()]), &with_rules(vec![hostile])]);
            let alone = merge([&with_rules(vec![report])]);
            prop_assert_eq!(&merged.rules[0].all, &alone.rules[0].all);
        }
    }

    fn object(name: &str) -> ObjectStatus {
        ObjectStatus {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: name.into(),
            bundle: relaymesh_protocol::BundleId::of(b"bundle"),
            observed: true,
            status: br#"{"readyReplicas":1}"#.to_vec(),
        }
    }

    #[test]
    fn objects_survive_only_while_the_status_covers_one_cluster() {
        let one = PlacementStatus {
            counts: PhaseCounts {
                ready: 1,
                ..PhaseCounts::default()
            },
            objects: vec![object("web")],
            ..PlacementStatus::default()
        };
        let pending = PlacementStatus {
            counts: PhaseCounts {
                pending: 1,
                ..PhaseCounts::default()
            },
            ..PlacementStatus::default()
        };
        let nothing = PlacementStatus::default();
        assert_eq!(merge([&one, &nothing]).objects, vec![object("web")]);
        assert_eq!(
            merge([&nothing, &merge([&one])]).objects,
            vec![object("web")]
        );
        assert!(merge([&one, &pending]).objects.is_empty());
        let mut huge = one.clone();
        huge.objects[0].status = vec![b' '; MAX_OBJECT_STATUS_BYTES + 1];
        huge.objects
            .extend((0..2 * MAX_REPORTED_OBJECTS).map(|n| object(&format!("o{n}"))));
        let merged = merge([&huge]);
        assert_eq!(merged.objects.len(), MAX_REPORTED_OBJECTS);
        assert!(merged
            .objects
            .iter()
            .all(|o| o.status.len() <= MAX_OBJECT_STATUS_BYTES));
    }

    #[test]
    fn average_is_the_sum_over_the_count() {
        let values = [single(1.0, "a"), single(2.0, "b"), single(6.0, "c")];
        let merged = merge_summaries(&values);
        assert_eq!(average(&merged), Some(3.0));
        assert_eq!(average(&Summary::default()), None);
        assert_eq!(merged.min, Some(Number(1.0)));
        assert_eq!(merged.top[0].cluster, "c");
        assert_eq!(single(f64::NAN, "a"), Summary::default());
    }
}
