//! The schemas against the code they describe: every field a full
//! Placement sets is in the schema and read by the parser, every field of
//! the schema is read by the parser, what the root writes into a status
//! fits, and unknown fields are found at any depth.

use proptest::prelude::*;
use relaymesh_apiserver::check_schema;
use serde_json::{json, Value};

use super::*;
use crate::placement::PlacementSpec;

/// A Placement that sets every field the parser reads, each to a value
/// it accepts.
fn full_placement() -> Value {
    let selector = json!({
        "matchLabels": {"tier": "large"},
        "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}],
    });
    json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "workloads": [{
                "namespaces": ["shop"],
                "apiGroup": "apps",
                "kind": "Deployment",
                "names": ["web"],
                "labelSelector": selector,
            }],
            "clusters": {"labelSelector": selector, "names": ["edge-1"]},
            "maxClusters": 3,
            "spreadBy": "region",
            "adopt": true,
            "statusRules": [{
                "name": "largest",
                "select": "object.status.replicas",
                "filter": "object.kind == 'Deployment'",
                "aggregate": "topk",
                "groupBy": "region",
                "limit": 3,
            }],
            "statusGroupBy": ["region"],
            "customization": {
                "templates": false,
                "overrides": [
                    {
                        "clusterSelector": selector,
                        "objects": {"apiGroup": "apps", "kind": "Deployment", "names": ["web"]},
                        "mergePatch": {"spec": {"replicas": 5}},
                    },
                    {
                        "jsonPatch": [
                            {"op": "add", "path": "/metadata/labels/a", "value": "b"},
                            {"op": "copy", "path": "/metadata/labels/c", "from": "/metadata/labels/a"},
                        ],
                    },
                ],
            },
            "rollout": {
                "strategy": "Canary",
                "maxConcurrency": "25%",
                "minSuccessTime": "30s",
                "progressDeadline": "10m",
                "maxFailures": 1,
                "orderBy": "zone",
                "canary": {"groupBy": "region"},
                "paused": false,
                "gates": ["change-window"],
                "maxUnavailablePerGroup": {"max": 1, "label": "zone"},
            },
        },
    })
}

/// The full Placement with what it cannot set at the same time: a budget
/// per relay subtree instead of per label value.
fn full_variants() -> [Value; 2] {
    let mut by_relays = full_placement();
    by_relays["spec"]["rollout"]["maxUnavailablePerGroup"] =
        json!({"max": "50%", "groupBy": "Relays"});
    [full_placement(), by_relays]
}

/// Every path of `value` that holds a scalar or an empty list, with the
/// schema-style path (`spec.workloads.names`, list indices dropped) and
/// the JSON pointer to it.
fn leaves(value: &Value, path: &str, pointer: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(fields) => {
            for (field, value) in fields {
                let path = if path.is_empty() {
                    field.clone()
                } else {
                    format!("{path}.{field}")
                };
                leaves(value, &path, &format!("{pointer}/{field}"), found);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                leaves(item, path, &format!("{pointer}/{index}"), found);
            }
        }
        _ => found.push((path.to_string(), pointer.to_string())),
    }
}

/// Every property path of `schema` (`spec.rollout.canary.groupBy`), items
/// of lists folded into their list's path.
fn properties(schema: &Value, path: &str, found: &mut Vec<String>) {
    if let Some(items) = schema.get("items") {
        properties(items, path, found);
        return;
    }
    let Some(fields) = schema.get("properties").and_then(Value::as_object) else {
        found.push(path.to_string());
        return;
    };
    for (field, schema) in fields {
        let inner = if path.is_empty() {
            field.clone()
        } else {
            format!("{path}.{field}")
        };
        properties(schema, &inner, found);
    }
}

fn parses(object: &Value) -> Result<(), String> {
    PlacementSpec::from_object(object)
        .map(|_| ())
        .map_err(|error| error.to_string())
}

#[test]
fn a_full_placement_fits_the_schema_and_the_parser() {
    let object = full_placement();
    parses(&object).expect("the parser accepts it");
    let findings = check_schema(&placement(), &object);
    assert!(findings.unknown.is_empty(), "{:?}", findings.unknown);
    assert!(findings.mistyped.is_empty(), "{:?}", findings.mistyped);
}

