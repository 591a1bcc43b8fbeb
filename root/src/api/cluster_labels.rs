//! The `ClusterLabels` object: labels set or removed at the root on one
//! cluster, without joining it again (`relayctl label cluster`).
//!
//! `POST .../clusterlabels` with `{"apiVersion":"relaymesh.dev/v1alpha1",
//! "kind":"ClusterLabels","spec":{"cluster":"edge-1","set":{"tier":"large"},
//! "remove":["zone"],"annotations":{"set":{"example.com/owner":"team-a"},
//! "remove":[]}}}` adds this change to what the root already changed on
//! that cluster and sends the result down to it (see
//! [`relaymesh_protocol::cluster_labels`]). This module checks requests and
//! shapes replies; it does no IO.

use std::collections::BTreeMap;

use relaymesh_protocol::ClusterLabels;
pub use relaymesh_topology::cluster_labels::{merge, LabelChange, MAX_ANNOTATION_BYTES};
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
pub(super) fn parse_request(body: &[u8]) -> Result<LabelChange, ApiError> {
    let (object, cluster) = cluster_request(body, KIND)?;
    super::schemas::refuse_unknown_fields(
        KIND,
        &super::schemas::cluster_labels_request(),
        &object,
    )?;
    let cluster = cluster.as_str();
    let spec = object.get("spec");
    let (set, remove) = set_and_remove(
        spec.and_then(|spec| spec.get("set")),
        spec.and_then(|spec| spec.get("remove")),
        "spec",
        "label",
        |key, value, path| {
            check_key(key, path)?;
            match value.and_then(|value| relaymesh_apiserver::label_error(key, value)) {
                Some(error) => Err(invalid(path, error)),
                None => Ok(()),
            }
        },
    )?;
    let (annotate, unannotate) = annotations(spec.and_then(|spec| spec.get("annotations")))?;
    if set.is_empty() && remove.is_empty() && annotate.is_empty() && unannotate.is_empty() {
        return Err(invalid(
            "spec",
            "Required value: labels or annotations to set or remove",
        ));
    }
    Ok(LabelChange {
        labels: ClusterLabels {
            node: cluster.to_string(),
            set,
            remove,
            annotations: BTreeMap::new(),
        },
        annotate,
        unannotate,
    })
}

/// `spec.annotations`: `{set: {KEY: VALUE}, remove: [KEY]}`.
fn annotations(value: Option<&Value>) -> Result<(BTreeMap<String, String>, Vec<String>), ApiError> {
    const FIELD: &str = "spec.annotations";
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok((BTreeMap::new(), Vec::new()));
    };
    let fields = value
        .as_object()
        .ok_or_else(|| invalid(FIELD, "must be an object: {set, remove}"))?;
    if let Some(unknown) = fields
        .keys()
        .find(|key| !["set", "remove"].contains(&key.as_str()))
    {
        return Err(invalid(
            &format!("{FIELD}.{unknown}"),
            "unknown field: annotations has set, remove",
        ));
    }
    set_and_remove(
        fields.get("set"),
        fields.get("remove"),
        FIELD,
        "annotation",
        |key, _, path| match relaymesh_apiserver::label_error(key, "") {
            Some(error) => Err(invalid(path, error)),
            None => Ok(()),
        },
    )
}

/// Keys to set (`PARENT.set`, an object of strings) and to remove
/// (`PARENT.remove`, a list), each checked by `check(key, value to set,
/// path)`; a key both set and removed is refused.
fn set_and_remove(
    set_value: Option<&Value>,
    remove_value: Option<&Value>,
    parent: &str,
    noun: &str,
    check: impl Fn(&str, Option<&str>, &str) -> Result<(), ApiError>,
) -> Result<(BTreeMap<String, String>, Vec<String>), ApiError> {
    let mut set = BTreeMap::new();
    if let Some(value) = set_value.filter(|value| !value.is_null()) {
        let items = value.as_object().ok_or_else(|| {
            invalid(
                &format!("{parent}.set"),
                format!("must be an object of {noun} keys and values"),
            )
        })?;
        for (key, value) in items {
            let path = format!("{parent}.set[{key:?}]");
            let value = value
                .as_str()
                .ok_or_else(|| invalid(&path, "must be a string"))?;
            check(key, Some(value), &path)?;
            set.insert(key.clone(), value.to_string());
        }
    }
    let mut remove = Vec::new();
    if let Some(value) = remove_value.filter(|value| !value.is_null()) {
        let items = value.as_array().ok_or_else(|| {
            invalid(
                &format!("{parent}.remove"),
                format!("must be a list of {noun} keys"),
            )
        })?;
        for (index, item) in items.iter().enumerate() {
            let path = format!("{parent}.remove[{index}]");
            let key = item
                .as_str()
                .ok_or_else(|| invalid(&path, "must be a string"))?;
            check(key, None, &path)?;
            if set.contains_key(key) {
                return Err(invalid(
                    &path,
                    format!("Invalid value: {key:?}: both set and removed"),
                ));
            }
            remove.push(key.to_string());
        }
    }
    Ok((set, remove))
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

/// What the root changed on a cluster, as a `ClusterLabels` object.
pub(super) fn object(labels: &ClusterLabels) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": labels.node},
        "spec": {
            "cluster": labels.node,
            "set": labels.set,
            "remove": labels.remove,
            "annotations": {"set": labels.annotations},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(spec: Value) -> Result<LabelChange, ApiError> {
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
        let merged = merge(Some(merge(None, first).expect("fits")), second).expect("fits");
        assert_eq!(merged.set, [("zone".to_string(), "a".to_string())].into());
        assert_eq!(merged.remove, ["tier"]);
    }

    #[test]
    fn annotations_are_set_removed_checked_and_bounded() {
        let first = request(json!({"cluster": "e", "annotations": {"set": {"example.com/owner": "team a", "site": "b7"}}}))
            .expect("valid");
        let second =
            request(json!({"cluster": "e", "annotations": {"remove": ["site"]}})).expect("valid");
        let merged = merge(Some(merge(None, first).expect("fits")), second).expect("fits");
        assert_eq!(
            merged.annotations,
            [("example.com/owner".to_string(), "team a".to_string())].into()
        );
        assert!(merged.set.is_empty());
        for (spec, field) in [
            (
                json!({"cluster": "e", "annotations": {"set": {"a b": "c"}}}),
                "spec.annotations.set[\"a b\"]",
            ),
            (
                json!({"cluster": "e", "annotations": {"set": {"a": 1}}}),
                "spec.annotations.set[\"a\"]",
            ),
            (
                json!({"cluster": "e", "annotations": {"set": {"a": "b"}, "remove": ["a"]}}),
                "spec.annotations.remove[0]",
            ),
            (
                json!({"cluster": "e", "annotations": {"add": {}}}),
                "spec.annotations.add",
            ),
            (
                json!({"cluster": "e", "annotations": []}),
                "spec.annotations",
            ),
        ] {
            let error = request(spec.clone()).expect_err("refused").to_string();
            assert!(error.contains(field), "{spec}: {error}");
        }
        let huge = request(json!({"cluster": "e", "annotations": {"set": {"big": "x".repeat(MAX_ANNOTATION_BYTES)}}}))
            .expect("valid on its own");
        // The loop refuses it; the API names the field (`serve`).
        let error = merge(None, huge).expect_err("too large").to_string();
        assert!(error.starts_with("Too long"), "{error}");
    }
}
