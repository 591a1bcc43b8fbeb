//! Server-side apply and update tracking tests.

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::patch::managed_fields::FieldSet;
use crate::patch::merge_keys::Schema;
use crate::patch::{apply_patch, track_update, PatchError, PatchKind, TypeInfo};

fn deployment_type() -> TypeInfo {
    TypeInfo {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        builtin: true,
    }
}

fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    let kind = PatchKind::Apply {
        field_manager: manager.into(),
        force,
    };
    let body = serde_json::to_vec(config).expect("serializable");
    apply_patch(&kind, live, &body, &deployment_type())
}

fn config(replicas: u32, env: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx", "env": env}]}},
        },
    })
}

/// The managers of `object` with their operation and fields.
fn managers(object: &Value) -> Vec<(String, String, Value)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let text = |f: &str| e[f].as_str().unwrap_or_default().to_owned();
                    (text("manager"), text("operation"), e["fieldsV1"].clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owns(object: &Value, manager: &str, pointer: &str) -> bool {
    managers(object)
        .iter()
        .any(|(m, _, fields)| m == manager && fields.pointer(pointer).is_some())
}

#[test]
fn apply_creates_with_fields_v1() {
    let out = apply(
        None,
        &config(2, json!([{"name": "A", "value": "1"}])),
        "kubectl",
        false,
    )
    .expect("creates");
    assert_eq!(out["spec"]["replicas"], 2);
    let entries = managers(&out);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, "kubectl");
    assert_eq!(entries[0].1, "Apply");
    let container = r#"/f:spec/f:template/f:spec/f:containers/k:{"name":"web"}"#;
    assert_eq!(
        entries[0].2.pointer(container),
        Some(&json!({".": {}, "f:name": {}, "f:image": {}, "f:env": {
            "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}},
        }}))
    );
    assert_eq!(
        entries[0].2.pointer("/f:metadata/f:labels/f:app"),
        Some(&json!({}))
    );
    assert!(entries[0].2.pointer("/f:metadata/f:name").is_none());
}

/// Found by the `api_patch` fuzz target: a configuration whose `metadata`
/// holds only its name left an empty `f:metadata` in the manager's
/// `fieldsV1`, which reads back as owning all of `metadata`, so applying
/// the same configuration again removed the namespace and other managers'
/// labels.
#[test]
fn reapplying_a_name_only_metadata_keeps_the_rest_of_metadata() {
    let live = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "a"}},
        "spec": {"replicas": 1},
    });
    let live = apply(Some(&live), &live, "kubectl", false).expect("first owner");
    let config = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1},
    });
    let once = apply(Some(&live), &config, "helm", false).expect("applies");
    assert_eq!(once["metadata"]["namespace"], "shop");
    let (_, _, fields) = managers(&once)
        .into_iter()
        .find(|(manager, _, _)| manager == "helm")
        .expect("helm manages fields");
    assert!(fields.get("f:metadata").is_none(), "{fields}");
    let twice = apply(Some(&once), &config, "helm", false).expect("applies again");
    assert_eq!(
        twice, once,
        "re-applying the same configuration changed the object"
    );
    assert_eq!(twice["metadata"]["labels"], json!({"team": "a"}));
}

/// Found by the `api_patch` fuzz target: a container without its `name`
/// was appended again by every apply of the same configuration.
#[test]
fn apply_refuses_a_keyed_list_item_without_its_key() {
    let config = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"image": "nginx"}]}}},
    });
    let error = apply(None, &config, "helm", false).expect_err("refused");
    assert!(
        matches!(&error, PatchError::Invalid(message) if message.contains(".spec.template.spec.containers")),
        "{error}"
    );
    let mut null_name = config;
    null_name["spec"]["template"]["spec"]["containers"][0]["name"] = Value::Null;
    assert!(apply(None, &null_name, "helm", false).is_err());
}

