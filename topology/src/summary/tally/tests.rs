use super::super::tests::{any_counts, counts, failing, object, rule_report};
use super::super::{bounded, merge};
use super::*;
use proptest::prelude::*;
use relaymesh_protocol::{AppliedRevision, RevisionGroup};

/// One member's report, with every part [`merge`] merges: a few revisions
/// and zones so that members share them, and sometimes a hostile child's
/// huge counts.
fn status() -> impl Strategy<Value = PlacementStatus> {
    (
        prop_oneof![4 => counts(), 1 => any_counts()],
        proptest::option::of("[a-c]"),
        failing(),
        prop::collection::vec(rule_report("a"), 0..2),
        prop::collection::vec((0u8..3, counts()), 0..3),
        prop::collection::vec((0u8..3, 0u64..3, 0u8..2), 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(counts, message, failing, rules, applied, revisions, with_objects)| {
                let revision = |n: u8| BundleId([n; 32]);
                let revision_counts = |(n, waiting, _): (u8, u64, u8)| RevisionCounts {
                    revision: revision(n),
                    waiting,
                    updating: 1,
                    succeeded: 0,
                    failed: 0,
                };
                PlacementStatus {
                    counts,
                    message,
                    failing: bounded(failing),
                    rules,
                    objects: match with_objects {
                        true => vec![object("web")],
                        false => Vec::new(),
                    },
                    revisions: revisions.iter().copied().map(revision_counts).collect(),
                    revision_groups: revisions
                        .iter()
                        .map(|&(n, waiting, zone)| RevisionGroup {
                            label: "zone".into(),
                            value: format!("z{zone}"),
                            counts: revision_counts((n, waiting, zone)),
                        })
                        .collect(),
                    applied_revisions: applied
                        .into_iter()
                        .map(|(n, counts)| AppliedRevision {
                            revision: revision(n),
                            counts,
                        })
                        .collect(),
                }
            },
        )
}

/// A member with exactly one cluster, so that objects survive the merge.
fn one_cluster(objects: bool) -> PlacementStatus {
    PlacementStatus {
        counts: PhaseCounts {
            ready: 1,
            ..PhaseCounts::default()
        },
        objects: match objects {
            true => vec![object("web")],
            false => Vec::new(),
        },
        ..PlacementStatus::default()
    }
}

proptest! {
    /// Whatever members come, change and go, the tally reads as the merge
    /// of the members' statuses now, in name order.
    #[test]
    fn a_tally_reads_as_the_merge_of_its_members_now(
        changes in prop::collection::vec((0u8..6, proptest::option::of(status())), 0..24),
    ) {
        let mut tally = Tally::default();
        let mut members: BTreeMap<String, PlacementStatus> = BTreeMap::new();
        for (member, status) in changes {
            let member = format!("m{member}");
            if let Some(old) = members.remove(&member) {
                tally.remove(&member, &old);
            }
            if let Some(status) = status {
                tally.add(&member, &status);
                members.insert(member, status);
            }
            let read = tally.status(|member| members.get(member));
            prop_assert_eq!(read, merge(members.values()));
            prop_assert_eq!(tally.members(), members.len());
        }
        for (member, status) in &members {
            tally.remove(member, status);
        }
        prop_assert_eq!(tally, Tally::default(), "emptied, nothing is left over");
    }
}

#[test]
fn objects_are_read_only_while_one_cluster_is_counted() {
    let mut tally = Tally::default();
    let (web, empty) = (one_cluster(true), PlacementStatus::default());
    tally.add("a", &web);
    tally.add("b", &empty);
    let lookup = |member: &str| match member {
        "a" => Some(&web),
        _ => Some(&empty),
    };
    assert_eq!(tally.status(lookup).objects, vec![object("web")]);
    let other = one_cluster(false);
    tally.add("c", &other);
    assert!(tally.status(lookup).objects.is_empty(), "two clusters");
    tally.remove("c", &other);
    assert_eq!(tally.status(lookup).objects, vec![object("web")]);
}
