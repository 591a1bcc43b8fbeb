//! The `scale` subresource of Deployments, StatefulSets, ReplicaSets and
//! ReplicationControllers, as
//! kube-apiserver serves it: an `autoscaling/v1` `Scale` view of the
//! object's `spec.replicas`, read with `GET`, written with `PUT` or `PATCH`
//! (what `kubectl scale` sends: a merge patch `{"spec":{"replicas":N}}`).
//!
//! Only `spec.replicas` can change through it. `status.replicas` is what
//! the object's status says (the root runs no controllers, so usually 0),
//! and `status.selector` is the object's label selector in kubectl's text
//! form.

use serde_json::{json, Value};

use super::patch::{self, PatchKind, TypeInfo};
use super::resources::Resource;
use super::ApiError;

/// The kind, group and version of the view, as discovery announces them.
pub(super) const SCALE_GROUP: &str = "autoscaling";
/// See [`SCALE_GROUP`].
pub(super) const SCALE_VERSION: &str = "v1";
/// See [`SCALE_GROUP`].
pub(super) const SCALE_KIND: &str = "Scale";

/// The built-in resources that have a `scale` subresource.
const SCALABLE: [(&str, &str); 4] = [
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "replicasets"),
];

/// Whether `resource` has a `scale` subresource.
pub(super) fn is_scalable(resource: &Resource) -> bool {
    SCALABLE
        .iter()
        .any(|(group, plural)| resource.group == *group && resource.plural == *plural)
}

/// The `Scale` view of `object`.
pub(super) fn view(object: &Value) -> Value {
    let metadata = &object["metadata"];
    let mut scale_metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = metadata.get(field) {
            scale_metadata[field] = value.clone();
        }
    }
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        // Kubernetes defaults an unset `spec.replicas` to 1.
        .unwrap_or(1);
    let current = object
        .pointer("/status/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut status = json!({"replicas": current});
    if let Some(selector) = selector_text(object.pointer("/spec/selector")) {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": SCALE_KIND,
        "apiVersion": format!("{SCALE_GROUP}/{SCALE_VERSION}"),
        "metadata": scale_metadata,
        "spec": {"replicas": replicas},
        "status": status,
    })
}

/// The new `spec.replicas` a `PUT` of `body` (a `Scale`) asks for, and the
/// `resourceVersion` it was based on, if it names one.
pub(super) fn replicas_from_put(body: &Value) -> Result<(i64, Option<String>), ApiError> {
    let replicas = replicas_of(body)?;
    let version = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|version| !version.is_empty())
        .map(str::to_string);
    Ok((replicas, version))
}

/// The new `spec.replicas` after `patch` (of `kind`) on the view of `live`.
pub(super) fn replicas_from_patch(
    kind: &PatchKind,
    live: &Value,
    patch_body: &[u8],
) -> Result<i64, ApiError> {
    let type_info = TypeInfo {
        api_version: format!("{SCALE_GROUP}/{SCALE_VERSION}"),
        kind: SCALE_KIND.into(),
        builtin: true,
    };
    let patched = patch::apply_patch(kind, Some(&view(live)), patch_body, &type_info)
        .map_err(|error| ApiError::BadRequest(error.to_string()))?;
    replicas_of(&patched)
}

/// `object` with `spec.replicas` set.
pub(super) fn with_replicas(mut object: Value, replicas: i64) -> Value {
    if !object.get("spec").is_some_and(Value::is_object) {
        object["spec"] = json!({});
    }
    object["spec"]["replicas"] = json!(replicas);
    object
}

fn replicas_of(scale: &Value) -> Result<i64, ApiError> {
    let invalid = |message: String| ApiError::Invalid {
        field: "spec.replicas".into(),
        message,
    };
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(value) => match value.as_i64() {
            Some(replicas) if (0..=i64::from(i32::MAX)).contains(&replicas) => Ok(replicas),
            Some(replicas) => Err(invalid(format!(
                "Invalid value: {replicas}: must be greater than or equal to 0"
            ))),
            None => Err(invalid(format!(
                "Invalid value: {value}: must be an integer"
            ))),
        },
    }
}

/// A `LabelSelector` object as kubectl's `-l` text, for `status.selector`:
/// read as Placements read theirs, written in topology's canonical form.
/// A selector the object should never have held is left out.
fn selector_text(selector: Option<&Value>) -> Option<String> {
    let selector = selector?;
    // A ReplicationController's selector is a bare map of labels.
    let wrapped;
    let selector = if selector.get("matchLabels").is_none()
        && selector.get("matchExpressions").is_none()
        && selector.as_object().is_some_and(|map| !map.is_empty())
    {
        wrapped = serde_json::json!({ "matchLabels": selector });
        &wrapped
    } else {
        selector
    };
    let selector = crate::selector::from_json(selector, "spec.selector").ok()?;
    Some(relaymesh_topology::selector::render(&selector))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7", "labels": {"x": "y"}},
            "spec": {
                "replicas": 2,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
                },
            },
        })
    }

    #[test]
    fn the_view_carries_replicas_selector_and_version() {
        let scale = view(&deployment());
        assert_eq!(
            scale,
            json!({
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7"},
                "spec": {"replicas": 2},
                "status": {"replicas": 0, "selector": "app=web,tier in (a,b)"},
            })
        );
    }

    #[test]
    fn kubectl_scale_s_merge_patch_changes_only_replicas() {
        let replicas = replicas_from_patch(
            &PatchKind::Merge,
            &deployment(),
            br#"{"spec":{"replicas":5}}"#,
        )
        .expect("patches");
        assert_eq!(replicas, 5);
        let scaled = with_replicas(deployment(), replicas);
        assert_eq!(scaled["spec"]["replicas"], 5);
        assert_eq!(scaled["spec"]["selector"], deployment()["spec"]["selector"]);
        let refused = replicas_from_patch(
            &PatchKind::Merge,
            &deployment(),
            br#"{"spec":{"replicas":-1}}"#,
        );
        assert!(
            matches!(refused, Err(ApiError::Invalid { ref field, .. }) if field == "spec.replicas"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_put_names_replicas_and_its_version() {
        let body =
            json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": {"replicas": 3}});
        assert_eq!(
            replicas_from_put(&body).expect("valid"),
            (3, Some("7".to_string()))
        );
        let body = json!({"metadata": {"name": "web"}, "spec": {"replicas": "three"}});
        assert!(replicas_from_put(&body).is_err());
    }
}
