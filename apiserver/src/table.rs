//! `meta.k8s.io/v1` Table output, which `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: server-side
//! printing with columns per kind. No IO.
//!
//! Where the work is split: each built-in kind's columns sit with the
//! kinds of its group (`core_group`, `pods`, `apps`, `batch`), built from
//! the leaves `column` (what a column is) and `cells` (what many cells
//! read alike); a CRD's own columns come from `printer_columns`. This
//! module picks the columns of a kind and lays out the Table.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::resources::Resource;
use cells::age;
use column::{column, Column, KindColumns};
use printer_columns::{custom_columns, json_path};

mod apps;
mod batch;
mod cells;
mod column;
mod core_group;
mod pods;
mod printer_columns;
#[cfg(test)]
mod tests;

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

/// The Table this server would print for `objects` of the built-in kind
/// `plural` in `group` (Name, the kind's columns, Age, the wide ones), for
/// objects it did not store itself: relayctl shows one cluster's copy of an
/// object as `kubectl get` on that cluster would.
pub fn of_objects(group: &str, plural: &str, objects: &[Value], now: SystemTime) -> Value {
    let resource = Resource::new(group, "v1", plural, "", true);
    render(&resource, objects, IncludeObject::Object, "", now)
}

/// Whether an `Accept` header asks for a Table.
pub(super) fn is_requested(accept: &str) -> bool {
    accept.contains("as=Table")
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

/// Name, the kind's own columns, Age, then the kind's wide ones.
fn columns(resource: &Resource) -> Vec<Column> {
    let name = column("Name", "string", |o, _| o["metadata"]["name"].clone());
    let age = column("Age", "string", |o, now| json!(age(o, now)));
    let (middle, after) = kind_columns(&resource.group, &resource.plural);
    let mut all = vec![name];
    all.extend(middle);
    all.push(age);
    all.extend(after);
    all
}

/// The columns of the built-in kind `plural` of `group`, as kube-apiserver
/// prints it; none for other kinds, which have only Name and Age (and a
/// CRD's printer columns).
fn kind_columns(group: &str, plural: &str) -> KindColumns {
    match (group, plural) {
        ("", "namespaces") => core_group::namespaces(),
        ("", "configmaps") => core_group::config_maps(),
        ("", "secrets") => core_group::secrets(),
        ("", "pods") => pods::pods(),
        ("", "services") => core_group::services(),
        ("apps", "deployments") => apps::deployments(),
        ("apps", "replicasets") | ("", "replicationcontrollers") => apps::replica_sets(),
        ("apps", "statefulsets") => apps::stateful_sets(),
        ("apps", "daemonsets") => apps::daemon_sets(),
        ("batch", "jobs") => batch::jobs(),
        ("batch", "cronjobs") => batch::cron_jobs(),
        _ => (Vec::new(), Vec::new()),
    }
}
