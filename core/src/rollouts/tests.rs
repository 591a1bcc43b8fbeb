use relaymesh_protocol::{PlacementStatus, PlacementTarget, RevisionCounts};
use relaymesh_topology::rollout::{Amount, Strategy};

use super::*;

/// Every bundle is still stored.
fn held(_: &BundleId) -> bool {
    true
}

/// No bundle is stored any more.
fn gone(_: &BundleId) -> bool {
    false
}

fn entry(bundle: u8) -> SliceEntry {
    SliceEntry {
        key: KEY.into(),
        target: Target::Placement(PlacementTarget::default()),
        bundles: vec![BundleId([bundle; 32])],
        body: Vec::new(),
        serial: 0,
        signature: Vec::new(),
    }
}

fn spec() -> RolloutSpec {
    RolloutSpec {
        strategy: Strategy::Progressive,
        max_concurrency: Amount::Count(2),
        ..RolloutSpec::default()
    }
}

fn input(spec: &RolloutSpec) -> RolloutInput {
    RolloutInput {
        spec: spec.clone(),
        ..RolloutInput::default()
    }
}

fn report(bundle: u8, selected: u64, reached: u64, succeeded: u64) -> PlacementReport {
    PlacementReport {
        selected,
        status: PlacementStatus {
            revisions: vec![RevisionCounts {
                revision: BundleId([bundle; 32]),
                waiting: selected - reached,
                updating: reached - succeeded,
                succeeded,
                failed: 0,
            }],
            ..PlacementStatus::default()
        },
        wave: Some(reached),
        ..PlacementReport::default()
    }
}

fn wave_of(entry: &SliceEntry) -> Option<u32> {
    match &entry.target {
        Target::Placement(target) => target.wave.as_ref().map(|wave| wave.total),
        _ => None,
    }
}

const KEY: &str = "placement/shop/web";

#[test]
fn a_revision_goes_out_in_waves_then_the_next_keeps_it_as_previous() {
    let mut rollouts = Rollouts::default();
    let shaped = rollouts.shape(input(&spec()), entry(1), held, 0);
    assert_eq!(
        wave_of(&shaped),
        Some(0),
        "nothing handed out before a status"
    );
    assert!(rollouts.advance(KEY, &report(1, 4, 0, 0), true, 1));
    let shaped = rollouts.shape(input(&spec()), entry(1), held, 1);
    assert_eq!(wave_of(&shaped), Some(2));
    assert_eq!(shaped.bundles.len(), 1, "a first revision has no previous");
    assert!(rollouts.advance(KEY, &report(1, 4, 2, 2), true, 2));
    assert!(rollouts.advance(KEY, &report(1, 4, 4, 4), true, 3));
    let shaped = rollouts.shape(input(&spec()), entry(1), held, 3);
    assert_eq!(wave_of(&shaped), None, "complete: every cluster runs it");
    let rollout = rollouts.get(KEY).expect("a rollout");
    assert_eq!(rollout.phase, Phase::Complete);
    assert_eq!(rollout.counts.succeeded, 4);

    // The next revision starts from the first wave, the last one kept.
    let shaped = rollouts.shape(input(&spec()), entry(2), held, 4);
    assert_eq!(wave_of(&shaped), Some(0));
    assert_eq!(shaped.bundles, vec![BundleId([2; 32]), BundleId([1; 32])]);
    // Its previous bundle gone from the store: nothing to fall back on.
    let shaped = rollouts.shape(input(&spec()), entry(2), gone, 4);
    assert_eq!(shaped.bundles, vec![BundleId([2; 32])]);
}

#[test]
fn abort_and_promote_act_only_on_the_revision_they_name() {
    let mut rollouts = Rollouts::default();
    rollouts.shape(input(&spec()), entry(1), held, 0);
    rollouts.advance(KEY, &report(1, 4, 4, 4), true, 1);
    rollouts.shape(input(&spec()), entry(2), held, 2);
    rollouts.advance(KEY, &report(2, 4, 0, 0), true, 3);
    let stale = RolloutInput {
        abort: Some(BundleId([1; 32])),
        ..input(&spec())
    };
    let shaped = rollouts.shape(stale, entry(2), held, 4);
    assert_eq!(
        wave_of(&shaped),
        Some(2),
        "an abort of another revision is ignored"
    );
    let abort = RolloutInput {
        abort: Some(BundleId([2; 32])),
        ..input(&spec())
    };
    let shaped = rollouts.shape(abort, entry(2), held, 5);
    assert_eq!(
        wave_of(&shaped),
        Some(0),
        "aborted: every cluster on the previous"
    );
    assert_eq!(shaped.bundles.len(), 2);
    assert!(!rollouts.advance(KEY, &report(2, 4, 0, 0), true, 6));

    let promote = RolloutInput {
        promote: Some(BundleId([3; 32])),
        ..input(&spec())
    };
    let shaped = rollouts.shape(promote, entry(3), held, 7);
    assert_eq!(wave_of(&shaped), None, "promoted: everywhere at once");
    let outcomes: Vec<&str> = rollouts
        .get(KEY)
        .expect("a rollout")
        .history
        .iter()
        .map(|record| record.outcome.as_str())
        .collect();
    assert_eq!(outcomes, vec!["Promoted", "Aborted", "Complete"]);
}

