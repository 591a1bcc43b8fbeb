use relaymesh_protocol::{PlacementStatus, PlacementTarget, RevisionCounts};
use relaymesh_topology::rollout::Amount;

use super::*;

/// Every bundle is still stored.
fn held(_: &BundleId) -> Result<bool, std::convert::Infallible> {
    Ok(true)
}

/// No bundle is stored any more.
fn gone(_: &BundleId) -> Result<bool, std::convert::Infallible> {
    Ok(false)
}

fn entry(bundle: u8) -> SliceEntry {
    SliceEntry {
        key: "placement/shop/web".into(),
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
        bundles: Vec::new(),
        leaving: Vec::new(),
        wave: Some(reached),
        parts: Vec::new(),
        by_value: None,
        unknown: Vec::new(),
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
    let object = json!({"metadata": {}});
    let shaped = rollouts
        .shape(&object, &spec(), entry(1), held, "t0")
        .expect("shaped");
    assert_eq!(
        wave_of(&shaped),
        Some(0),
        "nothing handed out before a status"
    );
    assert!(rollouts.advance(KEY, &spec(), &report(1, 4, 0, 0), true, "t1"));
    let shaped = rollouts
        .shape(&object, &spec(), entry(1), held, "t1")
        .expect("shaped");
    assert_eq!(wave_of(&shaped), Some(2));
    assert_eq!(shaped.bundles.len(), 1, "a first revision has no previous");
    assert!(rollouts.advance(KEY, &spec(), &report(1, 4, 2, 2), true, "t2"));
    assert!(rollouts.advance(KEY, &spec(), &report(1, 4, 4, 4), true, "t3"));
    let shaped = rollouts
        .shape(&object, &spec(), entry(1), held, "t3")
        .expect("shaped");
    assert_eq!(wave_of(&shaped), None, "complete: every cluster runs it");
    let status = rollouts.render(KEY, &spec()).expect("a staged rollout");
    assert_eq!(status["phase"], "Complete");
    assert_eq!(status["clusters"]["succeeded"], 4);

    // The next revision starts from the first wave, the last one kept.
    let shaped = rollouts
        .shape(&object, &spec(), entry(2), held, "t4")
        .expect("shaped");
    assert_eq!(wave_of(&shaped), Some(0));
    assert_eq!(shaped.bundles, vec![BundleId([2; 32]), BundleId([1; 32])]);
    // Its previous bundle gone from the store: nothing to fall back on.
    let shaped = rollouts
        .shape(&object, &spec(), entry(2), gone, "t4")
        .expect("shaped");
    assert_eq!(shaped.bundles, vec![BundleId([2; 32])]);
}

#[test]
fn abort_and_promote_act_only_on_the_revision_they_name() {
    let mut rollouts = Rollouts::default();
    let plain = json!({"metadata": {}});
    rollouts
        .shape(&plain, &spec(), entry(1), held, "t0")
        .expect("shaped");
    rollouts.advance(KEY, &spec(), &report(1, 4, 4, 4), true, "t1");
    rollouts
        .shape(&plain, &spec(), entry(2), held, "t2")
        .expect("shaped");
    rollouts.advance(KEY, &spec(), &report(2, 4, 0, 0), true, "t3");
    let stale =
        json!({"metadata": {"annotations": {ABORT_ANNOTATION: BundleId([1; 32]).to_string()}}});
    let shaped = rollouts
        .shape(&stale, &spec(), entry(2), held, "t4")
        .expect("shaped");
    assert_eq!(
        wave_of(&shaped),
        Some(2),
        "an abort of another revision is ignored"
    );
    let abort =
        json!({"metadata": {"annotations": {ABORT_ANNOTATION: BundleId([2; 32]).to_string()}}});
    let shaped = rollouts
        .shape(&abort, &spec(), entry(2), held, "t5")
        .expect("shaped");
    assert_eq!(
        wave_of(&shaped),
        Some(0),
        "aborted: every cluster on the previous"
    );
    assert_eq!(shaped.bundles.len(), 2);
    assert!(!rollouts.advance(KEY, &spec(), &report(2, 4, 0, 0), true, "t6"));

    let promote =
        json!({"metadata": {"annotations": {PROMOTE_ANNOTATION: BundleId([3; 32]).to_string()}}});
    let shaped = rollouts
        .shape(&promote, &spec(), entry(3), held, "t7")
        .expect("shaped");
    assert_eq!(wave_of(&shaped), None, "promoted: everywhere at once");
    let status = rollouts.render(KEY, &spec()).expect("a staged rollout");
    let outcomes: Vec<&str> = status["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, vec!["Promoted", "Aborted", "Complete"]);
}

/// An abort says it is done, and the status's revision turns back to
/// the previous one, only once the clusters run it again, ready.
#[test]
fn an_abort_is_done_when_the_clusters_are_back() {
    use relaymesh_protocol::{AppliedRevision, PhaseCounts};
    let mut rollouts = Rollouts::default();
    let plain = json!({"metadata": {}});
    rollouts
        .shape(&plain, &spec(), entry(1), held, "t0")
        .expect("shaped");
    rollouts.advance(KEY, &spec(), &report(1, 4, 4, 4), true, "t1");
    rollouts
        .shape(&plain, &spec(), entry(2), held, "t2")
        .expect("shaped");
    rollouts.advance(KEY, &spec(), &report(2, 4, 1, 0), true, "t3");
    assert_eq!(rollouts.target(KEY, BundleId([2; 32])), BundleId([2; 32]));
    let abort =
        json!({"metadata": {"annotations": {ABORT_ANNOTATION: BundleId([2; 32]).to_string()}}});
    rollouts
        .shape(&abort, &spec(), entry(2), held, "t4")
        .expect("shaped");
    assert_eq!(
        rollouts.target(KEY, BundleId([2; 32])),
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
    rollouts.advance(KEY, &spec(), &back(3), true, "t5");
    let status = rollouts.render(KEY, &spec()).expect("a staged rollout");
    assert_eq!(status["phase"], "Aborted");
    assert_eq!(
        status["message"],
        "aborting: 3 of 4 clusters back on the previous revision and ready"
    );
    rollouts.advance(KEY, &spec(), &back(4), true, "t6");
    let status = rollouts.render(KEY, &spec()).expect("a staged rollout");
    assert_eq!(
        status["message"],
        "aborted: every cluster runs the previous revision"
    );
    assert_eq!(status["clusters"]["waiting"], 4);
}

#[test]
fn a_restarted_root_reads_its_position_back_from_the_status() {
    let mut rollouts = Rollouts::default();
    let plain = json!({"metadata": {}});
    rollouts
        .shape(&plain, &spec(), entry(1), held, "t0")
        .expect("shaped");
    rollouts.advance(KEY, &spec(), &report(1, 8, 2, 2), true, "t1");
    let written = rollouts.render(KEY, &spec()).expect("a staged rollout");
    let mut restarted = Rollouts::default();
    let object = json!({"metadata": {}, "status": {"rollout": written}});
    let shaped = restarted
        .shape(&object, &spec(), entry(1), held, "t2")
        .expect("shaped");
    assert_eq!(wave_of(&shaped), Some(4));
}

fn part(child: &str, selected: u64, updating: u64, failed: u64) -> relaymesh_core::ChildPart {
    relaymesh_core::ChildPart {
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
fn per_group_budgets_go_to_each_child_of_the_root_and_survive_a_restart() {
    let grouped = RolloutSpec {
        max_concurrency: Amount::Count(4),
        max_unavailable_per_group: Some(Amount::Count(1)),
        ..spec()
    };
    let mut rollouts = Rollouts::default();
    let plain = json!({"metadata": {}});
    rollouts
        .shape(&plain, &grouped, entry(1), held, "t0")
        .expect("shaped");
    let mut status = report(1, 8, 0, 0);
    status.parts = vec![part("eu", 4, 0, 0), part("us", 4, 0, 0)];
    assert!(rollouts.advance(KEY, &grouped, &status, true, "t1"));
    let shaped = rollouts
        .shape(&plain, &grouped, entry(1), held, "t1")
        .expect("shaped");
    let Target::Placement(target) = &shaped.target else {
        panic!("a placement");
    };
    let wave = target.wave.as_ref().expect("a wave");
    assert_eq!(
        wave.per_child,
        BTreeMap::from([("eu".to_string(), 1), ("us".to_string(), 1)])
    );
    let written = rollouts.render(KEY, &grouped).expect("a staged rollout");
    assert_eq!(written["groups"][0]["name"], "eu");
    assert_eq!(written["groups"][0]["admitted"], 1);

    let mut restarted = Rollouts::default();
    let object = json!({"metadata": {}, "status": {"rollout": written}});
    let shaped = restarted
        .shape(&object, &grouped, entry(1), held, "t2")
        .expect("shaped");
    let Target::Placement(target) = &shaped.target else {
        panic!("a placement");
    };
    assert_eq!(
        target.wave.as_ref().map(|wave| wave.per_child.len()),
        Some(2)
    );

    // eu's cluster fails: its one place is taken, the rollout halts.
    status.parts = vec![part("eu", 4, 0, 1), part("us", 4, 1, 0)];
    rollouts.advance(KEY, &grouped, &status, true, "t3");
    let halted = rollouts.render(KEY, &grouped).expect("a staged rollout");
    assert_eq!(halted["phase"], "Halted");
    assert!(
        halted["message"]
            .as_str()
            .is_some_and(|message| message.contains("below eu")),
        "{halted}"
    );
}

#[test]
fn gates_are_conditions_set_true() {
    let gated = RolloutSpec {
        gates: vec!["change-window".into()],
        ..spec()
    };
    assert!(!gates_open(&gated, &json!({})));
    let closed = json!({"conditions": [{"type": "change-window", "status": "False"}]});
    assert!(!gates_open(&gated, &closed));
    let open = json!({"conditions": [{"type": "change-window", "status": "True"}]});
    assert!(gates_open(&gated, &open));
    assert!(gates_open(&spec(), &json!({})));
}
