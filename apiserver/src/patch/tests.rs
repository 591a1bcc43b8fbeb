//! Tests of the patch engines, with the shapes `kubectl` 1.32 sends.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{apply_patch, track_update, PatchError, PatchKind, TypeInfo};

fn deployment_type() -> TypeInfo {
    TypeInfo {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        builtin: true,
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "resourceVersion": "7", "uid": "u-1",
            "creationTimestamp": "2025-01-01T00:00:00Z", "labels": {"app": "web"},
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.25",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                }, {"name": "sidecar", "image": "busybox"}]},
            },
        },
    })
}

fn smp(live: &Value, patch: Value) -> Result<Value, PatchError> {
    let body = serde_json::to_vec(&patch).expect("serializable");
    apply_patch(
        &PatchKind::StrategicMerge,
        Some(live),
        &body,
        &deployment_type(),
    )
}

fn pod_spec(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]
}

#[test]
fn smp_kubectl_image_change_keeps_other_container_fields() {
    let live = deployment();
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.27", "name": "web"}],
        }}},
    });
    let out = smp(&live, patch).expect("applies");
    let mut expected = live.clone();
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    expected["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
    assert_eq!(out, expected);
}

#[test]
fn smp_env_add_and_delete_by_name_in_element_order() {
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
        "containers": [{
            "name": "web",
            "$setElementOrder/env": [{"name": "C"}, {"name": "A"}],
            "env": [{"name": "C", "value": "3"}, {"name": "B", "$patch": "delete"}],
        }],
    }}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert_eq!(
        pod_spec(&out)["containers"][0]["env"],
        json!([{"name": "C", "value": "3"}, {"name": "A", "value": "1"}])
    );
    assert_eq!(pod_spec(&out)["containers"][1]["name"], "sidecar");
}

#[test]
fn smp_ports_merge_by_container_port() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{
        "name": "web",
        "ports": [{"containerPort": 443, "name": "https"}, {"containerPort": 8080}],
    }]}}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert_eq!(
        pod_spec(&out)["containers"][0]["ports"],
        json!([
            {"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 443, "protocol": "TCP", "name": "https"},
            {"containerPort": 8080},
        ])
    );
}

#[test]
fn smp_set_element_order_reorders_containers() {
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}],
    }}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert_eq!(pod_spec(&out)["containers"][0]["name"], "sidecar");
    assert_eq!(pod_spec(&out)["containers"][1]["image"], "nginx:1.25");
}

#[test]
fn smp_retain_keys_drops_unlisted_keys() {
    let mut live = deployment();
    live["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
    let out = smp(&live, patch).expect("applies");
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));

    let undeclared = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}});
    assert!(matches!(
        smp(&live, undeclared),
        Err(PatchError::BadPatch(_))
    ));
}

#[test]
fn smp_patch_replace_and_delete_directives() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "only", "image": "x"}, {"$patch": "replace"},
    ]}}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert_eq!(
        pod_spec(&out)["containers"],
        json!([{"name": "only", "image": "x"}])
    );

    let patch = json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"tier": "x"}}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert_eq!(
        out["spec"]["selector"],
        json!({"matchLabels": {"tier": "x"}})
    );

    let patch = json!({"metadata": {"labels": {"$patch": "delete"}}});
    let out = smp(&deployment(), patch).expect("applies");
    assert!(out["metadata"].get("labels").is_none());
}

#[test]
fn smp_primitive_lists_replace_unless_set_and_delete_from_primitive_list() {
    let mut live = deployment();
    live["metadata"]["finalizers"] = json!(["a", "b"]);
    live["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["x", "y"]);
    let patch = json!({
        "metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "args": ["z"]}]}}},
    });
    let out = smp(&live, patch).expect("applies");
    assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
    assert_eq!(pod_spec(&out)["containers"][0]["args"], json!(["z"]));
}

#[test]
fn smp_null_deletes_and_missing_merge_key_is_bad() {
    let out = smp(&deployment(), json!({"spec": {"replicas": null}})).expect("applies");
    assert!(out["spec"].get("replicas").is_none());
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    assert!(matches!(
        smp(&deployment(), patch),
        Err(PatchError::BadPatch(_))
    ));
}

#[test]
fn smp_rejects_custom_kinds_and_identity_changes() {
    let custom = TypeInfo {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        builtin: false,
    };
    let result = apply_patch(
        &PatchKind::StrategicMerge,
        Some(&deployment()),
        b"{}",
        &custom,
    );
    assert!(matches!(result, Err(PatchError::UnsupportedMediaType(_))));
    assert!(matches!(
        smp(&deployment(), json!({"metadata": {"name": "other"}})),
        Err(PatchError::Invalid(_))
    ));
    let out = smp(
        &deployment(),
        json!({"metadata": {"resourceVersion": "99", "uid": "x"}}),
    )
    .expect("applies");
    assert_eq!(out["metadata"]["resourceVersion"], "7");
    assert_eq!(out["metadata"]["uid"], "u-1");
}

#[test]
fn non_apply_patches_need_a_live_object_and_valid_json() {
    for kind in [PatchKind::Json, PatchKind::Merge, PatchKind::StrategicMerge] {
        let missing = apply_patch(&kind, None, b"{}", &deployment_type());
        assert_eq!(missing, Err(PatchError::NotFound));
        let garbage = apply_patch(&kind, Some(&deployment()), b"{nope", &deployment_type());
        assert!(matches!(garbage, Err(PatchError::BadPatch(_))));
    }
}

#[test]
fn merge_patch_null_deletes_and_lists_replace() {
    let body = br#"{"metadata":{"labels":{"app":null,"tier":"web"}},"spec":{"replicas":5}}"#;
    let out = apply_patch(
        &PatchKind::Merge,
        Some(&deployment()),
        body,
        &deployment_type(),
    )
    .expect("applies");
    assert_eq!(out["metadata"]["labels"], json!({"tier": "web"}));
    assert_eq!(out["spec"]["replicas"], 5);
}

/// Found by the `api_patch` fuzz target: json-patch's undo of a failed
/// patch panicked (`copy` to a path, then a `move` from it that fails).
#[test]
fn a_failing_json_patch_after_a_copy_is_refused_without_a_panic() {
    let body = br#"[{"op":"copy","from":"/spec/replicas","path":"/spec/minReadySeconds"},
        {"op":"move","from":"/spec/minReadySeconds","path":"/nowhere/paused"}]"#;
    let result = apply_patch(
        &PatchKind::Json,
        Some(&deployment()),
        body,
        &deployment_type(),
    );
    assert!(matches!(result, Err(PatchError::Invalid(_))), "{result:?}");
}

