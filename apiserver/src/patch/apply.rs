//! Server-side apply and update tracking: who owns which fields.
//!
//! A simplified structured-merge-diff. An apply makes the applied
//! configuration's fields owned by `(field_manager, Apply)`; fields that
//! manager applied before and now omits are removed from the object unless
//! another manager owns them too; applying a value that differs from the
//! live one over a field another manager owns is a conflict unless forced,
//! which moves the ownership. Applying an equal value shares ownership.
//! Lists merge as the [`merge_keys`](super::merge_keys) table says (keyed
//! lists by their keys, sets by union, the rest atomically).
//!
//! Chosen where Kubernetes is not spelled out here: a `null` in an applied
//! configuration removes the field and is not owned; an entry's `time` only
//! moves when its field set changes, so re-applying the same configuration
//! is a no-op.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::managed_fields::{display_path, item_element, now, FieldSet, ManagedEntry, PathElement};
use super::merge_keys::{ListStrategy, Schema};
use super::{check_identity, keep_server_fields, set_metadata, PatchError, TypeInfo};

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";

/// Server-side apply of `body` (YAML or JSON) onto `live` by `manager`.
pub(crate) fn server_side_apply(
    live: Option<&Value>,
    body: &[u8],
    type_info: &TypeInfo,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    if manager.is_empty() {
        return Err(PatchError::BadPatch(
            "fieldManager is required for apply requests".into(),
        ));
    }
    let config: Value = crate::body::yaml(body).map_err(|error| match error {
        crate::body::BodyError::TooDeep(too_deep) => PatchError::TooDeep(too_deep),
        error => PatchError::BadPatch(format!("the apply body is not valid YAML or JSON: {error}")),
    })?;
    if !config.is_object() {
        return Err(PatchError::BadPatch(
            "the applied configuration must be a map".into(),
        ));
    }
    for (field, expected) in [
        ("apiVersion", &type_info.api_version),
        ("kind", &type_info.kind),
    ] {
        match config.get(field).and_then(Value::as_str) {
            None => return Err(PatchError::BadPatch(format!("{field} must be set"))),
            Some(value) if value != expected => {
                return Err(PatchError::Invalid(format!(
                    "{field}: Invalid value: {value:?}: expected {expected:?}"
                )))
            }
            Some(_) => {}
        }
    }
    let schema = Schema::root(&type_info.kind, type_info.builtin);
    check_list_keys(&config, schema, "")?;
    let empty = Value::Object(Map::new());
    let base = live.unwrap_or(&empty);
    let applied = FieldSet::of_object(&config, schema);
    let mut entries = ManagedEntry::read_all(base);
    let is_ours = |entry: &ManagedEntry| entry.manager == manager && entry.operation == APPLY;

    let mut conflicts = Vec::new();
    for path in applied.paths() {
        if same_value(base, &config, &path) {
            continue;
        }
        for entry in entries
            .iter()
            .filter(|e| !is_ours(e) && e.fields.contains(&path))
        {
            conflicts.push((entry.clone(), path.clone()));
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(&conflicts));
        }
        for (owner, path) in &conflicts {
            for entry in entries
                .iter_mut()
                .filter(|e| e.manager == owner.manager && e.operation == owner.operation)
            {
                entry.fields.remove(path);
            }
        }
    }

    let previous = entries
        .iter()
        .find(|e| is_ours(e))
        .map(|e| e.fields.clone());
    let mut object = base.clone();
    if let Some(previous) = &previous {
        let others: Vec<&FieldSet> = entries
            .iter()
            .filter(|e| !is_ours(e))
            .map(|e| &e.fields)
            .collect();
        // Shallowest first: a removed item takes its fields with it.
        let mut dropped = previous.difference(&applied).paths();
        dropped.sort_by_key(Vec::len);
        for path in dropped {
            if !others.iter().any(|set| set.contains_under(&path)) && !is_item_key(&path) {
                remove_path(&mut object, &path);
            }
        }
    }
    merge_config(&mut object, &config, schema, true);

    let time = now();
    match entries.iter_mut().find(|e| is_ours(e)) {
        Some(entry) => {
            if entry.fields != applied {
                entry.time = Some(time);
            }
            entry.fields = applied;
            entry.api_version = type_info.api_version.clone();
        }
        None => entries.push(ManagedEntry {
            manager: manager.to_owned(),
            operation: APPLY.to_owned(),
            api_version: type_info.api_version.clone(),
            time: Some(time),
            subresource: None,
            fields: applied,
        }),
    }
    if let Some(live) = live {
        check_identity(live, &object)?;
    }
    keep_server_fields(live, &mut object);
    write_entries(&mut object, entries);
    crate::depth::check_value(&object)?;
    Ok(object)
}

