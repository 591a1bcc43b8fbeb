//! The simulator's status rules: what `.status` a workload would have in a
//! real cluster once its pods settled, as pure functions of the object, the
//! cluster's name and the failure rules. No IO, no clock (the caller passes
//! `now`).
//!
//! A workload fails when any of its pod template's images contains `fail`
//! (as if the image could not be pulled), or when a [`FailureRule`] names it
//! and the cluster's name hashes into the rule's fraction.

use std::time::SystemTime;

use relaymesh_apiserver::objects::ObjectKey;
use serde_json::{json, Value};

/// One chosen share of the fleet on which a workload fails.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRule {
    /// The workload: `name` (in any namespace) or `namespace/name`.
    pub workload: String,
    /// The share of clusters it fails on, from 0.0 to 1.0, chosen by a
    /// deterministic hash of the cluster's and the workload's names.
    pub fraction: f64,
}

/// The kinds whose status the simulator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// batch/v1 Job.
    Job,
}

/// Why a workload fails in the simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A CamelCase reason, as the pods' waiting reason would be.
    pub reason: String,
    /// A sentence for humans.
    pub message: String,
}

impl WorkloadKind {
    /// The kind stored under `key`, if the simulator handles it.
    pub fn of(key: &ObjectKey) -> Option<Self> {
        match (key.group.as_str(), key.resource.as_str()) {
            ("apps", "deployments") => Some(Self::Deployment),
            ("apps", "statefulsets") => Some(Self::StatefulSet),
            ("apps", "daemonsets") => Some(Self::DaemonSet),
            ("apps", "replicasets") => Some(Self::ReplicaSet),
            ("batch", "jobs") => Some(Self::Job),
            _ => None,
        }
    }

    /// Every handled kind as (group, plural resource).
    pub const ALL: [(&'static str, &'static str); 5] = [
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("batch", "jobs"),
    ];
}

/// Whether, and why, `object` fails on the cluster called `cluster`.
pub fn failure(object: &Value, cluster: &str, rules: &[FailureRule]) -> Option<Failure> {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|field| {
            object
                .pointer(&format!("/spec/template/spec/{field}"))
                .and_then(Value::as_array)
        })
        .flatten();
    for container in containers {
        let image = container["image"].as_str().unwrap_or_default();
        if image.contains("fail") {
            return Some(Failure {
                reason: "ImagePullBackOff".into(),
                message: format!("Back-off pulling image {image:?} (simulated)"),
            });
        }
    }
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let qualified = format!("{namespace}/{name}");
    let rule = rules
        .iter()
        .find(|rule| rule.workload == name || rule.workload == qualified)?;
    (share(cluster, &qualified) < rule.fraction).then(|| Failure {
        reason: "CrashLoopBackOff".into(),
        message: format!(
            "simulated failure on {:.0}% of clusters",
            rule.fraction * 100.0
        ),
    })
}

/// Where the cluster falls in `[0, 1)` for one workload: the same inputs
/// always give the same share.
pub fn share(cluster: &str, workload: &str) -> f64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(cluster.as_bytes());
    hasher.update(&[0]);
    hasher.update(workload.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    // 53 bits fit an f64's mantissa exactly.
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// The status `object` settles to. `nodes` is how many nodes a DaemonSet
/// runs on. Timestamps of conditions that keep their status, and a Job's
/// start and completion times, are taken over from the current status, so a
/// settled object's desired status equals its current one.
pub fn desired_status(
    kind: WorkloadKind,
    object: &Value,
    failure: Option<&Failure>,
    nodes: u32,
    now: SystemTime,
) -> Value {
    let current = &object["status"];
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
    let ready = if failure.is_some() { 0 } else { replicas };
    let revision = format!("{}-{}", name_of(object), template_hash(object));
    let conditions = match kind {
        WorkloadKind::Job => job_conditions(failure),
        _ => rollout_conditions(&revision, failure),
    };
    let mut status = match kind {
        WorkloadKind::Deployment => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": replicas - ready,
        }),
        WorkloadKind::StatefulSet => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }),
        WorkloadKind::DaemonSet => {
            let nodes = i64::from(nodes);
            let ready = if failure.is_some() { 0 } else { nodes };
            json!({
                "observedGeneration": generation,
                "desiredNumberScheduled": nodes,
                "currentNumberScheduled": nodes,
                "updatedNumberScheduled": nodes,
                "numberMisscheduled": 0,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": nodes - ready,
            })
        }
        WorkloadKind::ReplicaSet => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
        }),
        WorkloadKind::Job => {
            let completions = object["spec"]["completions"].as_i64().unwrap_or(1);
            let backoff_limit = object["spec"]["backoffLimit"].as_i64().unwrap_or(6);
            let start = current["startTime"]
                .as_str()
                .map_or_else(|| timestamp(now), str::to_string);
            let mut status = json!({
                "startTime": start,
                "active": 0,
                "ready": 0,
                "uncountedTerminatedPods": {},
            });
            if failure.is_some() {
                status["failed"] = json!(backoff_limit + 1);
            } else {
                status["succeeded"] = json!(completions);
                status["completionTime"] = current["completionTime"]
                    .as_str()
                    .map_or_else(|| json!(timestamp(now)), |time| json!(time));
            }
            status
        }
    };
    status["conditions"] = Value::Array(
        conditions
            .into_iter()
            .map(|condition| with_times(condition, current, now))
            .collect(),
    );
    status
}

