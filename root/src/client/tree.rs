//! The tree `relayctl tree` prints, built from `Relay` and `Agent` objects.
//!
//! The API serves flat lists; each object names its parent in `spec.parent`.
//! [`build_tree`] nests them from the root (the node without a parent),
//! [`detached_trees`] gathers the nodes whose parent the root does not know
//! (a subtree whose inventory is still arriving), and [`render_text`] draws a
//! tree with box-drawing characters. No IO.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// Nesting deeper than this is not drawn: a real tree is far shallower, and
/// a corrupt inventory must not overflow the stack.
const MAX_DEPTH: usize = 256;

/// The nested tree from the root: every node as `{"name", "role",
/// "connected", "rttMicros", "revisionLag", "ackedRevision", "subtreeSize",
/// "bytesSent", "bytesReceived", "bundlesServed", "bundleBytesServed",
/// "refusedEntries", "limitRefusals" (limit name → count),
/// "lastTransitionTime" (when known),
/// "children": [...]}`, children sorted by name. Numbers the API does not
/// report are absent: a link's measurements (RTT, bytes, revisions) exist
/// only for the root's children, bundle transfers only for nodes with a
/// parent. `None` if no node is without a parent.
pub fn build_tree(nodes: &[Value]) -> Option<Value> {
    let index = Index::new(nodes);
    let root = index
        .nodes
        .values()
        .filter(|node| node.parent.is_none())
        // Several parentless nodes: prefer a relay, then the first name.
        .min_by_key(|node| (node.role != "relay", node.name))?;
    Some(index.nest(root.name, &mut BTreeSet::new(), 0))
}

/// The subtrees whose top names a parent that is not among `nodes`, sorted by
/// name; their tops also carry `"parent"`.
pub fn detached_trees(nodes: &[Value]) -> Vec<Value> {
    let index = Index::new(nodes);
    index
        .nodes
        .values()
        .filter(|node| {
            node.parent
                .is_some_and(|parent| !index.nodes.contains_key(parent))
        })
        .map(|node| {
            let mut tree = index.nest(node.name, &mut BTreeSet::new(), 0);
            if let (Value::Object(fields), Some(parent)) = (&mut tree, node.parent) {
                fields.insert("parent".into(), Value::from(parent));
            }
            tree
        })
        .collect()
}

/// Draws `tree` (from [`build_tree`] or [`detached_trees`]) one node a line:
///
/// ```text
/// root        relay  connected
/// ├─ eu       relay  connected     rtt 0.4ms  lag 0  subtree 1
/// │  └─ eu-1  agent  disconnected  (since 2026-11-21T23:50:00Z)
/// └─ us       relay  connected     rtt 0.3ms  lag 0  subtree 0
/// ```
///
/// The top line has link details only if the top has a parent (a detached
/// subtree): the root has no link.
pub fn render_text(tree: &Value) -> String {
    let mut lines = Vec::new();
    let show_top_link = tree.get("parent").is_some();
    collect_lines(
        tree,
        String::new(),
        String::new(),
        show_top_link,
        0,
        &mut lines,
    );
    let width = lines
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    let mut text = String::new();
    for (label, details) in lines {
        let padding = width - label.chars().count();
        let line = format!("{label}{:padding$}  {details}", "");
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// One node's fields, borrowed from its object.
struct Node<'a> {
    name: &'a str,
    role: &'a str,
    parent: Option<&'a str>,
    object: &'a Value,
}

/// The nodes by name, and their children by parent name.
struct Index<'a> {
    nodes: BTreeMap<&'a str, Node<'a>>,
    children: BTreeMap<&'a str, Vec<&'a str>>,
}

impl<'a> Index<'a> {
    fn new(objects: &'a [Value]) -> Self {
        let mut nodes = BTreeMap::new();
        for object in objects {
            let Some(name) = object["metadata"]["name"].as_str() else {
                continue;
            };
            let role = object["status"]["role"]
                .as_str()
                .unwrap_or(match object["kind"].as_str() {
                    Some("Agent") => "agent",
                    _ => "relay",
                });
            let parent = object["spec"]["parent"]
                .as_str()
                .filter(|parent| *parent != name);
            nodes.entry(name).or_insert(Node {
                name,
                role,
                parent,
                object,
            });
        }
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        // Nodes are visited by name, so every list comes out sorted.
        for node in nodes.values() {
            if let Some(parent) = node.parent.filter(|parent| nodes.contains_key(parent)) {
                children.entry(parent).or_default().push(node.name);
            }
        }
        Self { nodes, children }
    }

