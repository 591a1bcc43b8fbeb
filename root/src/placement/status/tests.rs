use relaymesh_protocol::{AppliedRevision, FailingCluster, PhaseCounts, PlacementStatus};
use serde_json::{json, Value};

use super::*;

/// The revision the tests' clusters run, and the one before it.
const NEWEST: BundleId = BundleId([7; 32]);
const OLDER: BundleId = BundleId([6; 32]);

/// [`super::render`] of a placement whose newest revision is [`NEWEST`].
fn render(
    previous: &Value,
    generation: Option<i64>,
    selected: u64,
    reported: &PlacementStatus,
    now: &str,
) -> Value {
    super::render(previous, generation, selected, reported, Some(NEWEST), now)
}

/// Clusters by phase, all of them on [`NEWEST`] but the offline ones.
fn reported(ready: u64, failed: u64, offline: u64, failing: &[&str]) -> PlacementStatus {
    let counts = PhaseCounts {
        ready,
        failed,
        offline,
        ..PhaseCounts::default()
    };
    PlacementStatus {
        counts,
        applied_revisions: vec![AppliedRevision {
            revision: NEWEST,
            counts: PhaseCounts {
                offline: 0,
                ..counts
            },
        }],
        message: None,
        failing: failing
            .iter()
            .map(|name| FailingCluster {
                cluster: name.to_string(),
                message: format!("Deployment shop/web: {name} cannot pull"),
            })
            .collect(),
        ..PlacementStatus::default()
    }
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|condition| condition["type"] == kind))
        .unwrap_or(&Value::Null)
}

#[test]
fn seventeen_ready_and_three_failed_is_degraded_and_not_ready() {
    let status = render(
        &Value::Null,
        Some(2),
        20,
        &reported(17, 3, 0, &["e03", "e07", "e11"]),
        "T1",
    );
    assert_eq!(status["observedGeneration"], 2);
    assert_eq!(
        status["clusters"],
        json!({"selected": 20, "pending": 0, "applied": 0, "ready": 17, "failed": 3, "offline": 0, "updated": 20})
    );
    assert_eq!(
        status["failing"][1],
        json!({"cluster": "e07", "message": "Deployment shop/web: e07 cannot pull"})
    );
    assert_eq!(condition(&status, "Applied")["status"], "True");
    let ready = condition(&status, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("ClustersFailed"))
    );
    assert_eq!(
        ready["message"],
        "17 of 20 clusters ready on the newest revision, 20 run it; 3 failed: e03, e07, e11"
    );
    assert_eq!(condition(&status, "Degraded")["status"], "True");
    assert_eq!(condition(&status, "Degraded")["observedGeneration"], 2);
}

#[test]
fn all_ready_is_ready_and_more_failures_than_named_are_counted() {
    let status = render(&Value::Null, Some(1), 3, &reported(3, 0, 0, &[]), "T1");
    assert_eq!(condition(&status, "Ready")["status"], "True");
    assert_eq!(condition(&status, "Degraded")["status"], "False");

    let status = render(
        &Value::Null,
        Some(1),
        30,
        &reported(10, 12, 0, &["a", "b"]),
        "T1",
    );
    let degraded = &condition(&status, "Degraded")["message"];
    assert_eq!(degraded, "12 clusters failed: a, b and 10 more");
}

#[test]
fn unheard_and_offline_clusters_keep_it_unapplied() {
    let status = render(&Value::Null, None, 5, &reported(2, 0, 1, &[]), "T1");
    assert!(status.get("observedGeneration").is_none());
    assert_eq!(status["clusters"]["pending"], 2);
    let applied = condition(&status, "Applied");
    assert_eq!(
        (&applied["status"], &applied["message"]),
        (
            &json!("False"),
            &json!("2 of 5 clusters applied the newest revision; 1 offline")
        )
    );
    let none = render(&Value::Null, None, 0, &PlacementStatus::default(), "T1");
    assert_eq!(condition(&none, "Ready")["reason"], "NoClusters");
}

#[test]
fn a_condition_keeps_its_transition_time_until_its_status_changes() {
    let first = render(&Value::Null, Some(1), 2, &reported(1, 0, 0, &[]), "T1");
    let same_status = render(&first, Some(1), 2, &reported(1, 0, 0, &[]), "T2");
    assert_eq!(condition(&same_status, "Ready")["lastTransitionTime"], "T1");
    assert!(same(&first, &same_status));
    let flipped = render(&first, Some(1), 2, &reported(2, 0, 0, &[]), "T3");
    assert_eq!(condition(&flipped, "Ready")["lastTransitionTime"], "T3");
    assert_eq!(condition(&flipped, "Degraded")["lastTransitionTime"], "T1");
    assert!(!same(&first, &flipped));
}

#[test]
fn conditions_someone_else_set_are_kept() {
    let previous = json!({"conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "change-window", "status": "True", "reason": "Approved"},
    ]});
    let status = render(&previous, Some(1), 2, &reported(2, 0, 0, &[]), "now");
    assert_eq!(condition(&status, "change-window")["reason"], "Approved");
    assert_eq!(condition(&status, "Ready")["status"], "True");
    let ready = status["conditions"]
        .as_array()
        .map_or(0, |all| all.iter().filter(|c| c["type"] == "Ready").count());
    assert_eq!(ready, 1, "ours are written once: {status}");
}