#[test]
fn every_spec_field_of_the_schema_is_set_by_the_full_placement() {
    let mut set = Vec::new();
    for full in full_variants() {
        parses(&full).expect("the parser accepts it");
        leaves(&full["spec"], "spec", "/spec", &mut set);
    }
    let set: Vec<&str> = set.iter().map(|(path, _)| path.as_str()).collect();
    let mut described = Vec::new();
    properties(&placement()["properties"]["spec"], "spec", &mut described);
    for path in described {
        // Parts of a merge patch and a JSON patch's value are the user's.
        let covered = set
            .iter()
            .any(|leaf| *leaf == path || leaf.starts_with(&format!("{path}.")));
        assert!(
            covered,
            "{path} is in the schema but not in the full placement"
        );
    }
}

/// A field the schema names and gives a type is one the parser reads:
/// a value of another JSON type there is refused by both.
#[test]
fn the_parser_reads_every_typed_field_of_the_schema() {
    let whole = placement();
    for full in full_variants() {
        let mut set = Vec::new();
        leaves(&full["spec"], "spec", "/spec", &mut set);
        for (path, pointer) in set {
            let schema = schema_at(&whole, &path);
            let Some(kind) = schema.get("type").and_then(Value::as_str) else {
                continue; // any JSON, or int-or-string
            };
            // Of a type the schema refuses: a number for an object, an
            // object for anything else.
            let wrong = if kind == "object" {
                json!(7)
            } else {
                json!({"x": 1})
            };
            let mut object = full.clone();
            *object.pointer_mut(&pointer).expect("a leaf") = wrong;
            let findings = check_schema(&whole, &object);
            assert!(!findings.mistyped.is_empty(), "{path}: the schema took it");
            assert!(parses(&object).is_err(), "{path}: the parser took it");
        }
    }
}

/// The schema under the property path `path`.
fn schema_at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut schema = schema;
    for field in path.split('.') {
        while let Some(items) = schema.get("items") {
            schema = items;
        }
        schema = &schema["properties"][field];
    }
    while let Some(items) = schema.get("items") {
        schema = items;
    }
    schema
}

/// Where the parser itself refuses unknown fields, it knows exactly the
/// schema's.
#[test]
fn parts_the_parser_closes_name_the_same_fields() {
    for pointer in [
        "/spec/rollout",
        "/spec/rollout/canary",
        "/spec/rollout/maxUnavailablePerGroup",
        "/spec/customization",
        "/spec/customization/overrides/0",
        "/spec/statusRules/0",
    ] {
        let mut object = full_placement();
        object
            .pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("an object")
            .insert("bogus".into(), json!(1));
        let error = parses(&object).expect_err(pointer);
        assert!(error.contains(".bogus"), "{pointer}: {error}");
        let path = format!(
            "{}.bogus",
            pointer.trim_start_matches('/').replace('/', ".")
        );
        let path = path.replace(".0.", "[0].");
        assert_eq!(check_schema(&placement(), &object).unknown, [path]);
    }
}

#[test]
fn the_examples_placements_fit_the_schema() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut seen = 0;
    for entry in walk(std::path::Path::new(examples)) {
        let text = std::fs::read_to_string(&entry).expect("readable");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object = Value::deserialize(document).expect("YAML");
            if object["kind"] != "Placement" {
                continue;
            }
            seen += 1;
            let findings = check_schema(&placement(), &object);
            assert!(
                findings.unknown.is_empty() && findings.mistyped.is_empty(),
                "{}: {findings:?}",
                entry.display()
            );
        }
    }
    assert!(seen > 0, "no Placement under examples/");
}

use serde::Deserialize;

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            files.push(path);
        }
    }
    files
}