/// An abort says it is done, and the revision the clusters are to run
/// turns back to the previous one, only once the clusters run it again,
/// ready.
#[test]
fn an_abort_is_done_when_the_clusters_are_back() {
    use relaymesh_protocol::{AppliedRevision, PhaseCounts};
    let mut rollouts = Rollouts::default();
    rollouts.shape(input(&spec()), entry(1), held, 0);
    rollouts.advance(KEY, &report(1, 4, 4, 4), true, 1);
    rollouts.shape(input(&spec()), entry(2), held, 2);
    rollouts.advance(KEY, &report(2, 4, 1, 0), true, 3);
    let target = |rollouts: &Rollouts| rollouts.get(KEY).expect("a rollout").target();
    assert_eq!(target(&rollouts), BundleId([2; 32]));
    let abort = RolloutInput {
        abort: Some(BundleId([2; 32])),
        ..input(&spec())
    };
    rollouts.shape(abort, entry(2), held, 4);
    assert_eq!(
        target(&rollouts),
        BundleId([1; 32]),
        "the clusters are to run the previous revision"
    );
    let back = |ready: u64| {
        let mut report = report(2, 4, 0, 0);
        report.status.applied_revisions = vec![
            AppliedRevision {
                revision: BundleId([1; 32]),
                counts: PhaseCounts {
                    ready,
                    ..PhaseCounts::default()
                },
            },
            AppliedRevision {
                revision: BundleId([2; 32]),
                counts: PhaseCounts {
                    failed: 4 - ready,
                    ..PhaseCounts::default()
                },
            },
        ];
        report
    };
    rollouts.advance(KEY, &back(3), true, 5);
    let rollout = rollouts.get(KEY).expect("a rollout");
    assert_eq!(rollout.phase, Phase::Aborted);
    assert_eq!(
        rollout.message,
        "aborting: 3 of 4 clusters back on the previous revision and ready"
    );
    rollouts.advance(KEY, &back(4), true, 6);
    let rollout = rollouts.get(KEY).expect("a rollout");
    assert_eq!(
        rollout.message,
        "aborted: every cluster runs the previous revision"
    );
    assert_eq!(rollout.counts.waiting, 4);
}

#[test]
fn a_restarted_root_takes_up_the_recorded_rollout() {
    let mut rollouts = Rollouts::default();
    rollouts.shape(input(&spec()), entry(1), held, 0);
    rollouts.advance(KEY, &report(1, 8, 2, 2), true, 1);
    let recorded = rollouts.get(KEY).cloned();
    let mut restarted = Rollouts::default();
    let shaped = restarted.shape(
        RolloutInput {
            recorded,
            ..input(&spec())
        },
        entry(1),
        held,
        2,
    );
    assert_eq!(wave_of(&shaped), Some(4));
    // Once taken up, the core's own state wins over a stale record.
    restarted.advance(KEY, &report(1, 8, 4, 4), true, 3);
    let shaped = restarted.shape(
        RolloutInput {
            recorded: rollouts.get(KEY).cloned(),
            ..input(&spec())
        },
        entry(1),
        held,
        4,
    );
    assert_eq!(wave_of(&shaped), Some(6));
}

fn part(child: &str, selected: u64, updating: u64, failed: u64) -> crate::ChildPart {
    crate::ChildPart {
        child: child.into(),
        selected,
        wave: None,
        revisions: vec![RevisionCounts {
            revision: BundleId([1; 32]),
            waiting: selected - updating - failed,
            updating,
            succeeded: 0,
            failed,
        }],
    }
}

#[test]
fn per_group_budgets_go_to_each_child_of_the_root() {
    let grouped = RolloutSpec {
        max_concurrency: Amount::Count(4),
        max_unavailable_per_group: Some(Amount::Count(1)),
        ..spec()
    };
    let mut rollouts = Rollouts::default();
    rollouts.shape(input(&grouped), entry(1), held, 0);
    assert!(rollouts.grouped(KEY));
    let mut status = report(1, 8, 0, 0);
    status.parts = vec![part("eu", 4, 0, 0), part("us", 4, 0, 0)];
    assert!(rollouts.advance(KEY, &status, true, 1));
    let shaped = rollouts.shape(input(&grouped), entry(1), held, 1);
    let Target::Placement(target) = &shaped.target else {
        panic!("a placement");
    };
    let wave = target.wave.as_ref().expect("a wave");
    assert_eq!(
        wave.per_child,
        BTreeMap::from([("eu".to_string(), 1), ("us".to_string(), 1)])
    );
    let rollout = rollouts.get(KEY).expect("a rollout");
    assert_eq!(rollout.groups[0].name, "eu");
    assert_eq!(rollout.position.per_group.get("eu"), Some(&1));

    // eu's cluster fails: its one place is taken, the rollout halts.
    status.parts = vec![part("eu", 4, 0, 1), part("us", 4, 1, 0)];
    rollouts.advance(KEY, &status, true, 3);
    let halted = rollouts.get(KEY).expect("a rollout");
    assert_eq!(halted.phase, Phase::Halted);
    assert!(halted.message.contains("below eu"), "{}", halted.message);
}

#[test]
fn a_closed_gate_holds_the_wave() {
    let gated = RolloutSpec {
        gates: vec!["change-window".into()],
        ..spec()
    };
    let mut rollouts = Rollouts::default();
    rollouts.shape(input(&gated), entry(1), held, 0);
    assert!(!rollouts.advance(KEY, &report(1, 4, 0, 0), false, 1));
    assert_eq!(rollouts.get(KEY).expect("a rollout").phase, Phase::Gated);
    assert!(rollouts.advance(KEY, &report(1, 4, 0, 0), true, 2));
    assert_eq!(
        rollouts.get(KEY).expect("a rollout").phase,
        Phase::Progressing
    );
}

#[test]
fn phases_read_back_by_name() {
    for phase in Phase::ALL {
        assert_eq!(Phase::from_name(phase.name()), Some(phase));
    }
    assert_eq!(Phase::from_name("Done"), None);
}
