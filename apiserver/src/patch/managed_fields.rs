//! Field sets in the `FieldsV1` encoding, and `metadata.managedFields`.
//!
//! A field set is a tree of path elements, as in structured-merge-diff:
//! `f:<name>` for a map field, `k:<json>` for an item of a keyed list (its
//! key fields as a JSON object with sorted keys), `v:<json>` for an item of
//! a set. A path is a member of the set when its last element is in its
//! parent's `members`; `.` in the encoding marks a node that is both a
//! member and has members below it. Which paths an object yields follows the
//! [`merge_keys`](super::merge_keys) table: leaves, atomic lists, empty maps
//! and the items of keyed lists and sets. Unlike Kubernetes we do not mark
//! granular maps such as `labels` themselves (`.`), only their entries.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::merge_keys::{is_stripped, ListStrategy, Schema};

/// One step of a path into an object, spelled as in `FieldsV1`
/// (`f:name`, `k:{"name":"web"}`, `v:"x"`).
pub(crate) type PathElement = String;

/// A set of field paths.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

/// Two sets are equal when they have the same members, whatever empty
/// children building them left behind (an object whose only fields are
/// stripped, such as `metadata: {name}`, leaves one).
impl PartialEq for FieldSet {
    fn eq(&self, other: &Self) -> bool {
        self.paths() == other.paths()
    }
}

impl Eq for FieldSet {}

impl FieldSet {
    /// The fields an object holds, per the schema table.
    pub(crate) fn of_object(object: &Value, schema: Schema) -> FieldSet {
        let mut set = FieldSet::default();
        if let Value::Object(map) = object {
            set.add_map(map, schema, true, false);
        }
        set
    }

    /// Whether the set has no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Every member path, parents before their children.
    pub(crate) fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut paths = Vec::new();
        self.collect(&mut Vec::new(), &mut paths);
        paths
    }

    /// Whether `path` is a member.
    pub(crate) fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `path` or any path below it is a member.
    pub(crate) fn contains_under(&self, path: &[PathElement]) -> bool {
        match path {
            [] => !self.is_empty(),
            [first, rest @ ..] => {
                (rest.is_empty() && self.members.contains(first))
                    || self
                        .children
                        .get(first)
                        .is_some_and(|c| c.contains_under(rest))
            }
        }
    }

    /// Adds `path` as a member.
    pub(crate) fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Removes `path` as a member (not the paths below it).
    pub(crate) fn remove(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(child) = self.children.get_mut(first) {
                    child.remove(rest);
                    if child.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// The members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::default();
        for path in self.paths() {
            if !other.contains(&path) {
                out.insert(&path);
            }
        }
        out
    }

    /// The set in the `FieldsV1` JSON encoding.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        // An empty child owns nothing and must not be written: `{}` reads
        // back as a member, which made a manager that applied
        // `metadata: {name}` own all of `metadata`, so its next apply
        // removed everything else in it.
        let non_empty = self
            .children
            .iter()
            .filter(|(_, child)| !child.is_empty())
            .map(|(key, _)| key);
        let keys: BTreeSet<&PathElement> = self.members.iter().chain(non_empty).collect();
        for key in keys {
            let mut node = match self.children.get(key) {
                Some(child) if !child.is_empty() => match child.to_fields_v1() {
                    Value::Object(node) => node,
                    _ => Map::new(),
                },
                _ => Map::new(),
            };
            if self.members.contains(key) && !node.is_empty() {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            map.insert(key.clone(), Value::Object(node));
        }
        Value::Object(map)
    }

    /// Decodes a `FieldsV1` object; anything malformed is skipped.
    pub(crate) fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        let Value::Object(map) = value else {
            return set;
        };
        for (key, node) in map.iter().filter(|(key, _)| key.as_str() != ".") {
            let Value::Object(inner) = node else { continue };
            if inner.is_empty() || inner.contains_key(".") {
                set.members.insert(key.clone());
            }
            let child = FieldSet::from_fields_v1(node);
            if !child.is_empty() {
                set.children.insert(key.clone(), child);
            }
        }
        set
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        let keys: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for key in keys {
            prefix.push(key.clone());
            if self.members.contains(key) {
                out.push(prefix.clone());
            }
            if let Some(child) = self.children.get(key) {
                child.collect(prefix, out);
            }
            prefix.pop();
        }
    }

    fn add_map(&mut self, map: &Map<String, Value>, schema: Schema, root: bool, meta: bool) {
        for (name, value) in map {
            if is_stripped(root, meta, name) || value.is_null() {
                continue;
            }
            let element = format!("f:{name}");
            let child_schema = schema.child(name);
            match value {
                Value::Object(inner) if !inner.is_empty() => {
                    let child = self.children.entry(element).or_default();
                    child.add_map(inner, child_schema, false, root && name == "metadata");
                }
                Value::Array(items) if !items.is_empty() => match schema.list_strategy(name) {
                    ListStrategy::Atomic => {
                        self.members.insert(element);
                    }
                    strategy => {
                        let child = self.children.entry(element).or_default();
                        for item in items {
                            let Some(item_element) = item_element(item, strategy) else {
                                continue;
                            };
                            child.members.insert(item_element.clone());
                            if let (ListStrategy::Keyed { .. }, Value::Object(inner)) =
                                (strategy, item)
                            {
                                child.children.entry(item_element).or_default().add_map(
                                    inner,
                                    child_schema,
                                    false,
                                    false,
                                );
                            }
                        }
                    }
                },
                _ => {
                    self.members.insert(element);
                }
            }
        }
    }
}

