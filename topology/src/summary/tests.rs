use super::*;
use proptest::prelude::*;

pub(super) fn counts() -> impl Strategy<Value = PhaseCounts> {
    any::<[u32; 5]>().prop_map(|n| PhaseCounts {
        pending: n[0].into(),
        applied: n[1].into(),
        ready: n[2].into(),
        failed: n[3].into(),
        offline: n[4].into(),
    })
}

fn failure() -> impl Strategy<Value = FailingCluster> {
    ("c[0-9]{1,2}", "[a-z]{0,3}").prop_map(|(cluster, message)| FailingCluster { cluster, message })
}

pub(super) fn failing() -> impl Strategy<Value = Vec<FailingCluster>> {
    prop::collection::vec(failure(), 0..6)
}

/// Any counts at all, as a hostile child may report them.
pub(super) fn any_counts() -> impl Strategy<Value = PhaseCounts> {
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
pub(super) fn rule_report(rule: &'static str) -> impl Strategy<Value = RuleSummary> {
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

pub(super) fn object(name: &str) -> ObjectStatus {
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
