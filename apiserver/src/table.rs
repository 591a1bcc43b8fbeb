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

/// A column: (header, type, JSON path or a computed cell).
struct Column {
    name: &'static str,
    kind: &'static str,
    cell: fn(&Value, SystemTime) -> Value,
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
        .map(|column| definition(column.name, column.kind))
        .collect();
    for (name, kind, _) in &custom {
        definitions.insert(definitions.len() - 1, definition(name, kind));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells: Vec<Value> = columns
                .iter()
                .map(|column| (column.cell)(object, now))
                .collect();
            for (_, _, path) in &custom {
                cells.insert(cells.len() - 1, json_path(object, path));
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

fn definition(name: &str, kind: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": name, "priority": 0})
}

fn columns(resource: &Resource) -> Vec<Column> {
    let name = Column {
        name: "Name",
        kind: "string",
        cell: |o, _| o["metadata"]["name"].clone(),
    };
    let age = Column {
        name: "Age",
        kind: "string",
        cell: |o, now| json!(age(o, now)),
    };
    let middle: Vec<Column> = match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "namespaces") => vec![Column {
            name: "Status",
            kind: "string",
            cell: |o, _| text(o, "/status/phase", "Active"),
        }],
        ("", "configmaps") => vec![Column {
            name: "Data",
            kind: "integer",
            cell: |o, _| json!(count(o, "/data") + count(o, "/binaryData")),
        }],
        ("", "secrets") => vec![
            Column {
                name: "Type",
                kind: "string",
                cell: |o, _| text(o, "/type", "Opaque"),
            },
            Column {
                name: "Data",
                kind: "integer",
                cell: |o, _| json!(count(o, "/data")),
            },
        ],
        ("", "services") => vec![
            Column {
                name: "Type",
                kind: "string",
                cell: |o, _| text(o, "/spec/type", "ClusterIP"),
            },
            Column {
                name: "Cluster-IP",
                kind: "string",
                cell: |o, _| text(o, "/spec/clusterIP", "<none>"),
            },
            Column {
                name: "Port(s)",
                kind: "string",
                cell: |o, _| json!(ports(o)),
            },
        ],
        ("apps", "deployments") => vec![
            Column {
                name: "Ready",
                kind: "string",
                cell: |o, _| {
                    json!(format!(
                        "{}/{}",
                        number(o, "/status/readyReplicas"),
                        replicas(o)
                    ))
                },
            },
            Column {
                name: "Up-to-date",
                kind: "integer",
                cell: |o, _| json!(number(o, "/status/updatedReplicas")),
            },
            Column {
                name: "Available",
                kind: "integer",
                cell: |o, _| json!(number(o, "/status/availableReplicas")),
            },
        ],
        ("apps", "statefulsets") => vec![Column {
            name: "Ready",
            kind: "string",
            cell: |o, _| {
                json!(format!(
                    "{}/{}",
                    number(o, "/status/readyReplicas"),
                    replicas(o)
                ))
            },
        }],
        ("relaymesh.dev", "placements") => vec![
            Column {
                name: "Selected",
                kind: "integer",
                cell: |o, _| json!(number(o, "/status/clusters/selected")),
            },
            Column {
                name: "Ready",
                kind: "integer",
                cell: |o, _| json!(number(o, "/status/clusters/ready")),
            },
        ],
        ("relaymesh.dev", "clusters") => {
            return vec![
                name,
                Column {
                    name: "Connected",
                    kind: "boolean",
                    cell: |o, _| o["status"]["connected"].clone(),
                },
                Column {
                    name: "Relay-Path",
                    kind: "string",
                    cell: |o, _| json!(relay_path(o)),
                },
            ];
        }
        ("relaymesh.dev", "relays" | "agents") => {
            return vec![
                name,
                Column {
                    name: "Connected",
                    kind: "boolean",
                    cell: |o, _| o["status"]["connected"].clone(),
                },
                Column {
                    name: "Parent",
                    kind: "string",
                    cell: |o, _| text(o, "/spec/parent", "<none>"),
                },
            ];
        }
        _ => Vec::new(),
    };
    let mut all = vec![name];
    all.extend(middle);
    all.push(age);
    all
}

/// A CRD's additionalPrinterColumns: (header, type, JSON path), skipping
/// the Age column every table has anyway.
fn custom_columns(resource: &Resource) -> Vec<(String, String, String)> {
    resource
        .printer_columns
        .iter()
        .filter_map(|column| {
            let name = column["name"].as_str()?;
            let path = column["jsonPath"].as_str()?;
            (path != ".metadata.creationTimestamp").then(|| {
                (
                    name.to_string(),
                    column["type"].as_str().unwrap_or("string").to_string(),
                    path.to_string(),
                )
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

fn ports(object: &Value) -> String {
    let ports: Vec<String> = object
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|port| {
            format!(
                "{}/{}",
                port["port"].as_i64().unwrap_or(0),
                port["protocol"].as_str().unwrap_or("TCP")
            )
        })
        .collect();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

fn relay_path(object: &Value) -> String {
    object["status"]["relayPath"]
        .as_array()
        .map(|path| {
            path.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default()
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
            ["Name", "Ready", "Up-to-date", "Available", "Age"]
        );
        assert_eq!(table["rows"][0]["cells"], json!(["web", "2/3", 3, 2, "5m"]));
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
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
