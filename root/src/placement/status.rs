//! A Placement's `status` as the root writes it: the phase counts merged up
//! the tree, the failing clusters with their messages, Kubernetes-style
//! conditions, so `kubectl wait --for=condition=Ready placement/NAME` works,
//! the results of its status rules, and its phase counts per group label.
//!
//! Pure: the daemon's status writer hands in what the tree reported and the
//! status written last, and stores what comes out if it differs.

use relaymesh_protocol::{BundleId, PlacementStatus};
use relaymesh_topology::{groups, rules, summary};
use serde_json::{json, Map, Value};

/// Holds `Ready` at `False` while the placement's rollout (`rollout`, as
/// `status.rollout` says it) has not ended, even if every cluster already
/// runs the newest revision, ready: until `minSuccessTime` has passed, or
/// while it is paused, gated or halted, `relayctl rollout status` does not
/// say it is done, and `Ready` must not say otherwise.
pub fn hold_ready_for_rollout(
    status: &mut Value,
    previous: &Value,
    rollout: &Value,
    generation: Option<i64>,
    now: &str,
) {
    let phase = rollout["phase"].as_str().unwrap_or_default();
    if !matches!(phase, "Progressing" | "Paused" | "Gated" | "Halted") {
        return;
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    let Some(ready) = conditions
        .iter_mut()
        .find(|condition| condition["type"] == "Ready")
    else {
        return;
    };
    if ready["status"] != "True" {
        return;
    }
    let message = format!(
        "every cluster runs the newest revision, ready, but its rollout is {phase}: {}",
        rollout["message"].as_str().unwrap_or_default()
    );
    *ready = condition(
        previous,
        "Ready",
        false,
        "RolloutInProgress",
        &message,
        generation,
        now,
    );
}

/// `status.clusters.unknown`: the names in `spec.clusters.names` that are
/// no cluster of the tree (absent when there are none). They select
/// nothing until a cluster of that name joins; the API warned when the
/// placement was written.
pub fn add_unknown(status: &mut Value, unknown: &[String]) {
    if unknown.is_empty() {
        return;
    }
    if let Some(clusters) = status.get_mut("clusters").and_then(Value::as_object_mut) {
        clusters.insert("unknown".into(), json!(unknown));
    }
}

/// `status.handover` while a placement's clusters change: the clusters it
/// leaves, which keep their copies until every cluster it selects is ready
/// (absent otherwise).
pub fn add_handover(status: &mut Value, leaving: &[String]) {
    if let Value::Object(fields) = status {
        if leaving.is_empty() {
            fields.remove("handover");
        } else {
            fields.insert("handover".into(), json!({"leavingClusters": leaving}));
        }
    }
}

/// The `Satisfied` condition of a placement with `maxClusters` (absent
/// without): `False` while it selects fewer clusters than the bound asks,
/// because no other matching cluster is open (all are cordoned, drained,
/// full, or there are no more), and `status.clusters.shortfall` says by how
/// many.
pub fn add_shortfall(
    status: &mut Value,
    previous: &Value,
    max_clusters: Option<u32>,
    selected: u64,
    generation: Option<i64>,
    now: &str,
) {
    let Some(bound) = max_clusters.map(u64::from) else {
        return;
    };
    let shortfall = bound.saturating_sub(selected);
    let (value, reason, message) = if shortfall == 0 {
        (
            true,
            "EnoughClusters",
            format!("{selected} clusters selected, as maxClusters asks"),
        )
    } else {
        (
            false,
            "NotEnoughClusters",
            format!(
                "{selected} of the {bound} clusters maxClusters asks for: no other matching cluster takes new placements (cordoned, drained, full, or none left)"
            ),
        )
    };
    if shortfall > 0 {
        status["clusters"]["shortfall"] = Value::from(shortfall);
    }
    let satisfied = condition(
        previous,
        "Satisfied",
        value,
        reason,
        &message,
        generation,
        now,
    );
    if let Some(conditions) = status["conditions"].as_array_mut() {
        conditions.retain(|condition| condition["type"] != "Satisfied");
        let at = conditions.len().min(3);
        conditions.insert(at, satisfied);
    }
}

/// The status of a Placement of `generation` that selects `selected`
/// clusters, which report `reported` through the tree, for `revision`, the
/// workloads' revision its clusters are to run (the first bundle of its
/// entry; `None` before it has one). `Applied` and `Ready` count only the
/// clusters that run that revision (`clusters.updated`): a cluster still on
/// an older one is neither, whatever it reports of it. `previous` is the
/// status written last: a condition that keeps its status keeps its
/// `lastTransitionTime`; `now` (RFC 3339) stamps the others.
pub fn render(
    previous: &Value,
    generation: Option<i64>,
    selected: u64,
    reported: &PlacementStatus,
    revision: Option<BundleId>,
    now: &str,
) -> Value {
    let counts = &reported.counts;
    let heard = counts.applied + counts.ready + counts.failed + counts.offline;
    let pending = selected.saturating_sub(heard);
    // The clusters on the revision described, by phase.
    let current = revision
        .and_then(|revision| {
            reported
                .applied_revisions
                .iter()
                .find(|applied| applied.revision == revision)
        })
        .map(|applied| applied.counts)
        .unwrap_or_default();
    let updated = summary::total(&current);
    let mut clusters = json!({
        "selected": selected,
        "pending": pending,
        "applied": counts.applied,
        "ready": counts.ready,
        "failed": counts.failed,
        "offline": counts.offline,
        "updated": updated,
    });
    if let Some(message) = &reported.message {
        clusters["message"] = Value::from(message.as_str());
    }
    let failing: Vec<Value> = reported
        .failing
        .iter()
        .map(|failing| json!({"cluster": failing.cluster, "message": failing.message}))
        .collect();

    let names = |limit: usize| {
        let mut names: Vec<&str> = reported
            .failing
            .iter()
            .map(|f| f.cluster.as_str())
            .collect();
        names.truncate(limit);
        let more = counts.failed.saturating_sub(names.len() as u64);
        let mut text = names.join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let offline = |mut message: String| {
        if counts.offline > 0 {
            message.push_str(&format!("; {} offline", counts.offline));
        }
        message
    };
    let applied_current = current.applied + current.ready + current.failed;
    let applied = if selected == 0 {
        (
            false,
            "NoClusters",
            "no cluster matches the placement".to_string(),
        )
    } else if applied_current >= selected && counts.offline == 0 {
        (
            true,
            "AllApplied",
            format!("all {selected} clusters applied the newest revision"),
        )
    } else {
        let message =
            format!("{applied_current} of {selected} clusters applied the newest revision");
        (false, "Applying", offline(message))
    };
    let ready = if selected == 0 {
        (
            false,
            "NoClusters",
            "no cluster matches the placement".to_string(),
        )
    } else if current.ready >= selected {
        (
            true,
            "AllReady",
            format!("all {selected} clusters run the newest revision and are ready"),
        )
    } else {
        let mut message = format!(
            "{} of {selected} clusters ready on the newest revision, {updated} run it",
            current.ready
        );
        if counts.failed > 0 {
            message.push_str(&format!("; {} failed: {}", counts.failed, names(3)));
        }
        let reason = if counts.failed > 0 {
            "ClustersFailed"
        } else {
            "Progressing"
        };
        (false, reason, offline(message))
    };
    let degraded = if counts.failed > 0 {
        let message = format!("{} clusters failed: {}", counts.failed, names(10));
        (true, "ClustersFailed", message)
    } else {
        (
            false,
            "NoFailures",
            "no cluster reports a failure".to_string(),
        )
    };

    let mut status = Map::new();
    if let Some(generation) = generation {
        status.insert("observedGeneration".into(), Value::from(generation));
    }
    if let Some(revision) = revision {
        status.insert("revision".into(), Value::from(revision.to_string()));
    }
    status.insert("clusters".into(), clusters);
    status.insert("failing".into(), Value::Array(failing));
    let conditions = [
        ("Applied", applied),
        ("Ready", ready),
        ("Degraded", degraded),
    ]
    .into_iter()
    .map(|(kind, (value, reason, message))| {
        condition(previous, kind, value, reason, &message, generation, now)
    })
    .collect::<Vec<Value>>();
    // Conditions someone else set (a rollout's gates) stay as they are.
    let mut conditions = conditions;
    conditions.extend(
        previous["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|condition| {
                !matches!(
                    condition["type"].as_str(),
                    Some("Applied" | "Ready" | "Degraded" | "Satisfied")
                )
            })
            .cloned(),
    );
    status.insert("conditions".into(), Value::Array(conditions));
    Value::Object(status)
}

/// Adds to `status` (as [`render`] made it) what the placement's spec
/// asks the tree to summarize: `rules`, each of its status rules' result
/// (`specified`, read at admission: [`rules::present`]), and `groups`, the
/// phase counts per value of each `statusGroupBy` label (`group_by`).
/// Rules the spec no longer has are not shown.
pub fn add_summaries(
    status: &mut Value,
    group_by: &[String],
    specified: &[rules::StatusRule],
    reported: &PlacementStatus,
) {
    let Some(fields) = status.as_object_mut() else {
        return;
    };
    if !specified.is_empty() {
        let results: Vec<Value> = specified
            .iter()
            .map(|rule| {
                let summary = reported
                    .rules
                    .iter()
                    .find(|summary| summary.rule == rule.name)
                    .cloned()
                    .unwrap_or_else(|| relaymesh_protocol::RuleSummary {
                        rule: rule.name.clone(),
                        ..Default::default()
                    });
                rules::present(rule, &summary)
            })
            .collect();
        fields.insert("rules".into(), Value::Array(results));
    }
    if !group_by.is_empty() {
        let by_label: Vec<Value> = group_by
            .iter()
            .map(|label| {
                let rows: Vec<Value> = groups::read(&reported.rules, label)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|group| {
                        let mut row = json!({
                            "clusters": group.clusters,
                            "ready": group.ready,
                            "failed": group.failed,
                        });
                        match group.key {
                            Some(key) => row["key"] = Value::from(key),
                            None => row["other"] = Value::Bool(true),
                        }
                        row
                    })
                    .collect();
                json!({"label": label, "groups": rows})
            })
            .collect();
        fields.insert("groups".into(), Value::Array(by_label));
    }
}

/// Whether `old` and `new` say the same thing, timestamps aside: the writer
/// stores a new status only if they do not.
pub fn same(old: &Value, new: &Value) -> bool {
    let without_times = |status: &Value| {
        let mut status = status.clone();
        if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
            for condition in conditions {
                if let Some(condition) = condition.as_object_mut() {
                    condition.remove("lastTransitionTime");
                }
            }
        }
        status
    };
    without_times(old) == without_times(new)
}

fn condition(
    previous: &Value,
    kind: &str,
    value: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> Value {
    let status = if value { "True" } else { "False" };
    let before = previous["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|condition| condition["type"] == kind);
    let since = before
        .filter(|before| before["status"] == status)
        .and_then(|before| before["lastTransitionTime"].as_str())
        .unwrap_or(now);
    let mut condition = json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    if let Some(generation) = generation {
        condition["observedGeneration"] = Value::from(generation);
    }
    condition
}

#[cfg(test)]
mod tests;