    /// The nested tree below `name`; `path` guards against parent cycles.
    fn nest(&self, name: &'a str, path: &mut BTreeSet<&'a str>, depth: usize) -> Value {
        let mut fields = Map::new();
        if let Some(node) = self.nodes.get(name) {
            let status = &node.object["status"];
            fields.insert("name".into(), Value::from(name));
            fields.insert("role".into(), Value::from(node.role));
            fields.insert(
                "connected".into(),
                Value::from(status["connected"].as_bool().unwrap_or(false)),
            );
            for key in [
                "rttMicros",
                "revisionLag",
                "ackedRevision",
                "subtreeSize",
                "bytesSent",
                "bytesReceived",
                "bundlesServed",
                "bundleBytesServed",
                "refusedEntries",
            ] {
                // Absent means not reported (a deeper link's measurements
                // stay with its parent): never shown as a zero.
                if let Some(value) = status[key].as_u64() {
                    fields.insert(key.into(), Value::from(value));
                }
            }
            let limit_refusals: Map<String, Value> = status["limitRefusals"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(limit, count)| Some((limit.clone(), Value::from(count.as_u64()?))))
                .collect();
            fields.insert("limitRefusals".into(), Value::Object(limit_refusals));
            if let Some(time) = status["lastTransitionTime"].as_str() {
                fields.insert("lastTransitionTime".into(), Value::from(time));
            }
        }
        path.insert(name);
        let mut children = Vec::new();
        if let Some(names) = self.children.get(name).filter(|_| depth < MAX_DEPTH) {
            for child in names {
                if !path.contains(child) {
                    children.push(self.nest(child, path, depth + 1));
                }
            }
        }
        path.remove(name);
        fields.insert("children".into(), Value::Array(children));
        Value::Object(fields)
    }
}