/// Refuses a configuration with an item of a keyed list that has none of
/// the list's keys (or only `null` ones), or with two items of a keyed list
/// or a set under the same key, as Kubernetes does (structured-merge-diff
/// validates the applied object without `AllowDuplicates`). An item without
/// a key can be neither owned nor matched, so each apply appended it again;
/// two items with one key were created as two and then both merged into the
/// first on the next apply.
fn check_list_keys(value: &Value, schema: Schema, path: &str) -> Result<(), PatchError> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    for (name, child) in map {
        let child_path = format!("{path}.{name}");
        let child_schema = schema.child(name);
        match child {
            Value::Object(_) => check_list_keys(child, child_schema, &child_path)?,
            Value::Array(items) => {
                let strategy = schema.list_strategy(name);
                if let ListStrategy::Keyed { keys } = strategy {
                    for item in items {
                        let has_key = keys
                            .iter()
                            .any(|key| item.get(*key).is_some_and(|value| !value.is_null()));
                        if !has_key {
                            return Err(PatchError::Invalid(format!(
                                "{child_path}: Invalid value: an element of this list must be a map with one of the keys {keys:?}"
                            )));
                        }
                        check_list_keys(item, child_schema, &child_path)?;
                    }
                }
                let mut seen = BTreeSet::new();
                for element in items.iter().filter_map(|item| item_element(item, strategy)) {
                    if !seen.insert(element.clone()) {
                        return Err(PatchError::Invalid(format!(
                            "{child_path}: Invalid value: duplicate entries for key {}",
                            display_path(&[element])
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// See [`super::track_update`].
pub(crate) fn track_update(old: Option<&Value>, new: &mut Value, manager: &str) {
    let kind = new
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // Without the caller's TypeInfo the kind is looked up as built in: a
    // custom kind not named in the table only gets the ObjectMeta entries.
    let schema = Schema::root(&kind, true);
    let empty = Value::Object(Map::new());
    let before = old.unwrap_or(&empty);
    let old_set = FieldSet::of_object(before, schema);
    let new_set = FieldSet::of_object(new, schema);
    let removed = old_set.difference(&new_set);
    let mut changed = FieldSet::default();
    for path in new_set.paths() {
        if !same_value(before, new, &path) {
            changed.insert(&path);
        }
    }

    let sent = ManagedEntry::read_all(new);
    let mut entries = if sent.is_empty() {
        ManagedEntry::read_all(before)
    } else {
        sent
    };
    for entry in &mut entries {
        for path in changed.paths().into_iter().chain(removed.paths()) {
            entry.fields.remove(&path);
        }
    }
    let ours = |e: &ManagedEntry| {
        e.manager == manager && e.operation == UPDATE && e.api_version == api_version
    };
    if !changed.is_empty() {
        let time = now();
        match entries.iter_mut().find(|e| ours(e)) {
            Some(entry) => {
                for path in changed.paths() {
                    entry.fields.insert(&path);
                }
                entry.time = Some(time);
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_owned(),
                operation: UPDATE.to_owned(),
                api_version,
                time: Some(time),
                subresource: None,
                fields: changed,
            }),
        }
    }
    write_entries(new, entries);
}

/// Writes `entries` (without empty ones) to `metadata.managedFields`.
fn write_entries(object: &mut Value, entries: Vec<ManagedEntry>) {
    let entries: Vec<Value> = entries
        .into_iter()
        .filter(|entry| !entry.fields.is_empty())
        .map(|entry| entry.to_json())
        .collect();
    if entries.is_empty() {
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.remove("managedFields");
        }
    } else {
        set_metadata(object, "managedFields", Value::Array(entries));
    }
}

/// Whether `path` names a key field of a keyed list item (which stays while
/// the item does).
fn is_item_key(path: &[PathElement]) -> bool {
    let [.., item, field] = path else {
        return false;
    };
    let (Some(key), Some(field)) = (item.strip_prefix("k:"), field.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|key| key.contains_key(field))
}

/// Whether `path` holds the same value in `a` and `b`. A list item counts
/// as the same when both have it, whatever its fields.
fn same_value(a: &Value, b: &Value, path: &[PathElement]) -> bool {
    let is_item = path.last().is_some_and(|e| !e.starts_with("f:"));
    match (value_at(a, path), value_at(b, path)) {
        (Some(_), Some(_)) if is_item => true,
        (a, b) => a == b,
    }
}

/// The value at `path` in `object`.
fn value_at<'a>(object: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |node, element| match element.strip_prefix("f:") {
            Some(name) => node.get(name),
            None => node
                .as_array()?
                .iter()
                .find(|item| item_matches(item, element)),
        })
}

/// Whether the list item `item` is the one `element` names.
fn item_matches(item: &Value, element: &str) -> bool {
    if let Some(key) = element.strip_prefix("k:") {
        let Ok(key) = serde_json::from_str::<Map<String, Value>>(key) else {
            return false;
        };
        key.iter()
            .all(|(name, value)| item.get(name) == Some(value))
    } else if let Some(value) = element.strip_prefix("v:") {
        serde_json::from_str::<Value>(value).is_ok_and(|value| *item == value)
    } else {
        false
    }
}

/// Removes the field or list item at `path`, and the maps and lists left
/// empty on the way.
fn remove_path(object: &mut Value, path: &[PathElement]) {
    let [first, rest @ ..] = path else { return };
    let child = match (first.strip_prefix("f:"), &mut *object) {
        (Some(name), Value::Object(map)) => {
            if rest.is_empty() {
                map.remove(name);
                return;
            }
            map.get_mut(name)
        }
        (None, Value::Array(items)) => {
            if rest.is_empty() {
                items.retain(|item| !item_matches(item, first));
                return;
            }
            items.iter_mut().find(|item| item_matches(item, first))
        }
        _ => None,
    };
    let Some(child) = child else { return };
    remove_path(child, rest);
    let now_empty = match child {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    if now_empty {
        remove_path(object, std::slice::from_ref(first));
    }
}

/// Merges an applied configuration into `target`: maps recursively, lists
/// by their strategy, `null` removes.
fn merge_config(target: &mut Value, config: &Value, schema: Schema, root: bool) {
    let (Value::Object(target), Value::Object(config)) = (&mut *target, config) else {
        *target = strip_nulls(config);
        return;
    };
    for (name, value) in config {
        if root && name == "metadata" {
            let meta = target
                .entry(name.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let mut value = value.clone();
            if let Value::Object(config_meta) = &mut value {
                for field in [
                    "resourceVersion",
                    "uid",
                    "creationTimestamp",
                    "managedFields",
                ] {
                    config_meta.remove(field);
                }
            }
            merge_config(meta, &value, schema.child(name), false);
            continue;
        }
        if value.is_null() {
            target.remove(name);
            continue;
        }
        let strategy = schema.list_strategy(name);
        match (target.get_mut(name), value) {
            (Some(Value::Array(live)), Value::Array(items)) if strategy != ListStrategy::Atomic => {
                merge_list(live, items, strategy, schema.child(name));
            }
            (Some(live @ Value::Object(_)), Value::Object(_)) => {
                merge_config(live, value, schema.child(name), false)
            }
            _ => {
                target.insert(name.clone(), strip_nulls(value));
            }
        }
    }
}

/// Merges applied list items into a keyed list or a set.
fn merge_list(live: &mut Vec<Value>, items: &[Value], strategy: ListStrategy, child: Schema) {
    for item in items {
        let Some(element) = item_element(item, strategy) else {
            live.push(strip_nulls(item));
            continue;
        };
        match live
            .iter_mut()
            .find(|old| item_element(old, strategy).as_ref() == Some(&element))
        {
            Some(old) if strategy != ListStrategy::Set => merge_config(old, item, child, false),
            Some(_) => {}
            None => live.push(strip_nulls(item)),
        }
    }
}

/// `value` without `null` map entries.
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// The 409 error for `conflicts`, worded as Kubernetes words it.
fn conflict_error(conflicts: &[(ManagedEntry, Vec<PathElement>)]) -> PatchError {
    let describe = |entry: &ManagedEntry| match entry.operation.as_str() {
        UPDATE => format!("{:?} using {}", entry.manager, entry.api_version),
        _ => format!("{:?}", entry.manager),
    };
    let causes: Vec<(String, String)> = conflicts
        .iter()
        .map(|(entry, path)| (entry.manager.clone(), display_path(path)))
        .collect();
    let message = match conflicts {
        [(entry, path)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            describe(entry),
            display_path(path)
        ),
        _ => {
            let mut owners: Vec<String> =
                conflicts.iter().map(|(entry, _)| describe(entry)).collect();
            owners.sort();
            owners.dedup();
            let mut lines = Vec::new();
            for owner in owners {
                lines.push(format!("conflicts with {owner}:"));
                for (_, path) in conflicts
                    .iter()
                    .filter(|(entry, _)| describe(entry) == owner)
                {
                    lines.push(format!("- {}", display_path(path)));
                }
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    PatchError::Conflict { message, causes }
}

#[cfg(test)]
mod tests;
