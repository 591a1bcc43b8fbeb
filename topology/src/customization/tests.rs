use super::*;
use proptest::prelude::*;
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{
                "name": "web",
                "image": "nginx",
                "env": [
                    {"name": "REGION", "value": "{{ cluster.labels.region }}"},
                    {"name": "WHERE", "value": "{{cluster.name}} in {{ cluster.labels.topology.kubernetes.io/zone }}"},
                    {"name": "ALERT", "value": "{{ $labels.instance }} is {{ .Value }}"}
                ]
            }]}}
        }
    })
}

#[test]
fn templates_take_the_clusters_name_and_labels_and_leave_other_templates() {
    let labels = labels(&[("region", "eu"), ("topology.kubernetes.io/zone", "eu-1a")]);
    let mut object = deployment();
    Customization::default()
        .apply(
            &mut object,
            Cluster {
                name: "edge-1",
                labels: &labels,
                annotations: &BTreeMap::new(),
            },
        )
        .expect("expands");
    let env = &object["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env[0]["value"], "eu");
    assert_eq!(env[1]["value"], "edge-1 in eu-1a");
    assert_eq!(env[2]["value"], "{{ $labels.instance }} is {{ .Value }}");
}

#[test]
fn a_missing_label_is_an_error_naming_the_cluster_the_label_and_the_place() {
    let labels = labels(&[("tier", "large")]);
    let mut object = deployment();
    let error = Customization::default()
        .apply(
            &mut object,
            Cluster {
                name: "edge-2",
                labels: &labels,
                annotations: &BTreeMap::new(),
            },
        )
        .expect_err("no region label");
    assert_eq!(
        error,
        CustomizationError::MissingLabel {
            cluster: "edge-2".into(),
            label: "region".into(),
            at: "/spec/template/spec/containers/0/env/0/value".into(),
        }
    );
    assert!(
        error.to_string().contains("has no label \"region\""),
        "{error}"
    );
}

#[test]
fn unknown_and_unclosed_cluster_templates_are_refused_without_a_cluster() {
    assert!(check(&deployment()).is_ok());
    let unknown = json!({"data": {"a": "{{ cluster.uid }}"}});
    assert!(matches!(
        check(&unknown),
        Err(CustomizationError::UnknownReference { ref at, .. }) if at == "/data/a"
    ));
    let unclosed = json!({"data": {"a/b": ["x", "{{ cluster.name"]}});
    assert!(matches!(
        check(&unclosed),
        Err(CustomizationError::Unclosed { ref at }) if at == "/data/a~1b/1"
    ));
}

#[test]
fn overrides_apply_in_order_to_the_clusters_and_objects_they_select() {
    let large = LabelSelector {
        match_labels: labels(&[("tier", "large")]),
        match_expressions: vec![],
    };
    let customization = Customization {
        templates: false,
        overrides: vec![
            Override {
                clusters: Some(large),
                objects: ObjectFilter {
                    kind: Some("Deployment".into()),
                    ..ObjectFilter::default()
                },
                patch: Patch::Merge(json!({"spec": {"replicas": 5}})),
            },
            Override {
                clusters: None,
                objects: ObjectFilter {
                    names: vec!["web".into()],
                    ..ObjectFilter::default()
                },
                patch: Patch::Json(
                    serde_json::from_value(json!([
                        {"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}}
                    ]))
                    .expect("a JSON patch"),
                ),
            },
            Override {
                clusters: None,
                objects: ObjectFilter {
                    kind: Some("ConfigMap".into()),
                    ..ObjectFilter::default()
                },
                patch: Patch::Merge(json!({"spec": null})),
            },
        ],
    };
    let large_labels = labels(&[("tier", "large")]);
    let small_labels = labels(&[("tier", "small")]);
    let mut on_large = deployment();
    customization
        .apply(
            &mut on_large,
            Cluster {
                name: "a",
                labels: &large_labels,
                annotations: &BTreeMap::new(),
            },
        )
        .expect("applies");
    let mut on_small = deployment();
    customization
        .apply(
            &mut on_small,
            Cluster {
                name: "b",
                labels: &small_labels,
                annotations: &BTreeMap::new(),
            },
        )
        .expect("applies");
    assert_eq!(on_large["spec"]["replicas"], 5);
    assert_eq!(on_small["spec"]["replicas"], 2);
    for object in [&on_large, &on_small] {
        assert_eq!(object["metadata"]["labels"]["patched"], "yes");
        // Templates are off: the strings stay.
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
            "{{ cluster.labels.region }}"
        );
    }
}

#[test]
fn a_json_patch_that_does_not_apply_names_its_override() {
    let customization = Customization {
        templates: true,
        overrides: vec![Override {
            clusters: None,
            objects: ObjectFilter::default(),
            patch: Patch::Json(
                serde_json::from_value(json!([{"op": "remove", "path": "/spec/nothing"}]))
                    .expect("a JSON patch"),
            ),
        }],
    };
    let labels = labels(&[("region", "eu"), ("topology.kubernetes.io/zone", "z")]);
    let error = customization
        .apply(
            &mut deployment(),
            Cluster {
                name: "a",
                labels: &labels,
                annotations: &BTreeMap::new(),
            },
        )
        .expect_err("nothing to remove");
    assert!(
        matches!(error, CustomizationError::Patch { index: 0, .. }),
        "{error}"
    );
}

proptest! {
    /// Text without a cluster template comes out unchanged, whatever braces
    /// it holds.
    #[test]
    fn text_without_cluster_templates_is_unchanged(text in "[a-z {}$.]{0,40}") {
        prop_assume!(!text.contains("cluster."));
        let mut value = Value::String(text.clone());
        let labels = BTreeMap::new();
        expand(&mut value, Cluster { name: "x", labels: &labels, annotations: &BTreeMap::new() }).expect("nothing to expand");
        prop_assert_eq!(value, Value::String(text));
    }

    /// Every label template becomes the label's value.
    #[test]
    fn label_templates_become_their_values(
        key in "[a-z][a-z0-9.-]{0,15}",
        value in "[a-zA-Z0-9 ._-]{0,20}",
        prefix in "[a-z ]{0,8}",
    ) {
        let labels: BTreeMap<String, String> = [(key.clone(), value.clone())].into();
        let mut text = Value::String(format!("{prefix}{{{{ cluster.labels.{key} }}}}{prefix}"));
        expand(&mut text, Cluster { name: "x", labels: &labels, annotations: &BTreeMap::new() }).expect("the label is there");
        prop_assert_eq!(text, Value::String(format!("{prefix}{value}{prefix}")));
    }
}

#[test]
fn annotation_templates_read_the_clusters_annotations_and_a_missing_one_fails() {
    let labels = labels(&[]);
    let annotations = BTreeMap::from([(
        "example.com/owner".to_string(),
        "team a, on call".to_string(),
    )]);
    let mut text = json!({"owner": "{{ cluster.annotations.example.com/owner }}"});
    expand(
        &mut text,
        Cluster {
            name: "edge-3",
            labels: &labels,
            annotations: &annotations,
        },
    )
    .expect("the annotation is there");
    assert_eq!(text["owner"], "team a, on call");

    let mut missing = json!({"site": "{{ cluster.annotations.site }}"});
    let error = expand(
        &mut missing,
        Cluster {
            name: "edge-3",
            labels: &labels,
            annotations: &annotations,
        },
    )
    .expect_err("no such annotation");
    assert_eq!(
        error,
        CustomizationError::MissingAnnotation {
            cluster: "edge-3".into(),
            annotation: "site".into(),
            at: "/site".into(),
        }
    );
    assert!(check(&json!({"a": "{{ cluster.annotations. }}"})).is_err());
    assert!(check(&json!({"a": "{{ cluster.annotations.site }}"})).is_ok());
}
