//! The columns of pods, with the cells Go's `printPod` works out from a
//! pod's containers: readiness (sidecars included), status and restarts.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::cells::{array, human_duration, text};
use super::column::{column, wide, KindColumns};

/// Pods: readiness, status and restarts; where they run and their
/// readiness gates when wide.
pub(super) fn pods() -> KindColumns {
    (
        vec![
            column("Ready", "string", |o, _| json!(pod_ready(o))),
            column("Status", "string", |o, _| json!(pod_status(o))),
            column("Restarts", "string", |o, now| json!(pod_restarts(o, now))),
        ],
        vec![
            wide("IP", "string", |o, _| text(o, "/status/podIP", "<none>")),
            wide("Node", "string", |o, _| text(o, "/spec/nodeName", "<none>")),
            wide("Nominated Node", "string", |o, _| {
                text(o, "/status/nominatedNodeName", "<none>")
            }),
            wide("Readiness Gates", "string", |o, _| {
                json!(readiness_gates(o))
            }),
        ],
    )
}

/// Whether an init container is a sidecar (`restartPolicy: Always`).
fn is_sidecar(container: &Value) -> bool {
    container["restartPolicy"] == "Always"
}

/// A Pod's Ready cell: ready containers (sidecars included) of all.
fn pod_ready(pod: &Value) -> String {
    let sidecars: Vec<&str> = array(pod, "/spec/initContainers")
        .iter()
        .filter(|container| is_sidecar(container))
        .filter_map(|container| container["name"].as_str())
        .collect();
    let total = array(pod, "/spec/containers").len() + sidecars.len();
    let ready = array(pod, "/status/containerStatuses")
        .iter()
        .filter(|status| status["ready"] == true)
        .count()
        + array(pod, "/status/initContainerStatuses")
            .iter()
            .filter(|status| {
                status["ready"] == true
                    && status["name"]
                        .as_str()
                        .is_some_and(|name| sidecars.contains(&name))
            })
            .count();
    format!("{ready}/{total}")
}

/// A Pod's Status cell, as Go's `printPod` works it out: the phase or
/// reason, an init container's progress or failure, a container's waiting
/// or terminated reason, or `Terminating`.
fn pod_status(pod: &Value) -> String {
    let status = &pod["status"];
    let mut reason = status["phase"].as_str().unwrap_or_default().to_string();
    if let Some(text) = status["reason"].as_str().filter(|text| !text.is_empty()) {
        reason = text.to_string();
    }
    if array(pod, "/status/conditions").iter().any(|condition| {
        condition["type"] == "PodScheduled" && condition["reason"] == "SchedulingGated"
    }) {
        reason = "SchedulingGated".into();
    }
    let init_containers = array(pod, "/spec/initContainers");
    let mut initializing = false;
    for (index, container) in array(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let state = &container["state"];
        let terminated = &state["terminated"];
        let sidecar = init_containers
            .iter()
            .any(|spec| spec["name"] == container["name"] && is_sidecar(spec));
        if terminated.is_object() && terminated["exitCode"].as_i64().unwrap_or(0) == 0 {
            continue;
        }
        if sidecar && container["started"] == true {
            continue;
        }
        initializing = true;
        let waiting = state["waiting"]["reason"].as_str().unwrap_or_default();
        reason = if terminated.is_object() {
            match terminated["reason"]
                .as_str()
                .filter(|text| !text.is_empty())
            {
                Some(text) => format!("Init:{text}"),
                None => exit_reason("Init:", terminated),
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{index}/{}", init_containers.len())
        };
        break;
    }
    let initialized = array(pod, "/status/conditions")
        .iter()
        .any(|condition| condition["type"] == "Initialized" && condition["status"] == "True");
    if !initializing || initialized {
        let mut running = false;
        for container in array(pod, "/status/containerStatuses").iter().rev() {
            let state = &container["state"];
            let waiting = state["waiting"]["reason"].as_str().unwrap_or_default();
            let terminated = &state["terminated"];
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if terminated.is_object() {
                reason = match terminated["reason"]
                    .as_str()
                    .filter(|text| !text.is_empty())
                {
                    Some(text) => text.to_string(),
                    None => exit_reason("", terminated),
                };
            } else if container["ready"] == true && state["running"].is_object() {
                running = true;
            }
        }
        if reason == "Completed" && running {
            let ready = array(pod, "/status/conditions")
                .iter()
                .any(|condition| condition["type"] == "Ready" && condition["status"] == "True");
            reason = if ready { "Running" } else { "NotReady" }.into();
        }
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        if status["reason"] == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")) {
            reason = "Terminating".into();
        }
    }
    reason
}

/// `Signal:N` or `ExitCode:N` for a terminated state with no reason.
fn exit_reason(prefix: &str, terminated: &Value) -> String {
    match terminated["signal"].as_i64().filter(|signal| *signal != 0) {
        Some(signal) => format!("{prefix}Signal:{signal}"),
        None => format!(
            "{prefix}ExitCode:{}",
            terminated["exitCode"].as_i64().unwrap_or(0)
        ),
    }
}

/// A Pod's Restarts cell: the containers' restarts, and how long ago the
/// last one was (`3 (5m ago)`).
fn pod_restarts(pod: &Value, now: SystemTime) -> String {
    let statuses = array(pod, "/status/initContainerStatuses")
        .iter()
        .chain(array(pod, "/status/containerStatuses"));
    let (mut restarts, mut last) = (0, None::<SystemTime>);
    for status in statuses {
        restarts += status["restartCount"].as_i64().unwrap_or(0);
        let finished = status
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|text| humantime::parse_rfc3339(text).ok());
        if let Some(finished) = finished {
            last = Some(last.map_or(finished, |last| last.max(finished)));
        }
    }
    match last {
        Some(last) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.duration_since(last).unwrap_or(Duration::ZERO))
        ),
        _ => restarts.to_string(),
    }
}

/// A Pod's Readiness Gates cell: gates whose condition is true, of all.
fn readiness_gates(pod: &Value) -> String {
    let gates = array(pod, "/spec/readinessGates");
    if gates.is_empty() {
        return "<none>".into();
    }
    let conditions = array(pod, "/status/conditions");
    let met = gates
        .iter()
        .filter(|gate| {
            conditions.iter().any(|condition| {
                condition["type"] == gate["conditionType"] && condition["status"] == "True"
            })
        })
        .count();
    format!("{met}/{}", gates.len())
}
