//! `meta.k8s.io/v1` Table output, which `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: server-side
//! printing with columns per kind. No IO.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::resources::Resource;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// From the query parameter's value.
    pub(super) fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// Whether an `Accept` header asks for a Table.
pub(super) fn is_requested(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// A column: its header, type, priority (1: only in `-o wide`) and how
/// to compute its cell.
struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
    cell: fn(&Value, SystemTime) -> Value,
}

/// A column every `kubectl get` shows.
fn column(name: &'static str, kind: &'static str, cell: fn(&Value, SystemTime) -> Value) -> Column {
    Column {
        name,
        kind,
        priority: 0,
        cell,
    }
}

/// A column only `kubectl get -o wide` shows.
fn wide(name: &'static str, kind: &'static str, cell: fn(&Value, SystemTime) -> Value) -> Column {
    Column {
        name,
        kind,
        priority: 1,
        cell,
    }
}

/// The Table of `objects` of `resource`.
pub(super) fn render(
    resource: &Resource,
    objects: &[Value],
    include: IncludeObject,
    resource_version: &str,
    now: SystemTime,
) -> Value {
    let custom = custom_columns(resource);
    let columns = columns(resource);
    let mut definitions: Vec<Value> = columns
        .iter()
        .map(|column| definition(column.name, column.kind, column.priority))
        .collect();
    let age = age_position(&columns);
    for (offset, custom) in custom.iter().enumerate() {
        let definition = definition(&custom.name, &custom.kind, custom.priority);
        definitions.insert(age + offset, definition);
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells: Vec<Value> = columns
                .iter()
                .map(|column| (column.cell)(object, now))
                .collect();
            for (offset, custom) in custom.iter().enumerate() {
                cells.insert(age + offset, json_path(object, &custom.path));
            }
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": object["metadata"],
                    });
                }
                IncludeObject::Object => row["object"] = object.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn definition(name: &str, kind: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": name, "priority": priority})
}

/// Where a CRD's own columns go: before Age, as kube-apiserver puts them
/// (CRD kinds have only Name and Age of their own).
fn age_position(columns: &[Column]) -> usize {
    columns
        .iter()
        .position(|column| column.name == "Age")
        .unwrap_or(columns.len())
}

