//! What the placement controller says of a staged placement's rollout, and
//! what it writes of it: the root's core decides every wave
//! (`relaymesh_core::rollouts`); this module only reads what the API holds
//! for it (the commands `relayctl rollout` leaves as annotations naming the
//! revision they are for, so a command never applies to a later revision
//! than the one its author saw; the rollout `Placement.status.rollout`
//! recorded, which a restarted root takes up; the gates' conditions) and
//! renders the core's [`Rollout`] as `Placement.status.rollout`.

use std::str::FromStr;
use std::time::{Duration, UNIX_EPOCH};

use relaymesh_core::rollouts::{HistoryRecord, Phase, Rollout, RolloutInput};
use relaymesh_node::daemon::unix_ms;
use relaymesh_protocol::BundleId;
use relaymesh_topology::rollout::{wave_at, Counts, Position, RolloutSpec, Strategy};
use serde_json::{json, Value};

use crate::client::rollout::{ABORT_ANNOTATION, PROMOTE_ANNOTATION};

/// What the API says of the rollout of the Placement `object`, whose
/// `spec.rollout` is `spec`, for the core.
pub(super) fn input(object: &Value, spec: &RolloutSpec) -> RolloutInput {
    let annotation = |name: &str| {
        object["metadata"]["annotations"][name]
            .as_str()
            .and_then(|text| BundleId::from_str(text).ok())
    };
    RolloutInput {
        spec: spec.clone(),
        promote: annotation(PROMOTE_ANNOTATION),
        abort: annotation(ABORT_ANNOTATION),
        recorded: load(&object["status"]["rollout"], spec),
    }
}

/// `status.rollout` for a placement whose rollout is `rollout`, if it is
/// staged or has a history.
pub(super) fn render(rollout: &Rollout, spec: &RolloutSpec) -> Option<Value> {
    if !spec.is_staged() && rollout.history.is_empty() {
        return None;
    }
    let strategy = match spec.strategy {
        Strategy::All => "All",
        Strategy::Progressive => "Progressive",
        Strategy::Canary => "Canary",
    };
    let history: Vec<Value> = rollout
        .history
        .iter()
        .map(|record| {
            json!({
                "revision": record.revision,
                "outcome": record.outcome,
                "startedAt": timestamp(record.started_ms),
                "at": timestamp(record.at_ms),
            })
        })
        .collect();
    let mut status = json!({
        "strategy": strategy,
        "revision": rollout.revision.to_string(),
        "phase": rollout.phase.name(),
        "message": rollout.message,
        "startedAt": timestamp(rollout.started_ms),
        "canaryDone": rollout.position.canary_done,
        "admitted": rollout.position.admitted,
        "reached": rollout.reached,
        "clusters": {
            "waiting": rollout.counts.waiting,
            "updating": rollout.counts.updating,
            "succeeded": rollout.counts.succeeded,
            "failed": rollout.counts.failed,
        },
        "history": history,
    });
    if let Some(stable) = rollout.stable {
        status["previousRevision"] = Value::from(stable.to_string());
    }
    if spec.max_unavailable_per_group.is_some() {
        status["groups"] = rollout
            .groups
            .iter()
            .map(|group| {
                json!({
                    "name": group.name,
                    "selected": group.selected,
                    "admitted": rollout.position.per_group.get(&group.name).copied().unwrap_or(0),
                    "updating": group.counts.updating,
                    "succeeded": group.counts.succeeded,
                    "failed": group.counts.failed,
                })
            })
            .collect();
    }
    Some(status)
}

/// The rollout `status.rollout` recorded (`status` is that field), if it
/// names a revision.
fn load(status: &Value, spec: &RolloutSpec) -> Option<Rollout> {
    let revision = |field: &str| {
        status[field]
            .as_str()
            .and_then(|text| BundleId::from_str(text).ok())
    };
    let recorded = revision("revision")?;
    let phase = status["phase"]
        .as_str()
        .and_then(Phase::from_name)
        .unwrap_or(Phase::Progressing);
    let count = |value: &Value| value.as_u64().and_then(|count| u32::try_from(count).ok());
    let position = Position {
        canary_done: status["canaryDone"].as_bool().unwrap_or(false),
        admitted: count(&status["admitted"]).unwrap_or(0),
        per_group: status["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|group| {
                Some((
                    group["name"].as_str()?.to_string(),
                    count(&group["admitted"])?,
                ))
            })
            .collect(),
    };
    let finished = matches!(phase, Phase::Complete | Phase::Promoted);
    let history = status["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|record| {
            Some(HistoryRecord {
                revision: record["revision"].as_str()?.to_string(),
                outcome: record["outcome"].as_str()?.to_string(),
                started_ms: millis(&record["startedAt"])?,
                at_ms: millis(&record["at"])?,
            })
        })
        .collect();
    Some(Rollout {
        revision: recorded,
        stable: revision("previousRevision"),
        wave: (!finished).then(|| wave_at(spec, &position)),
        position,
        phase,
        message: status["message"].as_str().unwrap_or_default().to_string(),
        started_ms: millis(&status["startedAt"]).unwrap_or_else(unix_ms),
        counts: Counts::default(),
        reached: 0,
        groups: Vec::new(),
        history,
    })
}

/// Whether every gate of `spec` is a condition with status `True` on the
/// Placement's `status`.
pub fn gates_open(spec: &RolloutSpec, status: &Value) -> bool {
    spec.gates.iter().all(|gate| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|condition| condition["type"] == gate.as_str() && condition["status"] == "True")
    })
}

/// Unix milliseconds as the API writes times (RFC 3339, seconds).
fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// An RFC 3339 time the status holds, in Unix milliseconds.
fn millis(value: &Value) -> Option<u64> {
    let time = humantime::parse_rfc3339_weak(value.as_str()?).ok()?;
    u64::try_from(time.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests;