#[test]
fn json_patch_ops_and_failing_test_op() {
    let body = br#"[
        {"op":"test","path":"/spec/replicas","value":2},
        {"op":"replace","path":"/spec/replicas","value":3},
        {"op":"add","path":"/metadata/labels/tier","value":"web"},
        {"op":"remove","path":"/spec/template/spec/containers/1"}
    ]"#;
    let out = apply_patch(
        &PatchKind::Json,
        Some(&deployment()),
        body,
        &deployment_type(),
    )
    .expect("applies");
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(out["metadata"]["labels"]["tier"], "web");
    assert_eq!(
        pod_spec(&out)["containers"].as_array().map(Vec::len),
        Some(1)
    );

    let failing = br#"[{"op":"test","path":"/spec/replicas","value":9}]"#;
    let result = apply_patch(
        &PatchKind::Json,
        Some(&deployment()),
        failing,
        &deployment_type(),
    );
    assert!(matches!(result, Err(PatchError::Invalid(_))));
    let missing = br#"[{"op":"remove","path":"/spec/nothing"}]"#;
    let result = apply_patch(
        &PatchKind::Json,
        Some(&deployment()),
        missing,
        &deployment_type(),
    );
    assert!(matches!(result, Err(PatchError::Invalid(_))));
    let not_ops = br#"{"op":"remove"}"#;
    let result = apply_patch(
        &PatchKind::Json,
        Some(&deployment()),
        not_ops,
        &deployment_type(),
    );
    assert!(matches!(result, Err(PatchError::BadPatch(_))));
}

#[test]
fn track_update_records_a_patch_by_its_manager() {
    let live = deployment();
    let patched = smp(&live, json!({"spec": {"replicas": 4}})).expect("applies");
    let mut tracked = patched.clone();
    track_update(Some(&live), &mut tracked, "kubectl-patch");
    let entries = &tracked["metadata"]["managedFields"];
    assert_eq!(entries[0]["manager"], "kubectl-patch");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "apps/v1");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
}

/// A JSON value without nulls: scalars, short lists and small maps.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-d]", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-d]", value(), 0..4)
        .prop_map(|map| Value::Object(map.into_iter().collect()))
}

/// The RFC 7386 merge patch that turns `from` into `to` (both maps).
fn merge_diff(from: &Value, to: &Value) -> Value {
    let (Value::Object(from), Value::Object(to)) = (from, to) else {
        return to.clone();
    };
    let mut patch = serde_json::Map::new();
    for key in from.keys().filter(|key| !to.contains_key(*key)) {
        patch.insert(key.clone(), Value::Null);
    }
    for (key, value) in to {
        match from.get(key) {
            Some(old) if old == value => {}
            Some(old @ Value::Object(_)) if value.is_object() => {
                patch.insert(key.clone(), merge_diff(old, value));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(patch)
}

proptest! {
    #[test]
    fn merge_patch_of_a_diff_reproduces_the_target(from in object(), to in object()) {
        let patch = merge_diff(&from, &to);
        let patched = super::merge::apply(&from, &patch).expect("object patch");
        prop_assert_eq!(patched, to);
    }

    #[test]
    fn empty_strategic_merge_patch_is_identity(
        extra in object(),
        replicas in 0u32..5,
        env in proptest::collection::btree_set("[A-Z]{1,2}", 0..4),
    ) {
        let mut live = deployment();
        live["spec"]["extra"] = extra;
        live["spec"]["replicas"] = json!(replicas);
        live["spec"]["template"]["spec"]["containers"][0]["env"] =
            env.iter().map(|name| json!({"name": name, "value": "v"})).collect();
        prop_assert_eq!(smp(&live, json!({})).expect("applies"), live);
    }
}
