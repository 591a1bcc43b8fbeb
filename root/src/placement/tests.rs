//! Placement parsing, object selection and bundle packing.

use relaymesh_protocol::BundleId;
use serde_json::json;

use super::*;

fn placement() -> Value {
    json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "storefront", "namespace": "shop"},
        "spec": {
            "workloads": [
                {"apiGroup": "apps", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "storefront"}}},
                {"kind": "ConfigMap", "names": ["storefront-config"]},
            ],
            "clusters": {"labelSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}},
            "maxClusters": 3,
            "spreadBy": "zone",
        }
    })
}

fn object(api_version: &str, kind: &str, namespace: Option<&str>, name: &str, app: &str) -> Value {
    let mut metadata = json!({"name": name, "labels": {"app": app}, "uid": "u-1", "resourceVersion": "7",
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"}});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": {"x": 1}, "status": {"y": 2}})
}

#[test]
fn reads_the_contract() {
    let spec = PlacementSpec::from_object(&placement()).expect("valid");
    assert_eq!(spec.workloads.len(), 2);
    assert_eq!(spec.target.max_clusters, Some(3));
    assert_eq!(spec.target.spread_by.as_deref(), Some("zone"));
    assert!(!spec.adopt, "adopt defaults to false");
    let selector = spec.target.selector.expect("selector");
    assert_eq!(selector.match_expressions[0].values, vec!["eu".to_string()]);
    let mut adopting = placement();
    adopting["spec"]["adopt"] = json!(true);
    assert!(PlacementSpec::from_object(&adopting).expect("valid").adopt);
}

#[test]
fn refuses_invalid_specs_naming_the_field() {
    let cases = [
        (json!({"workloads": []}), "spec.workloads"),
        (json!({"workloads": [{}]}), "spec.clusters"),
        (json!({"workloads": [{}], "clusters": {}}), "spec.clusters"),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "maxClusters": -1}),
            "spec.maxClusters",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "spreadBy": "zone"}),
            "spec.spreadBy",
        ),
        (
            json!({"workloads": [{"kind": 3}], "clusters": {"names": ["a"]}}),
            "spec.workloads[0].kind",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "adopt": "yes"}),
            "spec.adopt",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "statusGroupBy": ["region", "region"]}),
            "spec.statusGroupBy[1]",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "statusGroupBy": ["a", "b", "c", "d", "e"]}),
            "spec.statusGroupBy",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "statusGroupBy": [""]}),
            "spec.statusGroupBy[0]",
        ),
        (
            json!({"workloads": [{}], "clusters": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}),
            "spec.clusters.labelSelector.matchExpressions[0].operator",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"templates": "yes"}}),
            "spec.customization.templates",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"overides": []}}),
            "spec.customization.overides",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"overrides": [{"mergePatch": {}}, {}]}}),
            "spec.customization.overrides[1]",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"overrides": [{"jsonPatch": [{"op": "frobnicate", "path": "/a"}]}]}}),
            "spec.customization.overrides[0].jsonPatch",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"overrides": [{"mergePatch": 5}]}}),
            "spec.customization.overrides[0].mergePatch",
        ),
        (
            json!({"workloads": [{}], "clusters": {"names": ["a"]}, "customization": {"overrides": [{"mergePatch": {}, "clusterSelector": {"matchLabels": {"tier": 5}}}]}}),
            "spec.customization.overrides[0].clusterSelector.matchLabels.tier",
        ),
    ];
    for (spec, field) in cases {
        let object = json!({"metadata": {"name": "p", "namespace": "n"}, "spec": spec});
        match PlacementSpec::from_object(&object) {
            Err(PlacementError::Invalid { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{spec}: expected an error on {field}, got {other:?}"),
        }
    }
}

#[test]
fn reads_status_rules_and_refuses_a_bad_expression_naming_the_rule_and_position() {
    let mut placement = placement();
    assert!(PlacementSpec::from_object(&placement)
        .expect("valid")
        .status_rules
        .is_empty());
    placement["spec"]["statusRules"] = json!([
        {"name": "objects", "aggregate": "count"},
        {"name": "ready", "select": "object.status.readyReplicas", "aggregate": "sum",
         "filter": "object.kind == 'Deployment'", "groupBy": "region"},
    ]);
    let spec = PlacementSpec::from_object(&placement).expect("valid");
    let names: Vec<&str> = spec.status_rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["objects", "ready"]);
    assert_eq!(spec.status_rules[1].group_by.as_deref(), Some("region"));

    placement["spec"]["statusRules"][1]["select"] = json!("object.status.");
    let error = PlacementSpec::from_object(&placement).expect_err("bad CEL");
    let PlacementError::Invalid { field, message } = &error;
    assert_eq!(field, "spec.statusRules[1].select");
    assert!(
        message.starts_with("rule \"ready\": Syntax error at 1:15: "),
        "{message}"
    );
    assert!(
        error
            .to_string()
            .starts_with("spec.statusRules[1].select: rule \"ready\": Syntax error at 1:15: "),
        "{error}"
    );
    placement["spec"]["statusRules"] = json!({"ready": {}});
    assert!(matches!(
        PlacementSpec::from_object(&placement),
        Err(PlacementError::Invalid { field, .. }) if field == "spec.statusRules"
    ));
}

