use serde_json::json;

use super::*;

fn object(kind: &str, name: &str, parent: Option<&str>, status: Value) -> Value {
    let mut spec = json!({"addresses": []});
    if let Some(parent) = parent {
        spec["parent"] = Value::from(parent);
    }
    let mut status = status;
    status["role"] = Value::from(if kind == "Agent" { "agent" } else { "relay" });
    json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    })
}

fn connected(rtt_micros: u64, subtree_size: u64) -> Value {
    json!({"connected": true, "rttMicros": rtt_micros, "revisionLag": 0, "subtreeSize": subtree_size})
}

fn mesh() -> Vec<Value> {
    vec![
        object("Relay", "us", Some("root"), connected(300, 0)),
        object("Relay", "eu", Some("root"), connected(400, 2)),
        object(
            "Relay",
            "eu-west",
            Some("eu"),
            json!({"connected": false, "lastTransitionTime": "2026-11-21T23:50:00Z", "subtreeSize": 1}),
        ),
        object(
            "Relay",
            "root",
            None,
            json!({"connected": true, "subtreeSize": 4}),
        ),
        object("Agent", "edge-1", Some("eu-west"), connected(1_250, 0)),
        object("Agent", "stray", Some("unknown-relay"), connected(900, 0)),
    ]
}

