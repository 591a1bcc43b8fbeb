//! Strategic merge patch, as `k8s.io/apimachinery/pkg/util/strategicpatch`
//! applies it: what client-side `kubectl apply` and `kubectl patch` send for
//! built-in kinds.
//!
//! Maps merge recursively and `null` deletes a key. Lists merge as the
//! [`merge_keys`](super::merge_keys) table says: keyed lists element-wise by
//! their merge key, sets of primitives by union, everything else is replaced.
//! The directives understood are `$patch: replace | merge | delete` (in maps
//! and in list elements), `$retainKeys`, `$setElementOrder/<field>` and
//! `$deleteFromPrimitiveList/<field>`.

use serde_json::{Map, Value};

use super::merge_keys::{ListStrategy, Schema};
use super::PatchError;

const PATCH_DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Applies the strategic merge patch `patch` to `original`, whose root has
/// the schema `schema`.
pub(crate) fn apply(original: &Value, patch: &Value, schema: Schema) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadPatch(
            "a strategic merge patch must be a JSON object".into(),
        ));
    };
    let original = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    Ok(merge_map(original, patch, schema)?.map_or(Value::Null, Value::Object))
}

/// Merges `patch` into `original`. `None` means the map was deleted with
/// `$patch: delete`.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Schema,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(PATCH_DIRECTIVE) {
        None => {}
        Some(Value::String(s)) if s == "merge" => {}
        Some(Value::String(s)) if s == "replace" => {
            let mut replaced = Map::new();
            for (key, value) in patch {
                if key != PATCH_DIRECTIVE && !key.starts_with('$') {
                    if let Some(value) = new_value(value, schema, key)? {
                        replaced.insert(key.clone(), value);
                    }
                }
            }
            return Ok(Some(replaced));
        }
        Some(Value::String(s)) if s == "delete" => return Ok(None),
        Some(other) => {
            return Err(PatchError::BadPatch(format!(
                "invalid $patch directive {other} in a map"
            )))
        }
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(retain) = retain else {
            return Err(PatchError::BadPatch("$retainKeys must be a list".into()));
        };
        let retain: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        for key in patch.keys().filter(|key| !key.starts_with('$')) {
            if !patch[key].is_null() && !retain.contains(&key.as_str()) {
                return Err(PatchError::BadPatch(format!(
                    "$retainKeys does not list the patched key {key:?}"
                )));
            }
        }
        original.retain(|key, _| retain.contains(&key.as_str()));
    }

    for (key, values) in patch {
        let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
            continue;
        };
        let Value::Array(values) = values else {
            return Err(PatchError::BadPatch(format!("{key} must be a list")));
        };
        if let Some(Value::Array(list)) = original.get_mut(field) {
            list.retain(|item| !values.contains(item));
        }
    }

    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        let order = patch.get(&format!("{SET_ELEMENT_ORDER}{key}"));
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let merged = match (original.remove(key), value) {
            (Some(Value::Object(old)), Value::Object(patch)) => {
                merge_map(old, patch, schema.child(key))?.map(Value::Object)
            }
            (Some(Value::Array(old)), Value::Array(patch)) => {
                Some(Value::Array(merge_list(old, patch, schema, key, order)?))
            }
            _ => new_value(value, schema, key)?,
        };
        if let Some(merged) = merged {
            original.insert(key.clone(), merged);
        }
    }

    // An order for a list the patch does not otherwise touch.
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        if patch.contains_key(field) {
            continue;
        }
        if let Some(Value::Array(list)) = original.get_mut(field) {
            let strategy = schema.list_strategy(field);
            *list = reorder(std::mem::take(list), order, strategy)?;
        }
    }
    Ok(Some(original))
}

/// A patch value for a field the original lacks: the patch merged into an
/// empty value of its type, so its directives are applied and dropped.
fn new_value(value: &Value, schema: Schema, key: &str) -> Result<Option<Value>, PatchError> {
    Ok(match value {
        Value::Object(patch) => merge_map(Map::new(), patch, schema.child(key))?.map(Value::Object),
        Value::Array(patch) => Some(Value::Array(merge_list(
            Vec::new(),
            patch,
            schema,
            key,
            None,
        )?)),
        Value::Null => None,
        other => Some(other.clone()),
    })
}