/// Found by the `api_patch` fuzz target: two containers under one name
/// were created as two, and the next apply of the same configuration merged
/// both into the first, so applying it twice gave another object.
/// Kubernetes refuses duplicate keys in an applied configuration.
#[test]
fn apply_refuses_duplicate_keys_in_a_keyed_list_or_a_set() {
    let config = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": null},
            {"name": "web", "image": "nginx:1.28"},
        ]}}},
    });
    let error = apply(None, &config, "helm", false).expect_err("refused");
    assert!(
        matches!(&error, PatchError::Invalid(message)
            if message.contains(".spec.template.spec.containers")
                && message.contains(r#"duplicate entries for key [name="web"]"#)),
        "{error}"
    );
    let finalizers = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a", "b", "a"]},
    });
    let error = apply(None, &finalizers, "helm", false).expect_err("refused");
    assert!(
        matches!(&error, PatchError::Invalid(message)
            if message.contains(r#".metadata.finalizers: Invalid value: duplicate entries for key [="a"]"#)),
        "{error}"
    );
    let distinct = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "web", "ports": [
                {"containerPort": 80, "protocol": "TCP"},
                {"containerPort": 80, "protocol": "UDP"},
            ]},
        ]}}},
    });
    let once = apply(None, &distinct, "helm", false).expect("distinct keys apply");
    let twice = apply(Some(&once), &distinct, "helm", false).expect("applies again");
    assert_eq!(twice, once);
}

/// Found while fixing the duplicate keys: a port applied with `protocol:`
/// empty was stored without it, but the configuration still named the item
/// by `{"containerPort":80,"protocol":null}`, which the stored item no
/// longer matched, so every apply of it appended the port again.
#[test]
fn reapplying_a_keyed_item_with_a_null_key_field_keeps_one_item() {
    let config = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "web", "ports": [{"containerPort": 80, "protocol": null}]},
        ]}}},
    });
    let once = apply(None, &config, "helm", false).expect("applies");
    assert_eq!(
        once["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80}])
    );
    let twice = apply(Some(&once), &config, "helm", false).expect("applies again");
    assert_eq!(
        twice, once,
        "re-applying the same configuration changed the object"
    );
    let port =
        r#"/f:spec/f:template/f:spec/f:containers/k:{"name":"web"}/f:ports/k:{"containerPort":80}"#;
    assert!(owns(&once, "helm", port), "{:?}", managers(&once));
}

#[test]
fn reapply_without_a_field_removes_it() {
    let first = config(
        2,
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
    );
    let live = apply(None, &first, "kubectl", false).expect("creates");
    let mut second = config(2, json!([{"name": "A", "value": "1"}]));
    second["spec"]
        .as_object_mut()
        .expect("map")
        .remove("replicas");
    let out = apply(Some(&live), &second, "kubectl", false).expect("applies");
    assert!(out["spec"].get("replicas").is_none());
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
    assert!(!owns(&out, "kubectl", "/f:spec/f:replicas"));
}

#[test]
fn conflicting_apply_fails_then_force_takes_ownership() {
    let live = apply(None, &config(2, json!([])), "kubectl", false).expect("creates");
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 5}});
    let Err(PatchError::Conflict { message, causes }) = apply(Some(&live), &other, "hpa", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    assert_eq!(
        causes,
        vec![("kubectl".to_owned(), ".spec.replicas".to_owned())]
    );

    let out = apply(Some(&live), &other, "hpa", true).expect("forced");
    assert_eq!(out["spec"]["replicas"], 5);
    assert!(owns(&out, "hpa", "/f:spec/f:replicas"));
    assert!(!owns(&out, "kubectl", "/f:spec/f:replicas"));
    assert!(owns(&out, "kubectl", "/f:spec/f:template"));

    // The same value shares ownership instead of conflicting.
    let shared = apply(Some(&out), &config(5, json!([])), "kubectl", false).expect("no conflict");
    assert!(owns(&shared, "hpa", "/f:spec/f:replicas"));
    assert!(owns(&shared, "kubectl", "/f:spec/f:replicas"));
}