/// What the root writes into a Placement's status fits its schema: what
/// `render` writes (the revision and `clusters.updated` and `unknown`
/// included), the parts added to it (rules, groups, handover, shortfall)
/// and the rollout's state.
#[test]
fn the_status_the_root_writes_fits() {
    use relaymesh_protocol::{FailingCluster, PlacementStatus};

    let spec = &full_placement()["spec"];
    let reported = PlacementStatus {
        failing: vec![FailingCluster {
            cluster: "edge-1".into(),
            message: "Deployment shop/web: failed".into(),
        }],
        message: Some("edge-1: Deployment shop/web: failed".into()),
        ..PlacementStatus::default()
    };
    let now = "2026-11-27T10:00:00Z";
    let revision = relaymesh_protocol::BundleId([1; 32]);
    let mut status =
        crate::placement::status::render(&Value::Null, Some(2), 2, &reported, Some(revision), now);
    assert!(
        status["revision"].is_string() && status["clusters"]["updated"].is_u64(),
        "{status}"
    );
    // Written by the root once the status names unknown clusters.
    status["clusters"]["unknown"] = json!(["edge-9"]);
    let parsed = crate::placement::PlacementSpec::from_object(&full_placement()).expect("valid");
    crate::placement::status::add_summaries(
        &mut status,
        &parsed.status_group_by,
        &parsed.status_rules,
        &reported,
    );
    crate::placement::status::add_handover(&mut status, &["edge-2".to_string()]);
    crate::placement::status::add_shortfall(
        &mut status,
        &Value::Null,
        parsed.target.max_clusters,
        2,
        Some(2),
        now,
    );
    status["rollout"] = json!({
        "strategy": "Progressive", "revision": "6c1f", "previousRevision": "0b9e",
        "phase": "Progressing", "message": "1 of 2 clusters done", "startedAt": now,
        "canaryDone": true, "admitted": 2, "reached": 2,
        "clusters": {"waiting": 0, "updating": 1, "succeeded": 1, "failed": 0},
        "groups": [{"name": "eu", "selected": 2, "admitted": 2, "updating": 1, "succeeded": 1, "failed": 0}],
        "history": [{"revision": "0b9e", "outcome": "Complete", "startedAt": now, "at": now}],
    });
    assert!(
        status["rules"].is_array() && status["groups"].is_array(),
        "{status}"
    );
    let object = json!({"spec": spec, "status": status});
    let findings = check_schema(&placement(), &object);
    assert!(findings.unknown.is_empty(), "{:?}", findings.unknown);
    assert!(findings.mistyped.is_empty(), "{:?}", findings.mistyped);
}

/// A unknown field at any depth of a Placement is found, with its path.
#[test]
fn unknown_fields_are_found_at_every_depth() {
    let cases = [
        ("/spec", "maxCluster", "spec.maxCluster"),
        (
            "/spec/clusters",
            "labelSelectr",
            "spec.clusters.labelSelectr",
        ),
        (
            "/spec/clusters/labelSelector",
            "matchLabel",
            "spec.clusters.labelSelector.matchLabel",
        ),
        ("/spec/workloads/0", "kinds", "spec.workloads[0].kinds"),
        (
            "/spec/clusters/labelSelector/matchExpressions/0",
            "value",
            "spec.clusters.labelSelector.matchExpressions[0].value",
        ),
        (
            "/spec/rollout",
            "maxConcurency",
            "spec.rollout.maxConcurency",
        ),
        (
            "/spec/customization/overrides/1/jsonPatch/0",
            "form",
            "spec.customization.overrides[1].jsonPatch[0].form",
        ),
        ("", "extra", "extra"),
        ("/status", "phase", "status.phase"),
        ("/status/clusters", "readyy", "status.clusters.readyy"),
    ];
    for (pointer, field, path) in cases {
        let mut object = full_placement();
        object["status"] = json!({"clusters": {"selected": 1}});
        object
            .pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("an object")
            .insert(field.into(), json!("x"));
        assert_eq!(check_schema(&placement(), &object).unknown, [path]);
    }
    // Open parts take anything.
    let mut object = full_placement();
    object["spec"]["customization"]["overrides"][0]["mergePatch"]["anything"] = json!({"at": 1});
    object["spec"]["customization"]["overrides"][1]["jsonPatch"][0]["value"] = json!({"x": [1]});
    assert!(check_schema(&placement(), &object).unknown.is_empty());
}

proptest! {
    /// Any field name the schema does not know, put into any object of a
    /// full Placement, is the one unknown field found, named by its path;
    /// inside an open part (a merge patch) nothing is.
    #[test]
    fn any_unknown_field_at_any_depth_is_named(
        field in "[a-z][a-zA-Z]{0,12}",
        at in 0usize..64,
    ) {
        let placement_schema = placement();
        let mut objects = Vec::new();
        collect_objects(&full_placement(), "", &mut objects);
        let (pointer, path) = objects[at % objects.len()].clone();
        let mut object = full_placement();
        let fields = object.pointer_mut(&pointer).and_then(Value::as_object_mut).expect("an object");
        prop_assume!(!fields.contains_key(&field));
        prop_assume!(!property_known(&placement_schema, &path, &field));
        fields.insert(field.clone(), json!(1));
        let expected: Vec<String> = if schema_open(&placement_schema, &path) {
            Vec::new()
        } else if path.is_empty() {
            vec![field.clone()]
        } else {
            vec![format!("{path}.{field}")]
        };
        prop_assert_eq!(check_schema(&placement_schema, &object).unknown, expected);
    }
}