#[test]
fn nests_from_the_root_with_sorted_children() {
    let tree = build_tree(&mesh()).expect("there is a root");
    assert_eq!(tree["name"], "root");
    assert_eq!(tree["role"], "relay");
    assert_eq!(tree["subtreeSize"], 4);
    let names = |node: &Value| -> Vec<String> {
        node["children"]
            .as_array()
            .map(|children| {
                children
                    .iter()
                    .filter_map(|child| child["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(names(&tree), ["eu", "us"]);
    let eu = &tree["children"][0];
    assert_eq!(eu["rttMicros"], 400);
    assert_eq!(names(eu), ["eu-west"]);
    let eu_west = &eu["children"][0];
    assert_eq!(eu_west["connected"], false);
    assert_eq!(eu_west["lastTransitionTime"], "2026-11-21T23:50:00Z");
    assert_eq!(eu_west["children"][0]["name"], "edge-1");
    assert_eq!(eu_west["children"][0]["role"], "agent");
    assert_eq!(eu_west["children"][0]["children"], json!([]));
    let keys: BTreeSet<&str> = tree
        .as_object()
        .map(|fields| fields.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for key in [
        "name",
        "role",
        "connected",
        "subtreeSize",
        "limitRefusals",
        "children",
    ] {
        assert!(keys.contains(key), "{key}");
    }
    // What the API does not report stays absent, never a zero: the root has
    // no link, and edge-1's is measured by eu-west, not at the root.
    assert!(!keys.contains("rttMicros") && !keys.contains("bundlesServed"));
    assert_eq!(eu["revisionLag"], 0);
    assert!(!serde_json::to_string(&tree)
        .unwrap_or_default()
        .contains("stray"));
}

#[test]
fn detached_subtrees_are_separate() {
    let detached = detached_trees(&mesh());
    assert_eq!(detached.len(), 1);
    assert_eq!(detached[0]["name"], "stray");
    assert_eq!(detached[0]["parent"], "unknown-relay");
    assert_eq!(
        render_text(&detached[0]),
        "stray  agent  connected     rtt 0.9ms  lag 0  subtree 0\n"
    );
}

#[test]
fn renders_a_box_drawing_tree() {
    let tree = build_tree(&mesh()).expect("there is a root");
    let expected = "\
root             relay  connected
├─ eu            relay  connected     rtt 0.4ms  lag 0  subtree 2
│  └─ eu-west    relay  disconnected  (since 2026-11-21T23:50:00Z)
│     └─ edge-1  agent  connected     rtt 1.2ms  lag 0  subtree 0
└─ us            relay  connected     rtt 0.3ms  lag 0  subtree 0
";
    assert_eq!(render_text(&tree), expected);
}

#[test]
fn no_root_and_cycles() {
    assert_eq!(build_tree(&[]), None);
    let cycle = vec![
        object("Relay", "a", Some("b"), connected(1, 1)),
        object("Relay", "b", Some("a"), connected(1, 1)),
    ];
    assert_eq!(build_tree(&cycle), None);
    assert!(detached_trees(&cycle).is_empty());
}

#[test]
fn limit_refusals_show_on_every_node_the_root_included() {
    let mut nodes = mesh();
    for node in &mut nodes {
        match node["metadata"]["name"].as_str() {
            Some("root") => {
                node["status"]["limitRefusals"] = json!({"api-request-body": 2, "connections": 0});
            }
            Some("us") => {
                node["status"]["limitRefusals"] =
                    json!({"connections-per-address": 936, "joins-per-address": 5});
            }
            _ => {}
        }
    }
    let tree = build_tree(&nodes).expect("there is a root");
    assert_eq!(tree["limitRefusals"]["api-request-body"], 2);
    assert_eq!(tree["children"][0]["limitRefusals"], json!({}));
    let text = render_text(&tree);
    assert!(
        text.contains("root             relay  connected     LIMITS: refused 2 api-request-body\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "subtree 0  LIMITS: refused 936 connections-per-address, 5 joins-per-address\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("0 connections"),
        "zero counts are not shown: {text}"
    );
}

#[test]
fn a_link_not_reported_shows_no_numbers() {
    let node = json!({"name": "edge-9", "role": "agent", "parent": "eu-west", "connected": true, "subtreeSize": 0});
    assert_eq!(
        render_text(&node),
        "edge-9  agent  connected     subtree 0\n"
    );
}

#[test]
fn a_link_renders_one_field_per_line() {
    let link = json!({
        "apiVersion": "relaymesh.dev/v1alpha1", "kind": "Link",
        "metadata": {"name": "edge-9"}, "parent": "eu-west", "connected": true,
        "lastTransitionTime": "2026-11-25T10:00:00Z", "rttMicros": 1250,
        "bytesSent": 4096, "bytesReceived": 512, "ackedRevision": 14, "revisionLag": 0,
        "bundlesServed": 2, "bundleBytesServed": 204800
    });
    let text = render_link(&link);
    assert!(
        text.starts_with("node            edge-9\nmeasured by     eu-west\n"),
        "{text}"
    );
    assert!(text.contains("state           connected\n"), "{text}");
    assert!(text.contains("rtt             1.2ms\n"), "{text}");
    assert!(text.contains("acked revision  14\n"), "{text}");
    assert!(text.contains("bundle bytes    204800\n"), "{text}");
}

#[test]
fn every_subtree_shows_its_counts_from_what_its_parent_said() {
    let mut tree = json!({
        "name": "root", "role": "relay", "connected": true, "children": [
            {"name": "eu", "role": "relay", "connected": true, "subtreeSize": 2, "children": [
                {"name": "edge-1", "role": "agent", "connected": true, "subtreeSize": 0, "children": []},
                {"name": "edge-2", "role": "agent", "connected": true, "subtreeSize": 0, "children": []},
            ]},
            {"name": "us", "role": "relay", "connected": true, "subtreeSize": 0, "children": []},
        ]
    });
    assert_eq!(relays(&tree), ["root", "eu", "us"]);
    let answers = BTreeMap::from([
        (
            "root".to_string(),
            json!({"children": [{"name": "eu", "ready": 1, "failed": 1}]}),
        ),
        (
            "eu".to_string(),
            json!({"children": [{"name": "edge-1", "ready": 1}, {"name": "edge-2", "failed": 1}]}),
        ),
    ]);
    annotate(&mut tree, &answers);
    assert_eq!(tree["placement"]["total"], 2);
    assert_eq!(tree["placement"]["ready"], 1);
    assert_eq!(tree["children"][0]["placement"]["failed"], 1);
    assert_eq!(tree["children"][0]["children"][1]["placement"]["failed"], 1);
    assert!(
        tree["children"][1].get("placement").is_none(),
        "us holds none of it"
    );
    let text = render_text(&tree);
    assert!(
        text.starts_with("root          relay  connected     ready 1/2  failed 1\n"),
        "{text}"
    );
    assert!(
        text.contains("│  ├─ edge-1  agent  connected     ready 1/1  subtree 0\n"),
        "{text}"
    );
}

/// The top says what the placement's status says: a selected cluster no
/// child reports yet is pending there, not left out (issue 31: the tree
/// showed 1/1 ready while the status said 1/2).
#[test]
fn the_top_counts_what_the_status_counts() {
    let mut tree = json!({
        "name": "root", "role": "relay", "connected": true, "children": [
            {"name": "edge-1", "role": "agent", "connected": true, "subtreeSize": 0, "children": []},
        ]
    });
    let answers = BTreeMap::from([(
        "root".to_string(),
        json!({"children": [{"name": "edge-1", "ready": 1}]}),
    )]);
    annotate(&mut tree, &answers);
    assert_eq!(tree["placement"]["total"], 1, "the children's sum");
    let placement = json!({"status": {"clusters": {
        "selected": 2, "pending": 1, "applied": 0, "ready": 1, "failed": 0, "offline": 0,
    }}});
    annotate_top(&mut tree, &placement);
    assert_eq!(tree["placement"]["total"], 2);
    assert_eq!(tree["placement"]["pending"], 1);
    let text = render_text(&tree);
    assert!(text.starts_with("root"), "{text}");
    assert!(
        text.lines()
            .next()
            .is_some_and(|line| line.contains("ready 1/2")),
        "{text}"
    );
    // No status yet: the children's sum stays.
    let mut bare = tree.clone();
    annotate_top(&mut bare, &json!({}));
    assert_eq!(bare["placement"], tree["placement"]);
}