/// Appends the lines of `node` and its descendants: `(tree and name, details)`.
fn collect_lines(
    node: &Value,
    label_prefix: String,
    child_prefix: String,
    show_link: bool,
    depth: usize,
    lines: &mut Vec<(String, String)>,
) {
    let name = node["name"].as_str().unwrap_or("?");
    lines.push((format!("{label_prefix}{name}"), details(node, show_link)));
    let children = node["children"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if depth >= MAX_DEPTH {
        return;
    }
    for (position, child) in children.iter().enumerate() {
        let last = position + 1 == children.len();
        let (branch, continuation) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        collect_lines(
            child,
            format!("{child_prefix}{branch}"),
            format!("{child_prefix}{continuation}"),
            true,
            depth + 1,
            lines,
        );
    }
}

/// `relay  connected     rtt 0.4ms  lag 0  subtree 2`, or for a lost link
/// `relay  disconnected  (since ...)`.
fn details(node: &Value, show_link: bool) -> String {
    let role = node["role"].as_str().unwrap_or("?");
    let connected = node["connected"].as_bool().unwrap_or(false);
    let state = if connected {
        "connected"
    } else {
        "disconnected"
    };
    let mut text = format!("{role:<5}  {state:<12}");
    if let Some(placement) = node.get("placement") {
        let count = |field: &str| placement[field].as_u64().unwrap_or(0);
        text.push_str(&format!("  ready {}/{}", count("ready"), count("total")));
        for field in ["failed", "offline"] {
            if count(field) > 0 {
                text.push_str(&format!("  {field} {}", count(field)));
            }
        }
    }
    if show_link {
        text.push_str(&link_details(node, connected));
    }
    // Any node refuses requests over its limits, the root included.
    let refusals: Vec<String> = node["limitRefusals"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(limit, count)| Some((limit, count.as_u64()?)))
        .filter(|(_, count)| *count > 0)
        .map(|(limit, count)| format!("{count} {limit}"))
        .collect();
    if !refusals.is_empty() {
        text.push_str(&format!("  LIMITS: refused {}", refusals.join(", ")));
    }
    text
}

/// `  rtt 0.4ms  lag 0  subtree 2` or `  (since ...)`, and the integrity
/// alarm if any: what a node's parent says of its link.
fn link_details(node: &Value, connected: bool) -> String {
    let mut text = String::new();
    let number = |key: &str| node[key].as_u64().unwrap_or(0);
    if connected {
        // A link's measurements are reported only for the root's children.
        if let Some(rtt) = node["rttMicros"].as_u64() {
            text.push_str(&format!("  rtt {:.1}ms", rtt as f64 / 1000.0));
        }
        if let Some(lag) = node["revisionLag"].as_u64() {
            text.push_str(&format!("  lag {lag}"));
        }
        text.push_str(&format!("  subtree {}", number("subtreeSize")));
    } else if let Some(since) = node["lastTransitionTime"].as_str() {
        text.push_str(&format!("  (since {since})"));
    }
    let refused = number("refusedEntries");
    if refused > 0 {
        text.push_str(&format!(
            "  INTEGRITY ALARM: refused {refused} forged slice entries"
        ));
    }
    text
}

/// The relays of `tree` (from [`build_tree`]), top first: the nodes whose
/// children `relayctl tree --placement` asks about.
pub fn relays(tree: &Value) -> Vec<String> {
    let mut relays = Vec::new();
    let mut stack = vec![(tree, 0)];
    while let Some((node, depth)) = stack.pop() {
        if node["role"] == "relay" {
            if let Some(name) = node["name"].as_str() {
                relays.push(name.to_string());
            }
        }
        if depth < MAX_DEPTH {
            for child in node["children"].as_array().into_iter().flatten().rev() {
                stack.push((child, depth + 1));
            }
        }
    }
    relays
}

/// Puts on every node of `tree` how its subtree is doing with one
/// placement, as `"placement": {"pending", "applied", "ready", "failed",
/// "offline", "total"}`: each node's from what its parent said of its
/// children (`answers`: relay name → `PlacementSubtree` object), the top's
/// as the sum of its children's. A node whose parent did not answer, or did
/// not name it (nothing of the placement below it), gets nothing.
pub fn annotate(tree: &mut Value, answers: &BTreeMap<String, Value>) {
    annotate_node(tree, None, answers, 0);
    let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
    for child in tree["children"].as_array().into_iter().flatten() {
        for (field, value) in child["placement"].as_object().into_iter().flatten() {
            *sum.entry(field).or_default() += value.as_u64().unwrap_or(0);
        }
    }
    if !sum.is_empty() {
        let sum: Map<String, Value> = sum
            .into_iter()
            .map(|(field, value)| (field.to_string(), Value::from(value)))
            .collect();
        tree["placement"] = Value::Object(sum);
    }
}

/// Puts on the top of `tree` (annotated by [`annotate`]) the counts of
/// `placement`'s own status, the root's, as `relayctl status` shows them:
/// `total` is the clusters it selects, and the clusters none of its
/// children reports yet are `pending`. The top then says what the status
/// says, not the sum of what the children said a moment apart.
pub fn annotate_top(tree: &mut Value, placement: &Value) {
    let clusters = &placement["status"]["clusters"];
    if !clusters.is_object() {
        return;
    }
    let count = |field: &str| clusters[field].as_u64().unwrap_or(0);
    let mut top = Map::new();
    for field in ["pending", "applied", "ready", "failed", "offline"] {
        top.insert(field.into(), Value::from(count(field)));
    }
    top.insert("total".into(), Value::from(count("selected")));
    tree["placement"] = Value::Object(top);
}

fn annotate_node(
    node: &mut Value,
    counts: Option<&Value>,
    answers: &BTreeMap<String, Value>,
    depth: usize,
) {
    if let Some(counts) = counts {
        let count = |field: &str| counts[field].as_u64().unwrap_or(0);
        let fields = ["pending", "applied", "ready", "failed", "offline"];
        let mut placement: Map<String, Value> = fields
            .iter()
            .map(|field| (field.to_string(), Value::from(count(field))))
            .collect();
        let total: u64 = fields.iter().map(|field| count(field)).sum();
        placement.insert("total".into(), Value::from(total));
        node["placement"] = Value::Object(placement);
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let answer = node["name"].as_str().and_then(|name| answers.get(name));
    let Some(children) = node.get_mut("children").and_then(Value::as_array_mut) else {
        return;
    };
    for child in children {
        let counts = answer.and_then(|answer| {
            answer["children"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|entry| entry["name"] == child["name"])
        });
        annotate_node(child, counts, answers, depth + 1);
    }
}

/// A `Link` object as `relayctl link` prints it: one `field  value` line
/// each, in the order an operator reads them.
pub fn render_link(link: &Value) -> String {
    let text = |key: &str| link[key].as_str().unwrap_or("-").to_string();
    let number = |key: &str| link[key].as_u64().unwrap_or(0);
    let state = match link["connected"].as_bool() {
        Some(true) => "connected",
        _ => "disconnected",
    };
    let rtt = format!("{:.1}ms", number("rttMicros") as f64 / 1000.0);
    let rows = [
        (
            "node",
            link["metadata"]["name"].as_str().unwrap_or("-").to_string(),
        ),
        ("measured by", text("parent")),
        ("state", state.to_string()),
        ("since", text("lastTransitionTime")),
        ("rtt", rtt),
        ("bytes sent", number("bytesSent").to_string()),
        ("bytes received", number("bytesReceived").to_string()),
        ("acked revision", number("ackedRevision").to_string()),
        ("revision lag", number("revisionLag").to_string()),
        ("bundles served", number("bundlesServed").to_string()),
        ("bundle bytes", number("bundleBytesServed").to_string()),
    ];
    rows.iter()
        .map(|(field, value)| format!("{field:<15} {value}\n"))
        .collect()
}

#[cfg(test)]
mod tests;