#[test]
fn co_owned_field_survives_one_manager_dropping_it() {
    let live = apply(None, &config(3, json!([])), "a", false).expect("creates");
    let both = apply(Some(&live), &config(3, json!([])), "b", false).expect("shares");
    let mut without = config(3, json!([]));
    without["spec"]
        .as_object_mut()
        .expect("map")
        .remove("replicas");
    let out = apply(Some(&both), &without, "a", false).expect("applies");
    assert_eq!(out["spec"]["replicas"], 3);
    assert!(owns(&out, "b", "/f:spec/f:replicas"));
    assert!(!owns(&out, "a", "/f:spec/f:replicas"));
}

#[test]
fn conflict_with_an_update_manager_names_its_api_version() {
    let live = apply(None, &config(2, json!([])), "kubectl", false).expect("creates");
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(4);
    track_update(Some(&live), &mut scaled, "kubectl-client-side-apply");
    assert!(owns(
        &scaled,
        "kubectl-client-side-apply",
        "/f:spec/f:replicas"
    ));
    assert!(!owns(&scaled, "kubectl", "/f:spec/f:replicas"));
    let Err(PatchError::Conflict { message, .. }) =
        apply(Some(&scaled), &config(2, json!([])), "kubectl", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn apply_rejects_a_missing_manager_or_a_wrong_kind() {
    assert!(matches!(
        apply(None, &config(1, json!([])), "", false),
        Err(PatchError::BadPatch(_))
    ));
    let mut wrong = config(1, json!([]));
    wrong["kind"] = json!("StatefulSet");
    assert!(matches!(
        apply(None, &wrong, "m", false),
        Err(PatchError::Invalid(_))
    ));
    let live = apply(None, &config(1, json!([])), "m", false).expect("creates");
    let mut renamed = config(1, json!([]));
    renamed["metadata"]["name"] = json!("other");
    assert!(matches!(
        apply(Some(&live), &renamed, "m", false),
        Err(PatchError::Invalid(_))
    ));
    let yaml =
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n";
    let kind = PatchKind::Apply {
        field_manager: "m".into(),
        force: false,
    };
    let out = apply_patch(&kind, None, yaml, &deployment_type()).expect("yaml applies");
    assert_eq!(out["spec"]["replicas"], 4);
}

#[test]
fn track_update_creates_and_transfers_ownership() {
    let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    track_update(None, &mut created, "creator");
    assert!(owns(&created, "creator", "/f:data/f:a"));

    let mut updated = created.clone();
    updated["data"]["a"] = json!("9");
    updated["data"].as_object_mut().expect("map").remove("b");
    track_update(Some(&created), &mut updated, "editor");
    assert!(owns(&updated, "editor", "/f:data/f:a"));
    assert!(!owns(&updated, "creator", "/f:data/f:a"));
    assert!(!owns(&updated, "creator", "/f:data/f:b"));
    // The creator owned nothing else, so its entry is gone.
    assert_eq!(managers(&updated).len(), 1);
    assert_eq!(managers(&updated)[0].1, "Update");
}

proptest! {
    #[test]
    fn apply_of_own_fields_by_only_owner_is_identity(
        replicas in 0u32..10,
        names in proptest::collection::btree_set("[A-Z]{1,3}", 0..4),
    ) {
        let env: Vec<Value> = names.iter().map(|n| json!({"name": n, "value": n})).collect();
        let applied = config(replicas, Value::Array(env));
        let live = apply(None, &applied, "only", false).expect("creates");
        let again = apply(Some(&live), &applied, "only", false).expect("re-applies");
        prop_assert_eq!(&again, &live);
        let fields = FieldSet::of_object(&live, Schema::root("Deployment", true));
        prop_assert!(!fields.is_empty());
    }
}