fn columns(resource: &Resource) -> Vec<Column> {
    let name = column("Name", "string", |o, _| o["metadata"]["name"].clone());
    let age = column("Age", "string", |o, now| json!(age(o, now)));
    let names_column = || wide("Containers", "string", |o, _| json!(containers(o, "name")));
    let images_column = || wide("Images", "string", |o, _| json!(containers(o, "image")));
    let selector_column = || {
        wide("Selector", "string", |o, _| {
            json!(label_selector(o.pointer("/spec/selector")))
        })
    };
    let (middle, after): (Vec<Column>, Vec<Column>) =
        match (resource.group.as_str(), resource.plural.as_str()) {
            ("", "namespaces") => (
                vec![column("Status", "string", |o, _| {
                    text(o, "/status/phase", "Active")
                })],
                vec![],
            ),
            ("", "configmaps") => (
                vec![column("Data", "integer", |o, _| {
                    json!(count(o, "/data") + count(o, "/binaryData"))
                })],
                vec![],
            ),
            ("", "secrets") => (
                vec![
                    column("Type", "string", |o, _| text(o, "/type", "Opaque")),
                    column("Data", "integer", |o, _| json!(count(o, "/data"))),
                ],
                vec![],
            ),
            ("", "pods") => (
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
            ),
            ("", "services") => (
                vec![
                    column("Type", "string", |o, _| text(o, "/spec/type", "ClusterIP")),
                    column("Cluster-IP", "string", |o, _| {
                        text(o, "/spec/clusterIP", "<none>")
                    }),
                    column("External-IP", "string", |o, _| json!(external_ip(o))),
                    column("Port(s)", "string", |o, _| json!(ports(o))),
                ],
                vec![wide("Selector", "string", |o, _| {
                    json!(labels(o.pointer("/spec/selector")))
                })],
            ),
            ("apps", "deployments") => (
                vec![
                    column("Ready", "string", |o, _| {
                        json!(format!(
                            "{}/{}",
                            number(o, "/status/readyReplicas"),
                            replicas(o)
                        ))
                    }),
                    column("Up-to-date", "integer", |o, _| {
                        json!(number(o, "/status/updatedReplicas"))
                    }),
                    column("Available", "integer", |o, _| {
                        json!(number(o, "/status/availableReplicas"))
                    }),
                ],
                vec![names_column(), images_column(), selector_column()],
            ),
            ("apps", "replicasets") | ("", "replicationcontrollers") => (
                vec![
                    column("Desired", "integer", |o, _| json!(replicas(o))),
                    column("Current", "integer", |o, _| {
                        json!(number(o, "/status/replicas"))
                    }),
                    column("Ready", "integer", |o, _| {
                        json!(number(o, "/status/readyReplicas"))
                    }),
                ],
                vec![names_column(), images_column(), selector_column()],
            ),
            ("apps", "statefulsets") => (
                vec![column("Ready", "string", |o, _| {
                    json!(format!(
                        "{}/{}",
                        number(o, "/status/readyReplicas"),
                        replicas(o)
                    ))
                })],
                vec![names_column(), images_column()],
            ),
            ("apps", "daemonsets") => (
                vec![
                    column("Desired", "integer", |o, _| {
                        json!(number(o, "/status/desiredNumberScheduled"))
                    }),
                    column("Current", "integer", |o, _| {
                        json!(number(o, "/status/currentNumberScheduled"))
                    }),
                    column("Ready", "integer", |o, _| {
                        json!(number(o, "/status/numberReady"))
                    }),
                    column("Up-to-date", "integer", |o, _| {
                        json!(number(o, "/status/updatedNumberScheduled"))
                    }),
                    column("Available", "integer", |o, _| {
                        json!(number(o, "/status/numberAvailable"))
                    }),
                    column("Node Selector", "string", |o, _| {
                        json!(labels(o.pointer("/spec/template/spec/nodeSelector")))
                    }),
                ],
                vec![names_column(), images_column(), selector_column()],
            ),
            ("batch", "jobs") => (
                vec![
                    column("Status", "string", |o, _| json!(job_status(o))),
                    column("Completions", "string", |o, _| json!(job_completions(o))),
                    column("Duration", "string", |o, now| json!(job_duration(o, now))),
                ],
                vec![names_column(), images_column(), selector_column()],
            ),
            ("batch", "cronjobs") => (
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
            ),
            _ => (Vec::new(), Vec::new()),
        };
    let mut all = vec![name];
    all.extend(middle);
    all.push(age);
    all.extend(after);
    all
}

/// One of a CRD's additionalPrinterColumns.
struct CustomColumn {
    name: String,
    kind: String,
    priority: u8,
    path: String,
}