/// Merges the patch list `patch` into the list field `field` of a node of
/// `schema`, then orders it by `$setElementOrder/<field>` if given.
fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    schema: Schema,
    field: &str,
    order: Option<&Value>,
) -> Result<Vec<Value>, PatchError> {
    let strategy = schema.list_strategy(field);
    let child = schema.child(field);
    let is_directive = |item: &Value, directive: &str| {
        item.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some(directive)
    };

    let merged = if patch.iter().any(|item| is_directive(item, "replace")) {
        let mut replaced = Vec::new();
        for item in patch.iter().filter(|item| !is_directive(item, "replace")) {
            replaced.extend(clean_item(item, child)?);
        }
        replaced
    } else {
        match strategy {
            ListStrategy::Atomic => {
                let mut replaced = Vec::new();
                for item in patch {
                    replaced.extend(clean_item(item, child)?);
                }
                replaced
            }
            ListStrategy::Set => {
                let mut merged = original;
                for item in patch {
                    if !merged.contains(item) {
                        merged.push(item.clone());
                    }
                }
                merged
            }
            ListStrategy::Keyed { keys } => merge_keyed(original, patch, keys[0], child)?,
        }
    };
    match order {
        Some(order) => reorder(merged, order, strategy),
        None => Ok(merged),
    }
}

/// Merges a list of maps element-wise by `key`.
fn merge_keyed(
    mut merged: Vec<Value>,
    patch: &[Value],
    key: &str,
    child: Schema,
) -> Result<Vec<Value>, PatchError> {
    for item in patch {
        let Value::Object(item) = item else {
            return Err(PatchError::BadPatch(format!(
                "list merged by {key:?} has a non-map element {item}"
            )));
        };
        let Some(wanted) = item.get(key) else {
            return Err(PatchError::BadPatch(format!(
                "map {} does not contain declared merge key {key:?}",
                Value::Object(item.clone())
            )));
        };
        let position = merged.iter().position(|old| old.get(key) == Some(wanted));
        let directive = item.get(PATCH_DIRECTIVE).and_then(Value::as_str);
        match (directive, position) {
            (Some("delete"), _) => merged.retain(|old| old.get(key) != Some(wanted)),
            (Some("replace"), Some(position)) => {
                let mut replacement = item.clone();
                replacement.remove(PATCH_DIRECTIVE);
                merged[position] =
                    merge_map(Map::new(), &replacement, child)?.map_or(Value::Null, Value::Object);
            }
            (_, Some(position)) => {
                let old = match merged[position].take() {
                    Value::Object(old) => old,
                    _ => Map::new(),
                };
                match merge_map(old, item, child)? {
                    Some(new) => merged[position] = Value::Object(new),
                    None => {
                        merged.remove(position);
                    }
                }
            }
            (_, None) => {
                if let Some(new) = merge_map(Map::new(), item, child)? {
                    merged.push(Value::Object(new));
                }
            }
        }
    }
    Ok(merged)
}

/// A list element for a replaced list, with directives dropped.
fn clean_item(item: &Value, child: Schema) -> Result<Option<Value>, PatchError> {
    match item {
        Value::Object(map) => Ok(merge_map(Map::new(), map, child)?.map(Value::Object)),
        other => Ok(Some(other.clone())),
    }
}

/// Orders `list` as `$setElementOrder` says: the listed elements first, in
/// the listed order, then the elements it does not mention in their current
/// relative order.
fn reorder(
    list: Vec<Value>,
    order: &Value,
    strategy: ListStrategy,
) -> Result<Vec<Value>, PatchError> {
    let Value::Array(order) = order else {
        return Err(PatchError::BadPatch(
            "$setElementOrder must be a list".into(),
        ));
    };
    let identity = |item: &Value| -> Value {
        match strategy {
            ListStrategy::Keyed { keys } => item.get(keys[0]).cloned().unwrap_or(Value::Null),
            _ => item.clone(),
        }
    };
    let mut rest: Vec<Option<Value>> = list.into_iter().map(Some).collect();
    let mut ordered = Vec::with_capacity(rest.len());
    for wanted in order {
        let wanted = identity(wanted);
        let found = rest
            .iter_mut()
            .find(|item| item.as_ref().is_some_and(|item| identity(item) == wanted));
        if let Some(item) = found.and_then(Option::take) {
            ordered.push(item);
        }
    }
    ordered.extend(rest.into_iter().flatten());
    Ok(ordered)
}
