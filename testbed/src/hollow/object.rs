//! What the server does with the body of a write before it stores it:
//! checks that it is a JSON object of the kind, name and namespace the
//! request names, and sets the fields the server owns (`uid`,
//! `creationTimestamp`, `resourceVersion`, `generation`, and a CRD's
//! status).
//!
//! Functions of the body alone, apart from the store, so the rules can be
//! read (and changed) without the locking and announcing around them.

use std::collections::BTreeMap;

use relaymesh_apiserver::objects::new_uid;
use relaymesh_apiserver::{api_version, ApiError, Resource};
use serde_json::{json, Value};

use super::encoding::timestamp;

/// The body as a JSON object. kube sends apply bodies as JSON (which is
/// YAML too); YAML proper is not accepted here.
pub(super) fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(object) if object.is_object() => Ok(object),
        Ok(_) => Err(ApiError::BadRequest("the body is not an object".into())),
        Err(error) => Err(ApiError::BadRequest(format!(
            "the body is not JSON (a hollow cluster takes no YAML): {error}"
        ))),
    }
}

/// The body's `apiVersion` and `kind`, if given, must be the resource's.
pub(super) fn check_type(resource: &Resource, object: &Value) -> Result<(), ApiError> {
    let expected = api_version(resource.group(), resource.version());
    if let Some(found) = object.get("apiVersion").and_then(Value::as_str) {
        if found != expected {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({found}) does not match the expected API version ({expected})"
            )));
        }
    }
    if let Some(found) = object.get("kind").and_then(Value::as_str) {
        if found != resource.kind() {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({found}) does not match the expected kind ({})",
                resource.kind()
            )));
        }
    }
    Ok(())
}

/// The object's name: the path's, which the body must not contradict, or
/// the body's for a create.
pub(super) fn check_name(object: &Value, path: Option<&str>) -> Result<String, ApiError> {
    let body = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty());
    match (path, body) {
        (Some(path), Some(body)) if path != body => Err(ApiError::BadRequest(format!(
            "the name of the object ({body}) does not match the name on the URL ({path})"
        ))),
        (Some(path), _) => Ok(path.to_string()),
        (None, Some(body)) => Ok(body.to_string()),
        (None, None) => Err(ApiError::Invalid {
            field: "metadata.name".into(),
            message: "name is required (a hollow cluster has no generateName)".into(),
        }),
    }
}

pub(super) fn check_namespace(object: &Value, namespace: &str) -> Result<(), ApiError> {
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(found) if !found.is_empty() && found != namespace => Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// Sets what the server owns: name and namespace, `uid` and
/// `creationTimestamp` (kept from `live`), `resourceVersion`, `generation`
/// (bumped when anything but metadata and status changed), and `status`
/// (kept from `live`: it is written through its own subresource).
pub(super) fn stamp(
    object: &mut Value,
    live: Option<&Value>,
    name: &str,
    namespace: Option<&str>,
    resource_version: u64,
) {
    let kept = |field: &str| live.and_then(|live| live["metadata"].get(field)).cloned();
    let generation = match live {
        None => 1,
        Some(live) => {
            let previous = live["metadata"]["generation"].as_i64().unwrap_or(1);
            if content(live) == content(object) {
                previous
            } else {
                previous + 1
            }
        }
    };
    if let Some(live) = live {
        match live.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                if let Some(fields) = object.as_object_mut() {
                    fields.remove("status");
                }
            }
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let metadata = &mut object["metadata"];
    metadata["name"] = json!(name);
    match namespace {
        Some(namespace) => metadata["namespace"] = json!(namespace),
        None => {
            if let Some(fields) = metadata.as_object_mut() {
                fields.remove("namespace");
            }
        }
    }
    metadata["uid"] = kept("uid").unwrap_or_else(|| json!(new_uid()));
    metadata["creationTimestamp"] = kept("creationTimestamp").unwrap_or_else(|| json!(timestamp()));
    metadata["resourceVersion"] = json!(resource_version.to_string());
    metadata["generation"] = json!(generation);
}

/// What a change of bumps the generation: everything but the type,
/// metadata and status.
fn content(object: &Value) -> BTreeMap<&str, &Value> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, _)| {
            !matches!(
                field.as_str(),
                "apiVersion" | "kind" | "metadata" | "status"
            )
        })
        .map(|(field, value)| (field.as_str(), value))
        .collect()
}

/// A CRD's status as kube-apiserver writes it once the names are accepted
/// and the kind is served: Established at once.
pub(super) fn established(definition: &Value) -> Value {
    let now = timestamp();
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "message": message,
               "lastTransitionTime": now})
    };
    let versions: Vec<Value> = definition["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["storage"].as_bool().unwrap_or(false))
        .filter_map(|version| version.get("name").cloned())
        .collect();
    json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": definition["spec"]["names"].clone(),
        "storedVersions": versions,
    })
}