/// A CRD's additionalPrinterColumns, skipping the Age column every table
/// has anyway.
fn custom_columns(resource: &Resource) -> Vec<CustomColumn> {
    resource
        .printer_columns
        .iter()
        .filter_map(|column| {
            let name = column["name"].as_str()?;
            let path = column["jsonPath"].as_str()?;
            (path != ".metadata.creationTimestamp").then(|| CustomColumn {
                name: name.to_string(),
                kind: column["type"].as_str().unwrap_or("string").to_string(),
                priority: column["priority"]
                    .as_u64()
                    .and_then(|priority| u8::try_from(priority).ok())
                    .unwrap_or(0),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A simple `.a.b.c` JSON path; anything fancier renders empty.
fn json_path(object: &Value, path: &str) -> Value {
    let pointer = path.trim_start_matches('.').replace('.', "/");
    object
        .pointer(&format!("/{pointer}"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn text(object: &Value, pointer: &str, default: &str) -> Value {
    json!(object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or(default))
}

fn number(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn replicas(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn count(object: &Value, pointer: &str) -> usize {
    object
        .pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |map| map.len())
}

/// A Service's ports as Go's `makePortString` writes them:
/// `port[:nodePort]/protocol`, joined with commas.
fn ports(object: &Value) -> String {
    let ports: Vec<String> = array(object, "/spec/ports")
        .iter()
        .map(|port| {
            let number = port["port"].as_i64().unwrap_or(0);
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            match port["nodePort"].as_i64().filter(|node_port| *node_port > 0) {
                Some(node_port) => format!("{number}:{node_port}/{protocol}"),
                None => format!("{number}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

/// A Service's External-IP cell, by its type, as Go's
/// `getServiceExternalIP` writes it.
fn external_ip(object: &Value) -> String {
    let external: Vec<&str> = array(object, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match object.pointer("/spec/type").and_then(Value::as_str) {
        None | Some("" | "ClusterIP" | "NodePort") if external.is_empty() => "<none>".into(),
        None | Some("" | "ClusterIP" | "NodePort") => external.join(","),
        Some("LoadBalancer") => {
            let mut addresses: Vec<&str> = array(object, "/status/loadBalancer/ingress")
                .iter()
                .filter_map(|ingress| {
                    ingress["ip"]
                        .as_str()
                        .filter(|ip| !ip.is_empty())
                        .or_else(|| ingress["hostname"].as_str())
                })
                .collect();
            addresses.extend(external);
            if addresses.is_empty() {
                "<pending>".into()
            } else {
                addresses.join(",")
            }
        }
        Some("ExternalName") => object
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Some(_) => "<unknown>".into(),
    }
}

/// The array at `pointer`, or none.
fn array<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The `field` (`name`, `image`) of each container of the pod template
/// under `spec/template/spec`, joined with commas.
fn containers(object: &Value, field: &str) -> String {
    containers_at(object, "/spec/template/spec", field)
}

/// The `field` of each container of the pod spec at `pod_spec`.
fn containers_at(object: &Value, pod_spec: &str, field: &str) -> String {
    array(object, &format!("{pod_spec}/containers"))
        .iter()
        .filter_map(|container| container[field].as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// A label map as Go's `labels.FormatLabels`: `k=v` sorted by key,
/// `<none>` when empty.
fn labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs.sort();
    pairs.join(",")
}

/// A `LabelSelector` as Go's `LabelSelectorAsSelector(...).String()`:
/// its requirements sorted by key (`k=v`, `k in (a,b)`, `k notin (a,b)`,
/// `k`, `!k`), joined with commas; empty when it has none.
fn label_selector(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut requirements: Vec<(String, String)> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let value = value.as_str().unwrap_or_default();
            (key.clone(), format!("{key}={value}"))
        })
        .collect();
    for expression in selector["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = expression["values"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let text = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        };
        requirements.push((key.to_string(), text));
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
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

/// How long ago the timestamp `value` was, if it is one.
fn since(value: Option<&Value>, now: SystemTime) -> Option<String> {
    let then = humantime::parse_rfc3339(value?.as_str()?).ok()?;
    Some(human_duration(
        now.duration_since(then).unwrap_or(Duration::ZERO),
    ))
}

/// The object's age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d`).
fn age(object: &Value, now: SystemTime) -> String {
    let Some(created) = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|text| humantime::parse_rfc3339(text).ok())
    else {
        return "<unknown>".into();
    };
    human_duration(now.duration_since(created).unwrap_or(Duration::ZERO))
}

fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86400);
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 if !seconds.is_multiple_of(60) => format!("{minutes}m{}s", seconds % 60),
        120..10_800 => format!("{minutes}m"),
        10_800..28_800 if minutes % 60 != 0 => format!("{hours}h{}m", minutes % 60),
        10_800..172_800 => format!("{hours}h"),
        172_800..691_200 if hours % 24 != 0 => format!("{days}d{}h", hours % 24),
        _ => format!("{days}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::resources::Source;
    use super::*;

    fn resource(group: &str, plural: &str) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            singular: String::new(),
            kind: String::new(),
            namespaced: true,
            short_names: vec![],
            source: Source::Stored,
            builtin: true,
            status: false,
            schema: None,
            printer_columns: vec![],
            extra_categories: Vec::new(),
            validator: None,
            warner: None,
        }
    }

    fn headers(table: &Value) -> Vec<String> {
        table["columnDefinitions"]
            .as_array()
            .map(|columns| {
                columns
                    .iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn deployments_show_readiness() {
        let now = humantime::parse_rfc3339("2026-01-01T00:05:00Z").expect("a time");
        let deployment = json!({
            "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 3},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        });
        let table = render(
            &resource("apps", "deployments"),
            &[deployment],
            IncludeObject::Metadata,
            "7",
            now,
        );
        assert_eq!(table["kind"], "Table");
        assert_eq!(
            headers(&table),
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        // No template and no selector: empty wide cells, as Go prints them.
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["web", "2/3", 3, 2, "5m", "", "", ""])
        );
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn wide_columns_are_priority_one() {
        let now = humantime::parse_rfc3339("2026-01-01T00:05:00Z").expect("a time");
        let deployment = json!({
            "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "replicas": 2,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "api"]}],
                },
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"},
                    {"name": "sidecar", "image": "busybox:1.36"},
                ]}},
            },
        });
        let table = render(
            &resource("apps", "deployments"),
            &[deployment],
            IncludeObject::None,
            "1",
            now,
        );
        assert_eq!(
            headers(&table),
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let priorities: Vec<&Value> = table["columnDefinitions"]
            .as_array()
            .map(|columns| columns.iter().map(|column| &column["priority"]).collect())
            .unwrap_or_default();
        assert_eq!(
            priorities,
            [
                &json!(0),
                &json!(0),
                &json!(0),
                &json!(0),
                &json!(0),
                &json!(1),
                &json!(1),
                &json!(1)
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web",
                "0/2",
                0,
                0,
                "5m",
                "nginx,sidecar",
                "nginx:1.27,busybox:1.36",
                "app=web,tier in (api,front)"
            ])
        );
    }

    #[test]
    fn pods_show_readiness_status_and_restarts() {
        let now = humantime::parse_rfc3339("2026-01-01T01:00:00Z").expect("a time");
        let pending = json!({
            "metadata": {"name": "solo", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "solo"}]},
            "status": {"phase": "Pending"},
        });
        let crashing = json!({
            "metadata": {"name": "crash", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:58:00Z"}}},
            ]},
        });
        let table = render(
            &resource("", "pods"),
            &[pending, crashing],
            IncludeObject::None,
            "1",
            now,
        );
        assert_eq!(
            headers(&table),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["solo", "0/1", "Pending", "0", "60m", "<none>", "<none>", "<none>", "<none>"])
        );
        assert_eq!(
            table["rows"][1]["cells"],
            json!([
                "crash",
                "1/2",
                "CrashLoopBackOff",
                "3 (2m ago)",
                "60m",
                "10.0.0.7",
                "n1",
                "<none>",
                "<none>"
            ])
        );
    }

    #[test]
    fn services_show_addresses_ports_and_selector() {
        let now = SystemTime::now();
        let node_port = json!({
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
        });
        let external = json!({
            "metadata": {"name": "docs"},
            "spec": {"type": "ExternalName", "externalName": "docs.example.com"},
        });
        let table = render(
            &resource("", "services"),
            &[node_port, external],
            IncludeObject::None,
            "1",
            now,
        );
        assert_eq!(
            headers(&table),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web",
                "NodePort",
                "10.96.0.10",
                "<none>",
                "80:30080/TCP,53/UDP",
                "<unknown>",
                "app=web"
            ])
        );
        assert_eq!(
            table["rows"][1]["cells"],
            json!([
                "docs",
                "ExternalName",
                "<none>",
                "docs.example.com",
                "<none>",
                "<unknown>",
                "<none>"
            ])
        );
    }

    #[test]
    fn crd_columns_and_included_objects() {
        let mut widgets = resource("example.com", "widgets");
        widgets.printer_columns =
            vec![json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"})];
        let widget = json!({"metadata": {"name": "w"}, "spec": {"size": 4}});
        let table = render(
            &widgets,
            std::slice::from_ref(&widget),
            IncludeObject::Object,
            "1",
            SystemTime::now(),
        );
        assert_eq!(headers(&table), ["Name", "Size", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["w", 4, "<unknown>"]));
        assert_eq!(table["rows"][0]["object"], widget);
        let table = render(
            &widgets,
            &[widget],
            IncludeObject::None,
            "1",
            SystemTime::now(),
        );
        assert!(table["rows"][0].get("object").is_none());
    }

    #[test]
    fn an_extensions_columns_come_once() {
        let column =
            |name: &str, path: &str| json!({"name": name, "type": "integer", "jsonPath": path});
        let placements =
            Resource::new("relaymesh.dev", "v1alpha1", "placements", "Placement", true)
                .printer_columns(vec![
                    column("Selected", ".status.clusters.selected"),
                    column("Ready", ".status.clusters.ready"),
                ]);
        let placement =
            json!({"metadata": {"name": "p"}, "status": {"clusters": {"selected": 3, "ready": 2}}});
        let table = render(
            &placements,
            &[placement],
            IncludeObject::None,
            "1",
            SystemTime::now(),
        );
        assert_eq!(headers(&table), ["Name", "Selected", "Ready", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["p", 3, 2, "<unknown>"]));
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (5, "5s"),
            (150, "2m30s"),
            (900, "15m"),
            (4 * 3600 + 60, "4h1m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(Duration::from_secs(seconds)), text);
        }
        assert!(is_requested(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
    }
}
