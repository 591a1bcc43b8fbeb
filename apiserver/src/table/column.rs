//! A Table's column: its header, type and priority, and the function that
//! computes its cell. Each kind's module lists its columns with these
//! constructors, and the kinds with a pod template share the wide columns
//! that show it.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::cells::{containers, label_selector};

/// A column: its header, type, priority (1: only in `-o wide`) and how
/// to compute its cell.
pub(super) struct Column {
    pub(super) name: &'static str,
    pub(super) kind: &'static str,
    pub(super) priority: u8,
    pub(super) cell: fn(&Value, SystemTime) -> Value,
}

/// A column every `kubectl get` shows.
pub(super) fn column(
    name: &'static str,
    kind: &'static str,
    cell: fn(&Value, SystemTime) -> Value,
) -> Column {
    Column {
        name,
        kind,
        priority: 0,
        cell,
    }
}

/// A column only `kubectl get -o wide` shows.
pub(super) fn wide(
    name: &'static str,
    kind: &'static str,
    cell: fn(&Value, SystemTime) -> Value,
) -> Column {
    Column {
        name,
        kind,
        priority: 1,
        cell,
    }
}

/// A built-in kind's own columns: those between Name and Age, and those
/// after Age (the wide ones).
pub(super) type KindColumns = (Vec<Column>, Vec<Column>);

/// The names of the pod template's containers (`-o wide`).
pub(super) fn containers_column() -> Column {
    wide("Containers", "string", |o, _| json!(containers(o, "name")))
}

/// The images of the pod template's containers (`-o wide`).
pub(super) fn images_column() -> Column {
    wide("Images", "string", |o, _| json!(containers(o, "image")))
}

/// The `spec.selector` of a kind that selects its pods (`-o wide`).
pub(super) fn selector_column() -> Column {
    wide("Selector", "string", |o, _| {
        json!(label_selector(o.pointer("/spec/selector")))
    })
}