/// Every object inside `value` (the root included, the metadata and open
/// parts too), as (JSON pointer, field path).
fn collect_objects(value: &Value, path: &str, found: &mut Vec<(String, String)>) {
    fn walk(value: &Value, pointer: &str, path: &str, found: &mut Vec<(String, String)>) {
        match value {
            Value::Object(fields) => {
                found.push((pointer.to_string(), path.to_string()));
                for (field, value) in fields {
                    if pointer.is_empty() && field == "metadata" {
                        continue;
                    }
                    let inner = if path.is_empty() {
                        field.clone()
                    } else {
                        format!("{path}.{field}")
                    };
                    walk(value, &format!("{pointer}/{field}"), &inner, found);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    walk(
                        item,
                        &format!("{pointer}/{index}"),
                        &format!("{path}[{index}]"),
                        found,
                    );
                }
            }
            _ => {}
        }
    }
    walk(value, "", path, found);
}

/// The schema of the object at field path `path` (`spec.workloads[0]`).
fn schema_of<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut schema = schema;
    if path.is_empty() {
        return schema;
    }
    for part in path.split('.') {
        let (field, indices) = part
            .split_once('[')
            .map_or((part, ""), |(f, rest)| (f, rest));
        schema = &schema["properties"][field];
        for _ in indices.matches(']') {
            schema = &schema["items"];
        }
    }
    schema
}

fn schema_open(schema: &Value, path: &str) -> bool {
    // Inside an open part (a merge patch, a JSON patch's value) anything goes.
    let mut prefix = String::new();
    for part in path.split('.') {
        prefix = if prefix.is_empty() {
            part.to_string()
        } else {
            format!("{prefix}.{part}")
        };
        let at = schema_of(schema, &prefix);
        if at.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
            return true;
        }
    }
    false
}

fn property_known(schema: &Value, path: &str, field: &str) -> bool {
    let at = schema_of(schema, path);
    at["properties"].get(field).is_some() || at.get("additionalProperties").is_some()
}

/// The views' objects, as the inventory shapes them, fit their schemas.
#[test]
fn every_view_fits_its_schema() {
    use std::collections::BTreeMap;

    use relaymesh_protocol::{LinkStatus, NodeRecord, Role};

    let record = |name: &str, role: Role, parent: Option<&str>| NodeRecord {
        capacity: BTreeMap::from([("placements".to_string(), "3".to_string())]),
        refused_entries: 1,
        limit_refusals: Default::default(),
        name: name.into(),
        role,
        parent: parent.map(Into::into),
        labels: BTreeMap::from([
            ("region".to_string(), "eu".to_string()),
            (
                relaymesh_topology::placement::DRAINING_LABEL.to_string(),
                "true".to_string(),
            ),
        ])
        .into(),
        addresses: vec!["127.0.0.1:7000".into()],
        version: "0.1.0".into(),
        link: parent.map(|_| LinkStatus {
            connected: true,
            changed_unix_ms: 1_795_305_000_000,
            ..LinkStatus::default()
        }),
    };
    let inventory = crate::api::Inventory {
        version: 1,
        records: std::sync::Arc::new(
            [
                record("root", Role::Relay, None),
                record("eu", Role::Relay, Some("root")),
                record("edge-1", Role::Agent, Some("eu")),
            ]
            .map(std::sync::Arc::new)
            .into(),
        ),
        measured: std::sync::Arc::new(BTreeMap::from([(
            "eu".to_string(),
            LinkStatus {
                connected: true,
                rtt_micros: 5,
                ..LinkStatus::default()
            },
        )])),
        annotations: Default::default(),
    };
    use super::super::inventory::{objects, View};
    let views = [
        (View::Clusters, cluster()),
        (View::Relays, node("Relay")),
        (View::Agents, node("Agent")),
        (View::ClusterProfiles, cluster_profile()),
    ];
    for (view, schema) in views {
        assert!(schema["description"].is_string());
        let objects = objects(view, &inventory);
        assert!(!objects.is_empty(), "{view:?}");
        for object in objects {
            let findings = check_schema(&schema, &object);
            assert!(
                findings.unknown.is_empty() && findings.mistyped.is_empty(),
                "{view:?}: {findings:?} in {object}"
            );
        }
    }
}

