//! The columns of the `batch` group's jobs and cron jobs, with the cells
//! Go's `printJob` works out from a job's conditions and counts.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::cells::{array, containers_at, human_duration, label_selector, number, since, text};
use super::column::{column, containers_column, images_column, selector_column, wide, KindColumns};

/// Jobs: status, completions and how long they ran.
pub(super) fn jobs() -> KindColumns {
    (
        vec![
            column("Status", "string", |o, _| json!(job_status(o))),
            column("Completions", "string", |o, _| json!(job_completions(o))),
            column("Duration", "string", |o, now| json!(job_duration(o, now))),
        ],
        vec![containers_column(), images_column(), selector_column()],
    )
}

/// CronJobs: their schedule and runs; the job template when wide, whose
/// pod template sits a level deeper than other workloads'.
pub(super) fn cron_jobs() -> KindColumns {
    (
        vec![
            column("Schedule", "string", |o, _| text(o, "/spec/schedule", "")),
            column("Timezone", "string", |o, _| {
                text(o, "/spec/timeZone", "<none>")
            }),
            // Go's printBoolPtr of the defaulted (false) field.
            column("Suspend", "boolean", |o, _| {
                let suspended = o.pointer("/spec/suspend").and_then(Value::as_bool);
                json!(if suspended == Some(true) {
                    "True"
                } else {
                    "False"
                })
            }),
            column("Active", "integer", |o, _| {
                json!(o
                    .pointer("/status/active")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len))
            }),
            column("Last Schedule", "string", |o, now| {
                json!(since(o.pointer("/status/lastScheduleTime"), now)
                    .unwrap_or_else(|| "<none>".into()))
            }),
        ],
        vec![
            wide("Containers", "string", |o, _| {
                json!(containers_at(
                    o,
                    "/spec/jobTemplate/spec/template/spec",
                    "name"
                ))
            }),
            wide("Images", "string", |o, _| {
                json!(containers_at(
                    o,
                    "/spec/jobTemplate/spec/template/spec",
                    "image"
                ))
            }),
            wide("Selector", "string", |o, _| {
                json!(label_selector(o.pointer("/spec/jobTemplate/spec/selector")))
            }),
        ],
    )
}

/// Whether a Job has a condition of `kind` that is true.
fn has_condition(job: &Value, kind: &str) -> bool {
    array(job, "/status/conditions")
        .iter()
        .any(|condition| condition["type"] == kind && condition["status"] == "True")
}

/// A Job's Status cell, as Go's `printJob` picks it.
fn job_status(job: &Value) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if job["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

/// A Job's Completions cell: succeeded of completions, or of 1 with its
/// parallelism when it has no completion count.
fn job_completions(job: &Value) -> String {
    let succeeded = number(job, "/status/succeeded");
    match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match job.pointer("/spec/parallelism").and_then(Value::as_i64) {
            Some(parallelism) if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

/// A Job's Duration cell: from its start to its completion, or to now;
/// empty before it starts.
fn job_duration(job: &Value, now: SystemTime) -> String {
    let time = |pointer: &str| {
        job.pointer(pointer)
            .and_then(Value::as_str)
            .and_then(|text| humantime::parse_rfc3339(text).ok())
    };
    let Some(start) = time("/status/startTime") else {
        return String::new();
    };
    let end = time("/status/completionTime").unwrap_or(now);
    human_duration(end.duration_since(start).unwrap_or(Duration::ZERO))
}
