//! The Tables of built-in kinds and CRDs, rendered whole: what kubectl
//! would print for each, cell by cell.

use std::time::Duration;

use super::super::resources::Source;
use super::cells::human_duration;
use super::*;

fn resource(group: &str, plural: &str) -> Resource {
    Resource {
        group: group.into(),
        version: "v1".into(),
        plural: plural.into(),
        singular: String::new(),
        kind: String::new(),
        namespaced: true,
        short_names: vec![],
        source: Source::Stored,
        builtin: true,
        status: false,
        schema: None,
        printer_columns: vec![],
        extra_categories: Vec::new(),
        validator: None,
        warner: None,
    }
}

fn headers(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn deployments_show_readiness() {
    let now = humantime::parse_rfc3339("2026-01-01T00:05:00Z").expect("a time");
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    let table = render(
        &resource("apps", "deployments"),
        &[deployment],
        IncludeObject::Metadata,
        "7",
        now,
    );
    assert_eq!(table["kind"], "Table");
    assert_eq!(
        headers(&table),
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    // No template and no selector: empty wide cells, as Go prints them.
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["web", "2/3", 3, 2, "5m", "", "", ""])
    );
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["metadata"]["resourceVersion"], "7");
}

#[test]
fn wide_columns_are_priority_one() {
    let now = humantime::parse_rfc3339("2026-01-01T00:05:00Z").expect("a time");
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "replicas": 2,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "api"]}],
            },
            "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.27"},
                {"name": "sidecar", "image": "busybox:1.36"},
            ]}},
        },
    });
    let table = render(
        &resource("apps", "deployments"),
        &[deployment],
        IncludeObject::None,
        "1",
        now,
    );
    assert_eq!(
        headers(&table),
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let priorities: Vec<&Value> = table["columnDefinitions"]
        .as_array()
        .map(|columns| columns.iter().map(|column| &column["priority"]).collect())
        .unwrap_or_default();
    assert_eq!(
        priorities,
        [
            &json!(0),
            &json!(0),
            &json!(0),
            &json!(0),
            &json!(0),
            &json!(1),
            &json!(1),
            &json!(1)
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web",
            "0/2",
            0,
            0,
            "5m",
            "nginx,sidecar",
            "nginx:1.27,busybox:1.36",
            "app=web,tier in (api,front)"
        ])
    );
}

#[test]
fn pods_show_readiness_status_and_restarts() {
    let now = humantime::parse_rfc3339("2026-01-01T01:00:00Z").expect("a time");
    let pending = json!({
        "metadata": {"name": "solo", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "solo"}]},
        "status": {"phase": "Pending"},
    });
    let crashing = json!({
        "metadata": {"name": "crash", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 3,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:58:00Z"}}},
        ]},
    });
    let table = render(
        &resource("", "pods"),
        &[pending, crashing],
        IncludeObject::None,
        "1",
        now,
    );
    assert_eq!(
        headers(&table),
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["solo", "0/1", "Pending", "0", "60m", "<none>", "<none>", "<none>", "<none>"])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!([
            "crash",
            "1/2",
            "CrashLoopBackOff",
            "3 (2m ago)",
            "60m",
            "10.0.0.7",
            "n1",
            "<none>",
            "<none>"
        ])
    );
}

#[test]
fn services_show_addresses_ports_and_selector() {
    let now = SystemTime::now();
    let node_port = json!({
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
    });
    let external = json!({
        "metadata": {"name": "docs"},
        "spec": {"type": "ExternalName", "externalName": "docs.example.com"},
    });
    let table = render(
        &resource("", "services"),
        &[node_port, external],
        IncludeObject::None,
        "1",
        now,
    );
    assert_eq!(
        headers(&table),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age",
            "Selector"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web",
            "NodePort",
            "10.96.0.10",
            "<none>",
            "80:30080/TCP,53/UDP",
            "<unknown>",
            "app=web"
        ])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!([
            "docs",
            "ExternalName",
            "<none>",
            "docs.example.com",
            "<none>",
            "<unknown>",
            "<none>"
        ])
    );
}

#[test]
fn crd_columns_and_included_objects() {
    let mut widgets = resource("example.com", "widgets");
    widgets.printer_columns =
        vec![json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"})];
    let widget = json!({"metadata": {"name": "w"}, "spec": {"size": 4}});
    let table = render(
        &widgets,
        std::slice::from_ref(&widget),
        IncludeObject::Object,
        "1",
        SystemTime::now(),
    );
    assert_eq!(headers(&table), ["Name", "Size", "Age"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w", 4, "<unknown>"]));
    assert_eq!(table["rows"][0]["object"], widget);
    let table = render(
        &widgets,
        &[widget],
        IncludeObject::None,
        "1",
        SystemTime::now(),
    );
    assert!(table["rows"][0].get("object").is_none());
}

#[test]
fn an_extensions_columns_come_once() {
    let column =
        |name: &str, path: &str| json!({"name": name, "type": "integer", "jsonPath": path});
    let placements = Resource::new("relaymesh.dev", "v1alpha1", "placements", "Placement", true)
        .printer_columns(vec![
            column("Selected", ".status.clusters.selected"),
            column("Ready", ".status.clusters.ready"),
        ]);
    let placement =
        json!({"metadata": {"name": "p"}, "status": {"clusters": {"selected": 3, "ready": 2}}});
    let table = render(
        &placements,
        &[placement],
        IncludeObject::None,
        "1",
        SystemTime::now(),
    );
    assert_eq!(headers(&table), ["Name", "Selected", "Ready", "Age"]);
    assert_eq!(table["rows"][0]["cells"], json!(["p", 3, 2, "<unknown>"]));
}

#[test]
fn ages_read_like_kubectl() {
    let cases = [
        (5, "5s"),
        (150, "2m30s"),
        (900, "15m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (30 * 86400, "30d"),
    ];
    for (seconds, text) in cases {
        assert_eq!(human_duration(Duration::from_secs(seconds)), text);
    }
    assert!(is_requested(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    ));
}