/// A Deployment-style pair of conditions (the simulator gives them to every
/// replicated kind, so generic status checks can read them).
fn rollout_conditions(revision: &str, failure: Option<&Failure>) -> Vec<Value> {
    match failure {
        None => vec![
            condition(
                "Available",
                true,
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            ),
            condition(
                "Progressing",
                true,
                "NewReplicaSetAvailable",
                &format!("ReplicaSet {revision:?} has successfully progressed."),
            ),
        ],
        Some(failure) => vec![
            condition(
                "Available",
                false,
                "MinimumReplicasUnavailable",
                &format!(
                    "Deployment does not have minimum availability: {}: {}",
                    failure.reason, failure.message
                ),
            ),
            condition(
                "Progressing",
                false,
                "ProgressDeadlineExceeded",
                &format!("ReplicaSet {revision:?} has timed out progressing."),
            ),
        ],
    }
}

fn job_conditions(failure: Option<&Failure>) -> Vec<Value> {
    match failure {
        None => {
            let message = "Reached expected number of succeeded pods";
            vec![
                condition("SuccessCriteriaMet", true, "CompletionsReached", message),
                condition("Complete", true, "CompletionsReached", message),
            ]
        }
        Some(failure) => {
            let message = format!(
                "Job has reached the specified backoff limit: {}: {}",
                failure.reason, failure.message
            );
            vec![
                condition("FailureTarget", true, "BackoffLimitExceeded", &message),
                condition("Failed", true, "BackoffLimitExceeded", &message),
            ]
        }
    }
}

fn condition(kind: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
    })
}

/// Adds `lastTransitionTime` and `lastUpdateTime`/`lastProbeTime`, keeping
/// the current ones when the condition did not change.
fn with_times(mut condition: Value, current: &Value, now: SystemTime) -> Value {
    let previous = current["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|old| old["type"] == condition["type"]);
    let now = Value::String(timestamp(now));
    let same_status = previous.is_some_and(|old| old["status"] == condition["status"]);
    let unchanged = same_status
        && previous.is_some_and(|old| {
            old["reason"] == condition["reason"] && old["message"] == condition["message"]
        });
    let pick = |field: &str, keep: bool| match previous {
        Some(old) if keep && old[field].is_string() => old[field].clone(),
        _ => now.clone(),
    };
    let update_field = if matches!(
        condition["type"].as_str(),
        Some("Available" | "Progressing")
    ) {
        "lastUpdateTime"
    } else {
        "lastProbeTime"
    };
    let (transition, update) = (
        pick("lastTransitionTime", same_status),
        pick(update_field, unchanged),
    );
    if let Value::Object(fields) = &mut condition {
        fields.insert("lastTransitionTime".into(), transition);
        fields.insert(update_field.into(), update);
    }
    condition
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// A pod-template-hash-like suffix: ten characters that change with the
/// pod template.
fn template_hash(object: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let template = serde_json::to_vec(&object["spec"]["template"]).unwrap_or_default();
    blake3::hash(&template).as_bytes()[..10]
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect()
}

fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// `status` without its time fields, for tests and logs that compare
/// statuses across clocks.
pub fn without_times(status: &Value) -> Value {
    let mut status = status.clone();
    if let Value::Object(fields) = &mut status {
        for field in ["startTime", "completionTime"] {
            fields.remove(field);
        }
        if let Some(Value::Array(conditions)) = fields.get_mut("conditions") {
            for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
                for field in ["lastTransitionTime", "lastUpdateTime", "lastProbeTime"] {
                    condition.remove(field);
                }
            }
        }
    }
    status
}

#[cfg(test)]
mod tests;