#[test]
fn selects_by_group_kind_name_labels_and_namespace() {
    let spec = PlacementSpec::from_object(&placement()).expect("valid");
    let deployment = object("apps/v1", "Deployment", Some("shop"), "web", "storefront");
    let other_app = object("apps/v1", "Deployment", Some("shop"), "db", "database");
    let other_namespace = object("apps/v1", "Deployment", Some("blog"), "web", "storefront");
    let config = object("v1", "ConfigMap", Some("shop"), "storefront-config", "x");
    let other_config = object("v1", "ConfigMap", Some("shop"), "other", "x");
    let own_kind = object(
        "relaymesh.dev/v1alpha1",
        "Placement",
        Some("shop"),
        "storefront-config",
        "x",
    );
    assert!(spec.selects_object(&deployment));
    assert!(!spec.selects_object(&other_app));
    assert!(!spec.selects_object(&other_namespace));
    assert!(spec.selects_object(&config));
    assert!(!spec.selects_object(&other_config));
    assert!(!spec.selects_object(&own_kind));
}

/// Found by the `bundle` fuzz target: without serde_json's correctly
/// rounded float parsing, reading a packed bundle back moved this number by
/// one unit in the last place, so packing the same objects twice gave two
/// bundle ids (and an agent would see drift that is not there).
#[test]
fn repacking_a_bundle_keeps_its_floats_and_its_id() {
    let text = r#"[{"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 9.999999999999995e35}}]"#;
    let objects: Vec<Value> = serde_json::from_str(text).expect("json");
    let packed = pack(&objects.iter().collect::<Vec<_>>());
    assert!(
        String::from_utf8_lossy(&packed).contains("9.999999999999995e+35"),
        "{}",
        String::from_utf8_lossy(&packed)
    );
    let read: Vec<Value> = serde_json::from_slice(&packed).expect("json");
    let repacked = pack(&read.iter().collect::<Vec<_>>());
    assert_eq!(BundleId::of(&repacked), BundleId::of(&packed));
}

#[test]
fn bundles_are_canonical_and_stripped() {
    let a = object("apps/v1", "Deployment", Some("shop"), "web", "storefront");
    let b = object("v1", "ConfigMap", Some("shop"), "storefront-config", "x");
    let one = build(
        &spec_of(&placement()),
        &[a.clone(), b.clone()],
        &mut Encoder::new(BundleEncoding::Json),
    )
    .expect("packs");
    let two = build(
        &spec_of(&placement()),
        &[b, a.clone()],
        &mut Encoder::new(BundleEncoding::Json),
    )
    .expect("packs");
    assert_eq!(
        one.json, two.json,
        "order of the root's objects does not matter"
    );
    assert_eq!(one.entry.bundles, two.entry.bundles);
    assert_eq!(one.objects, 2);
    let objects: Vec<Value> = serde_json::from_slice(&one.json).expect("json");
    assert_eq!(objects[0]["kind"], "ConfigMap", "core group sorts first");
    for object in &objects {
        assert!(object.get("status").is_none());
        assert!(object["metadata"].get("uid").is_none());
        assert!(object["metadata"].get("resourceVersion").is_none());
        assert_eq!(object["metadata"]["annotations"], json!({"keep": "me"}));
    }
    // Editing a selected object makes a new bundle.
    let mut edited = a;
    edited["spec"]["x"] = json!(2);
    let three = build(
        &spec_of(&placement()),
        &[edited],
        &mut Encoder::new(BundleEncoding::Json),
    )
    .expect("packs");
    assert_ne!(three.entry.bundles, one.entry.bundles);
    assert_eq!(one.entry.key, "placement/shop/storefront");
}

#[test]
fn compressed_bundles_hold_the_same_objects_under_their_own_id() {
    let a = object("apps/v1", "Deployment", Some("shop"), "web", "storefront");
    let b = object("v1", "ConfigMap", Some("shop"), "storefront-config", "x");
    let objects = [a, b];
    let json = build(
        &spec_of(&placement()),
        &objects,
        &mut Encoder::new(BundleEncoding::Json),
    )
    .expect("packs");
    let zstd = build(
        &spec_of(&placement()),
        &objects,
        &mut Encoder::new(BundleEncoding::Zstd),
    )
    .expect("packs");
    let bytes = zstd.bundle.as_deref().expect("encoded");
    assert!(relaymesh_protocol::bundle_encoding::is_compressed(bytes));
    assert_eq!(zstd.entry.bundles, vec![BundleId::of(bytes)]);
    assert_ne!(zstd.entry.bundles, json.entry.bundles);
    let read = relaymesh_protocol::bundle_encoding::objects_json(bytes).expect("reads");
    assert_eq!(read.as_ref(), &json.json[..]);
    assert!(json.bundle.is_none(), "a JSON bundle is its JSON");
    let again = build(
        &spec_of(&placement()),
        &objects,
        &mut Encoder::new(BundleEncoding::Zstd),
    )
    .expect("packs");
    assert_eq!(
        again.entry.bundles, zstd.entry.bundles,
        "the same objects, the same id"
    );
}

fn spec_of(placement: &Value) -> PlacementSpec {
    PlacementSpec::from_object(placement).expect("valid")
}