/// The requests relayctl posts are refused with a misspelt field, named
/// by its path, and accepted as relayctl sends them.
#[test]
fn requests_refuse_unknown_fields() {
    use super::super::{cluster_labels, cordons, moves, revocations, rotations};

    let body = |kind: &str, spec: Value| {
        serde_json::to_vec(
            &json!({"apiVersion": "relaymesh.dev/v1alpha1", "kind": kind, "spec": spec}),
        )
        .expect("JSON")
    };
    let refused = |result: Result<(), relaymesh_apiserver::ApiError>, path: &str| {
        let error = result.expect_err(path).to_string();
        assert!(
            error.contains(&format!("strict decoding error: unknown field {path:?}")),
            "{error}"
        );
    };
    let move_spec = json!({"node": "edge-1", "to": "us", "ttlSeconds": 60});
    moves::parse_request(&body("Move", move_spec.clone())).expect("a move");
    let mut typo = move_spec.clone();
    typo["too"] = json!("us");
    refused(
        moves::parse_request(&body("Move", typo)).map(|_| ()),
        "spec.too",
    );

    let labels = json!({"cluster": "edge-1", "set": {"tier": "large"}, "remove": ["zone"],
        "annotations": {"set": {"example.com/owner": "a"}, "remove": []}});
    cluster_labels::parse_request(&body("ClusterLabels", labels.clone())).expect("a change");
    let mut typo = labels.clone();
    typo["annotations"]["unset"] = json!(["x"]);
    refused(
        cluster_labels::parse_request(&body("ClusterLabels", typo)).map(|_| ()),
        "spec.annotations.unset",
    );

    let token = json!({"name": "edge-1", "role": "agent", "parent": "eu",
        "candidates": ["us"], "ttl": "10m"});
    super::super::tokens::JoinToken::parse(&body("JoinToken", token.clone())).expect("a token");
    let mut typo = token.clone();
    typo["parents"] = json!(["us"]);
    refused(
        super::super::tokens::JoinToken::parse(&body("JoinToken", typo)).map(|_| ()),
        "spec.parents",
    );

    let cordon = json!({"cluster": "edge-1", "state": "Cordoned"});
    cordons::parse_request(&body("Cordon", cordon.clone())).expect("a cordon");
    let mut typo = cordon.clone();
    typo["stat"] = json!("Draining");
    refused(
        cordons::parse_request(&body("Cordon", typo)).map(|_| ()),
        "spec.stat",
    );

    let revocation = json!({"node": "edge-1"});
    revocations::parse_request(&body("Revocation", revocation)).expect("a revocation");
    refused(
        revocations::parse_request(&body("Revocation", json!({"nodes": "edge-1"}))).map(|_| ()),
        "spec.nodes",
    );

    rotations::Rotated::MeshCa
        .parse(&body("MeshCARotation", json!({"step": "Start"})))
        .expect("a step");
    refused(
        rotations::Rotated::MeshCa
            .parse(&body(
                "MeshCARotation",
                json!({"step": "Finish", "forced": true}),
            ))
            .map(|_| ()),
        "spec.forced",
    );
    rotations::parse_api_ca_request(&body("APICARotation", json!({"step": "Finish"})))
        .expect("a step");
    refused(
        rotations::parse_api_ca_request(&body(
            "APICARotation",
            json!({"step": "Start", "force": true}),
        ))
        .map(|_| ()),
        "spec.force",
    );
    rotations::parse_api_cert_request(&body("APICertificateRotation", json!({})))
        .expect("a rotation");
    refused(
        rotations::parse_api_cert_request(&body("APICertificateRotation", json!({"now": true}))),
        "spec.now",
    );
}

/// A user certificate request with a misspelt field is refused before
/// anything is signed.
#[test]
fn user_certificate_requests_refuse_unknown_fields() {
    let authority = relaymesh_node::pki::create_api_authority().expect("a CA");
    let key = relaymesh_node::pki::new_user_key("alice").expect("a key");
    let request = relaymesh_node::pki::der_to_pem(&key.csr_der, "CERTIFICATE REQUEST");
    let body = |spec: Value| {
        serde_json::to_vec(&json!({"apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "UserCertificate", "metadata": {"name": "alice"}, "spec": spec}))
        .expect("JSON")
    };
    let issue = |spec: Value| super::super::users::issue(&authority, "", &body(spec), |_| None);
    issue(json!({"group": "viewers", "request": request})).expect("issued");
    let error = issue(json!({"group": "viewers", "request": request, "expiration": 60}))
        .expect_err("a misspelt field")
        .to_string();
    assert!(
        error.contains("strict decoding error: unknown field \"spec.expiration\""),
        "{error}"
    );
}