/// The path element of a list item: `k:{...}` for keyed lists (the key
/// fields the item has, sorted), `v:<json>` for sets. A key field that is
/// `null` counts as absent: an apply stores the item without its nulls, and
/// the stored item must be the one the same configuration names next time.
pub(crate) fn item_element(item: &Value, strategy: ListStrategy) -> Option<PathElement> {
    match strategy {
        ListStrategy::Keyed { keys } => {
            let mut sorted: Vec<&str> = keys.to_vec();
            sorted.sort_unstable();
            let parts: Vec<String> = sorted
                .iter()
                .filter_map(|key| {
                    let value = item.get(*key).filter(|value| !value.is_null())?;
                    Some(format!("{}:{value}", Value::from(*key)))
                })
                .collect();
            (!parts.is_empty()).then(|| format!("k:{{{}}}", parts.join(",")))
        }
        ListStrategy::Set => Some(format!("v:{item}")),
        ListStrategy::Atomic => None,
    }
}

/// A path as Kubernetes prints it in conflicts: `.spec.replicas`,
/// `.spec.containers[name="web"].image`, `.metadata.finalizers[="x"]`.
pub(crate) fn display_path(path: &[PathElement]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(key) = element.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(map) => map.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![key.to_owned()],
            };
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else {
            out.push_str(element);
        }
    }
    out
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManagedEntry {
    /// `manager`.
    pub(crate) manager: String,
    /// `operation`: `Apply` or `Update`.
    pub(crate) operation: String,
    /// `apiVersion` of the request that wrote the fields.
    pub(crate) api_version: String,
    /// `time`, RFC 3339.
    pub(crate) time: Option<String>,
    /// `subresource`, kept as read.
    pub(crate) subresource: Option<String>,
    /// `fieldsV1`, decoded.
    pub(crate) fields: FieldSet,
}

impl ManagedEntry {
    /// The entries in `object.metadata.managedFields`; malformed ones are
    /// dropped.
    pub(crate) fn read_all(object: &Value) -> Vec<ManagedEntry> {
        let Some(Value::Array(entries)) = object.pointer("/metadata/managedFields") else {
            return Vec::new();
        };
        let text = |entry: &Value, field: &str| {
            entry.get(field).and_then(Value::as_str).map(str::to_owned)
        };
        entries
            .iter()
            .filter_map(|entry| {
                Some(ManagedEntry {
                    manager: text(entry, "manager")?,
                    operation: text(entry, "operation")?,
                    api_version: text(entry, "apiVersion").unwrap_or_default(),
                    time: text(entry, "time"),
                    subresource: text(entry, "subresource"),
                    fields: FieldSet::from_fields_v1(entry.get("fieldsV1")?),
                })
            })
            .collect()
    }

    /// The entry as JSON.
    pub(crate) fn to_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), self.manager.clone().into());
        entry.insert("operation".into(), self.operation.clone().into());
        entry.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(time) = &self.time {
            entry.insert("time".into(), time.clone().into());
        }
        entry.insert("fieldsType".into(), "FieldsV1".into());
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(subresource) = &self.subresource {
            entry.insert("subresource".into(), subresource.clone().into());
        }
        Value::Object(entry)
    }
}

/// The current time as `managedFields[].time` spells it.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
