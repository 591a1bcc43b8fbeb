use std::collections::BTreeMap;

use relaymesh_topology::rollout::{Amount, GroupObserved};

use super::*;

fn spec() -> RolloutSpec {
    RolloutSpec {
        strategy: Strategy::Progressive,
        max_concurrency: Amount::Count(2),
        max_unavailable_per_group: Some(Amount::Count(1)),
        ..RolloutSpec::default()
    }
}

/// 2026-11-27T10:00:00Z, and later.
const T0: u64 = 1_795_773_600_000;

fn rollout() -> Rollout {
    let position = Position {
        canary_done: true,
        admitted: 2,
        per_group: BTreeMap::from([("eu".to_string(), 1), ("us".to_string(), 1)]),
    };
    Rollout {
        revision: BundleId([2; 32]),
        stable: Some(BundleId([1; 32])),
        wave: Some(wave_at(&spec(), &position)),
        position,
        phase: Phase::Progressing,
        message: "2 of 8 clusters done".into(),
        started_ms: T0,
        counts: Counts {
            waiting: 6,
            updating: 0,
            succeeded: 2,
            failed: 0,
        },
        reached: 2,
        groups: ["eu", "us"]
            .map(|name| GroupObserved {
                name: name.into(),
                selected: 4,
                counts: Counts::default(),
            })
            .to_vec(),
        history: vec![HistoryRecord {
            revision: BundleId([1; 32]).to_string(),
            outcome: "Complete".into(),
            started_ms: T0 - 60_000,
            at_ms: T0 - 1_000,
        }],
    }
}

#[test]
fn a_restarted_root_reads_back_what_it_wrote() {
    let written = render(&rollout(), &spec()).expect("a staged rollout");
    assert_eq!(written["phase"], "Progressing");
    assert_eq!(written["startedAt"], "2026-11-27T10:00:00Z");
    assert_eq!(written["history"][0]["outcome"], "Complete");
    assert_eq!(written["groups"][0]["admitted"], 1);
    let object = json!({"metadata": {}, "status": {"rollout": written}});
    let read = input(&object, &spec()).recorded.expect("recorded");
    let Rollout {
        counts,
        groups,
        reached,
        ..
    } = rollout();
    // What the tree reports again is not taken from the status.
    assert_eq!(
        Rollout {
            counts,
            groups,
            reached,
            ..read
        },
        rollout()
    );
}

#[test]
fn commands_name_the_revision_they_are_for() {
    let object = json!({"metadata": {"annotations": {
        PROMOTE_ANNOTATION: BundleId([3; 32]).to_string(),
        ABORT_ANNOTATION: "not a revision",
    }}});
    let read = input(&object, &spec());
    assert_eq!(read.promote, Some(BundleId([3; 32])));
    assert_eq!(read.abort, None);
    assert!(read.recorded.is_none(), "nothing recorded");
}

#[test]
fn an_unstaged_rollout_without_history_writes_nothing() {
    let all = RolloutSpec::default();
    let mut rollout = rollout();
    rollout.history.clear();
    assert_eq!(render(&rollout, &all), None);
    assert!(render(&self::rollout(), &all).is_some(), "its history");
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
