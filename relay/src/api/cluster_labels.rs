//! The `ClusterLabels` object: labels set or removed at the root on one
//! cluster, without joining it again (`relayctl label cluster`).
//!
//! `POST .../clusterlabels` with `{"apiVersion":"relaymesh.dev/v1alpha1",
//! "kind":"ClusterLabels","spec":{"cluster":"edge-1","set":{"tier":"large"},
//! "remove":["zone"]}}` adds this change to what the root already changed
//! on that cluster and sends the result down to it (see
//! [`relaymesh_protocol::cluster_labels`]). This module checks requests and
//! shapes replies; it does no IO.

use std::collections::BTreeMap;

use relaymesh_protocol::ClusterLabels;
use serde_json::{json, Map, Value};

use super::nodes::{check_type_meta, invalid, API_VERSION};
use super::ApiError;

/// The kind of the object.
const KIND: &str = "ClusterLabels";

/// The label prefix the agents own (labels they detect); the root does not
/// set or remove those.
const RESERVED_PREFIX: &str = "relaymesh.dev/";

/// A request about one cluster, of `kind`: the object, and its
/// `spec.cluster`, checked.
pub(super) fn cluster_request(
    body: &[u8],
    kind: &str,
) -> Result<(Map<String, Value>, String), ApiError> {
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {kind} object: {error}"))
    })?;
    check_type_meta(&object, kind)?;
    let cluster = object
        .get("spec")
        .and_then(|spec| spec.get("cluster"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("spec.cluster", "Required value"))?
        .to_string();
    relaymesh_protocol::name::validate(&cluster).map_err(|error| {
        invalid(
            "spec.cluster",
            format!("Invalid value: {cluster:?}: {error}"),
        )
    })?;
    Ok((object, cluster))
}

/// The change a `ClusterLabels` request asks for.
pub(super) fn parse_request(body: &[u8]) -> Result<ClusterLabels, ApiError> {
    let (object, cluster) = cluster_request(body, KIND)?;
    let cluster = cluster.as_str();
    let spec = object.get("spec");
    let mut set = BTreeMap::new();
    if let Some(value) = spec
        .and_then(|spec| spec.get("set"))
        .filter(|v| !v.is_null())
    {
        let fields = value
            .as_object()
            .ok_or_else(|| invalid("spec.set", "must be an object of label keys and values"))?;
        for (key, value) in fields {
            let path = format!("spec.set[{key:?}]");
            let value = value
                .as_str()
                .ok_or_else(|| invalid(&path, "must be a string"))?;
            check_key(key, &path)?;
            if let Some(error) = relaymesh_apiserver::label_error(key, value) {
                return Err(invalid(&path, error));
            }
            set.insert(key.clone(), value.to_string());
        }
    }
    let mut remove = Vec::new();
    if let Some(value) = spec
        .and_then(|spec| spec.get("remove"))
        .filter(|v| !v.is_null())
    {
        let items = value
            .as_array()
            .ok_or_else(|| invalid("spec.remove", "must be a list of label keys"))?;
        for (index, item) in items.iter().enumerate() {
            let path = format!("spec.remove[{index}]");
            let key = item
                .as_str()
                .ok_or_else(|| invalid(&path, "must be a string"))?;
            check_key(key, &path)?;
            if set.contains_key(key) {
                return Err(invalid(
                    &path,
                    format!("Invalid value: {key:?}: both set and removed"),
                ));
            }
            remove.push(key.to_string());
        }
    }
    if set.is_empty() && remove.is_empty() {
        return Err(invalid("spec", "Required value: labels to set or remove"));
    }
    Ok(ClusterLabels {
        node: cluster.to_string(),
        set,
        remove,
    })
}

fn check_key(key: &str, path: &str) -> Result<(), ApiError> {
    if key.starts_with(RESERVED_PREFIX) {
        return Err(invalid(
            path,
            format!("Invalid value: {key:?}: labels under {RESERVED_PREFIX} are relaymesh's own (the agent's; relayctl cordon|drain set theirs)"),
        ));
    }
    if let Some(error) = relaymesh_apiserver::label_error(key, "") {
        return Err(invalid(path, error));
    }
    Ok(())
}

/// `change` added to what the root changed before (`held`): a key set now
/// is no longer removed, and the other way round.
pub fn merge(held: Option<ClusterLabels>, change: ClusterLabels) -> ClusterLabels {
    let mut merged = held.unwrap_or_else(|| ClusterLabels {
        node: change.node.clone(),
        ..ClusterLabels::default()
    });
    for key in &change.remove {
        merged.set.remove(key);
        if !merged.remove.contains(key) {
            merged.remove.push(key.clone());
        }
    }
    for (key, value) in change.set {
        merged.remove.retain(|removed| *removed != key);
        merged.set.insert(key, value);
    }
    merged.remove.sort();
    merged
}

/// What the root changed on a cluster, as a `ClusterLabels` object.
pub(super) fn object(labels: &ClusterLabels) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": labels.node},
        "spec": {"cluster": labels.node, "set": labels.set, "remove": labels.remove},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(spec: Value) -> Result<ClusterLabels, ApiError> {
        let body = json!({"apiVersion": API_VERSION, "kind": KIND, "spec": spec});
        parse_request(body.to_string().as_bytes())
    }

    #[test]
    fn requests_are_checked_naming_the_field() {
        for (spec, field) in [
            (json!({"set": {"a": "b"}}), "spec.cluster"),
            (json!({"cluster": "edge-1"}), "spec"),
            (
                json!({"cluster": "edge-1", "set": {"a b": "c"}}),
                "spec.set[\"a b\"]",
            ),
            (
                json!({"cluster": "edge-1", "set": {"a": "-b-"}}),
                "spec.set[\"a\"]",
            ),
            (
                json!({"cluster": "edge-1", "set": {"relaymesh.dev/nodes": "9"}}),
                "spec.set[\"relaymesh.dev/nodes\"]",
            ),
            (
                json!({"cluster": "edge-1", "set": {"a": "b"}, "remove": ["a"]}),
                "spec.remove[0]",
            ),
        ] {
            let error = request(spec.clone()).expect_err("refused").to_string();
            assert!(error.contains(field), "{spec}: {error}");
        }
    }

    #[test]
    fn changes_add_up() {
        let first = request(json!({"cluster": "e", "set": {"tier": "large"}, "remove": ["zone"]}))
            .expect("valid");
        let second = request(json!({"cluster": "e", "set": {"zone": "a"}, "remove": ["tier"]}))
            .expect("valid");
        let merged = merge(Some(merge(None, first)), second);
        assert_eq!(merged.set, [("zone".to_string(), "a".to_string())].into());
        assert_eq!(merged.remove, ["tier"]);
    }
}