#[test]
fn a_bound_the_clusters_cannot_fill_says_so() {
    let spec = Some(3);
    let mut status = render(&json!({}), Some(1), 2, &reported(2, 0, 0, &[]), "now");
    add_shortfall(&mut status, &json!({}), spec, 2, Some(1), "now");
    assert_eq!(status["clusters"]["shortfall"], 1);
    assert_eq!(condition(&status, "Satisfied")["status"], "False");
    assert_eq!(
        condition(&status, "Satisfied")["reason"],
        "NotEnoughClusters"
    );
    let mut full = render(&status, Some(1), 3, &reported(3, 0, 0, &[]), "now");
    add_shortfall(&mut full, &status, spec, 3, Some(1), "later");
    assert!(full["clusters"].get("shortfall").is_none());
    assert_eq!(condition(&full, "Satisfied")["status"], "True");
    let satisfied = full["conditions"].as_array().map_or(0, |all| {
        all.iter().filter(|c| c["type"] == "Satisfied").count()
    });
    assert_eq!(satisfied, 1, "{full}");
    let mut unbounded = render(&json!({}), Some(1), 2, &reported(2, 0, 0, &[]), "now");
    add_shortfall(&mut unbounded, &json!({}), None, 2, Some(1), "now");
    assert!(condition(&unbounded, "Satisfied").is_null());
}

/// Ready follows the workloads' revision: clusters ready on an older one,
/// which is what they report before the newest reaches them, are not.
#[test]
fn clusters_ready_on_an_older_revision_are_not_ready() {
    let counts = |ready| PhaseCounts {
        ready,
        ..PhaseCounts::default()
    };
    let mut status = reported(4, 0, 0, &[]);
    status.applied_revisions = vec![AppliedRevision {
        revision: OLDER,
        counts: counts(4),
    }];
    let rendered = render(&Value::Null, Some(3), 4, &status, "T1");
    assert_eq!(rendered["revision"], NEWEST.to_string());
    assert_eq!(rendered["clusters"]["ready"], 4, "ready on some revision");
    assert_eq!(rendered["clusters"]["updated"], 0);
    let ready = condition(&rendered, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"]),
        (
            &json!("False"),
            &json!("Progressing"),
            &json!("0 of 4 clusters ready on the newest revision, 0 run it")
        )
    );
    assert_eq!(condition(&rendered, "Applied")["status"], "False");

    // Half-way: two on the newest, one of them ready.
    status.applied_revisions = vec![
        AppliedRevision {
            revision: OLDER,
            counts: counts(2),
        },
        AppliedRevision {
            revision: NEWEST,
            counts: PhaseCounts {
                ready: 1,
                applied: 1,
                ..PhaseCounts::default()
            },
        },
    ];
    let rendered = render(&rendered, Some(3), 4, &status, "T2");
    assert_eq!(rendered["clusters"]["updated"], 2);
    assert_eq!(
        condition(&rendered, "Ready")["message"],
        "1 of 4 clusters ready on the newest revision, 2 run it"
    );

    // Without a revision (no entry yet), nothing is on it.
    let none = super::render(&Value::Null, Some(3), 4, &status, None, "T1");
    assert!(none.get("revision").is_none());
    assert_eq!(condition(&none, "Ready")["status"], "False");
}

/// A rollout that has not ended holds Ready at False, even with every
/// cluster ready on the newest revision.
#[test]
fn a_rollout_under_way_holds_ready() {
    let mut status = render(&Value::Null, Some(1), 4, &reported(4, 0, 0, &[]), "T1");
    assert_eq!(condition(&status, "Ready")["status"], "True");
    let rollout = json!({"phase": "Progressing", "message": "3 of 4 clusters done, 1 updating"});
    let previous = status.clone();
    hold_ready_for_rollout(&mut status, &previous, &rollout, Some(1), "T2");
    let ready = condition(&status, "Ready");
    assert_eq!(
        (
            &ready["status"],
            &ready["reason"],
            &ready["lastTransitionTime"]
        ),
        (&json!("False"), &json!("RolloutInProgress"), &json!("T2"))
    );
    let mut done = render(&Value::Null, Some(1), 4, &reported(4, 0, 0, &[]), "T1");
    hold_ready_for_rollout(
        &mut done,
        &previous,
        &json!({"phase": "Complete"}),
        Some(1),
        "T2",
    );
    assert_eq!(condition(&done, "Ready")["status"], "True");
}

#[test]
fn unknown_cluster_names_are_named() {
    let mut status = render(&Value::Null, Some(1), 1, &reported(1, 0, 0, &[]), "T1");
    add_unknown(&mut status, &[]);
    assert!(status["clusters"].get("unknown").is_none());
    add_unknown(&mut status, &["edge-9".to_string()]);
    assert_eq!(status["clusters"]["unknown"], json!(["edge-9"]));
}
