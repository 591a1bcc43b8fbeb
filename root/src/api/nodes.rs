//! The `Relay` and `Agent` objects: the tree's nodes as Kubernetes objects.
//!
//! Built from the backend's [`NodeRecord`]s without IO. The parts a node cannot
//! say about itself (its children, the size of its subtree) are computed here
//! from the parent links of all records.
//!
//! What a parent measures of a link (RTT, bytes, acknowledged revision, lag)
//! stays with that parent (see docs/architecture.md, "Inventory"), so these
//! fields are present only for the root's own children, from the root's
//! measurements; for deeper nodes they are absent (not reported), never
//! zero. Connectivity and the bundle
//! transfers a parent completed climb the tree and are shown for every node
//! that has a parent.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use relaymesh_protocol::{LinkStatus, NodeRecord, Role};
use serde::Serialize;

/// The API group and version of relaymesh's own kinds.
pub(super) const API_VERSION: &str = "relaymesh.dev/v1alpha1";

/// A `Relay` or an `Agent`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NodeObject {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: NodeSpec,
    status: NodeStatus,
}

/// A `RelayList` or an `AgentList`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NodeList {
    api_version: &'static str,
    kind: String,
    metadata: ListMeta,
    items: Vec<NodeObject>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectMeta {
    name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    /// When the node joined, as it says (`relaymesh.dev/joined-at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    resource_version: String,
}

#[derive(Debug, Clone, Serialize)]
struct NodeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    addresses: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeStatus {
    role: &'static str,
    connected: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    rtt_micros: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_sent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_received: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundles_served: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundle_bytes_served: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    acked_revision: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision_lag: Option<u64>,
    subtree_size: usize,
    refused_entries: u64,
    limit_refusals: BTreeMap<String, u64>,
    children: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_transition_time: Option<String>,
    version: String,
}

/// The kind served for nodes of `role`: `Relay` or `Agent`.
pub(super) fn kind_of(role: Role) -> &'static str {
    match role {
        Role::Agent => "Agent",
        _ => "Relay",
    }
}

/// The objects of every node with `role`, sorted by name; `measured` holds
/// what the root measured of its children's links.
pub(super) fn list(
    records: &[Arc<NodeRecord>],
    measured: &BTreeMap<String, LinkStatus>,
    role: Role,
) -> NodeList {
    let tree = Tree::new(records, measured);
    let mut items: Vec<NodeObject> = records
        .iter()
        .filter(|record| record.role == role)
        .map(|record| tree.object(record))
        .collect();
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    items.dedup_by(|a, b| a.metadata.name == b.metadata.name);
    NodeList {
        api_version: API_VERSION,
        kind: format!("{}List", kind_of(role)),
        metadata: ListMeta {
            resource_version: String::new(),
        },
        items,
    }
}

/// The object of the node `name` with `role`, if there is one.
#[cfg(test)]
pub(super) fn get(records: &[Arc<NodeRecord>], role: Role, name: &str) -> Option<NodeObject> {
    let record = records
        .iter()
        .find(|record| record.role == role && record.name == name)?;
    Some(Tree::new(records, &BTreeMap::new()).object(record))
}

/// The parent links of all records, inverted.
struct Tree<'a> {
    measured: &'a BTreeMap<String, LinkStatus>,
    children: HashMap<&'a str, Vec<&'a str>>,
    subtree_sizes: HashMap<&'a str, usize>,
}

impl<'a> Tree<'a> {
    fn new(records: &'a [Arc<NodeRecord>], measured: &'a BTreeMap<String, LinkStatus>) -> Self {
        let known: HashMap<&str, &NodeRecord> = records
            .iter()
            .map(|record| (record.name.as_str(), &**record))
            .collect();
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for record in known.values() {
            if let Some(parent) = record.parent.as_deref() {
                if known.contains_key(parent) && parent != record.name {
                    children.entry(parent).or_default().push(&record.name);
                }
            }
        }
        for names in children.values_mut() {
            names.sort_unstable();
        }
        // Sizes bottom-up, leaves first, so a deep tree needs no recursion.
        // Nodes on a parent cycle (a corrupt inventory) are never finished and
        // keep what their finished descendants added.
        let mut subtree_sizes: HashMap<&str, usize> = HashMap::new();
        let mut pending: HashMap<&str, usize> = children
            .iter()
            .map(|(name, names)| (*name, names.len()))
            .collect();
        let mut ready: VecDeque<&str> = known
            .keys()
            .filter(|name| !pending.contains_key(*name))
            .copied()
            .collect();
        while let Some(name) = ready.pop_front() {
            let size = subtree_sizes.get(name).copied().unwrap_or(0);
            let parent = known
                .get(name)
                .and_then(|record| record.parent.as_deref())
                .filter(|parent| known.contains_key(parent) && *parent != name);
            if let Some(parent) = parent {
                let parent_size = subtree_sizes.entry(parent).or_insert(0);
                *parent_size = parent_size.saturating_add(size.saturating_add(1));
                if let Some(left) = pending.get_mut(parent) {
                    *left -= 1;
                    if *left == 0 {
                        ready.push_back(parent);
                    }
                }
            }
        }
        Self {
            measured,
            children,
            subtree_sizes,
        }
    }

    fn object(&self, record: &NodeRecord) -> NodeObject {
        let name = record.name.as_str();
        let link = record.link.as_ref();
        let is_root = record.parent.is_none();
        let measured = self.measured.get(name).filter(|_| link.is_some());
        let measured = |field: fn(&LinkStatus) -> u64| measured.map(field);
        let reported = |field: fn(&LinkStatus) -> u64| link.map(field);
        let last_transition_time = record
            .link
            .as_ref()
            .filter(|link| link.changed_unix_ms > 0)
            .map(|link| rfc3339(link.changed_unix_ms));
        NodeObject {
            api_version: API_VERSION,
            kind: kind_of(record.role),
            metadata: ObjectMeta {
                name: record.name.clone(),
                labels: record.labels.to_map(),
                creation_timestamp: relaymesh_node::store::joined_at_ms(record).map(rfc3339),
            },
            spec: NodeSpec {
                parent: record.parent.clone(),
                addresses: record.addresses.clone(),
            },
            status: NodeStatus {
                role: record.role.as_str(),
                connected: is_root || record.link.as_ref().is_some_and(|link| link.connected),
                rtt_micros: measured(|link| link.rtt_micros),
                bytes_sent: measured(|link| link.bytes_sent),
                bytes_received: measured(|link| link.bytes_received),
                bundles_served: reported(|link| link.bundles_served),
                bundle_bytes_served: reported(|link| link.bundle_bytes_served),
                acked_revision: measured(|link| link.acked_revision),
                revision_lag: measured(|link| link.revision_lag),
                subtree_size: self.subtree_sizes.get(name).copied().unwrap_or(0),
                refused_entries: record.refused_entries,
                limit_refusals: record.limit_refusals.clone(),
                children: self
                    .children
                    .get(name)
                    .map(|names| names.iter().map(|child| child.to_string()).collect())
                    .unwrap_or_default(),
                last_transition_time,
                version: record.version.clone(),
            },
        }
    }
}

/// A 422 for `field`.
pub(super) fn invalid(field: &str, message: impl Into<String>) -> super::ApiError {
    super::ApiError::Invalid {
        field: field.to_string(),
        message: message.into(),
    }
}

/// Checks that a relaymesh object's `apiVersion` and `kind`, where given,
/// are [`API_VERSION`] and `kind`.
pub(super) fn check_type_meta(
    object: &serde_json::Map<String, serde_json::Value>,
    kind: &str,
) -> Result<(), super::ApiError> {
    for (key, expected) in [("apiVersion", API_VERSION), ("kind", kind)] {
        match object.get(key) {
            None => {}
            Some(serde_json::Value::String(value)) if value == expected => {}
            Some(other) => {
                return Err(super::ApiError::BadRequest(format!(
                    "{key} must be {expected:?}, not {other}"
                )))
            }
        }
    }
    Ok(())
}

/// `unix_ms` as an RFC 3339 timestamp in UTC, to the second, as Kubernetes
/// writes `metav1.Time`.
/// A `Link`: one node's link to its parent, as its parent measured it and
/// answered through the tree (`GET .../agents/NAME/link`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LinkObject {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    /// The parent that measured the link and answered.
    parent: String,
    connected: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_transition_time: Option<String>,
    rtt_micros: u64,
    bytes_sent: u64,
    bytes_received: u64,
    /// In the parent's revisions, which are its own (each relay numbers its
    /// slice's changes), so comparable only with `revisionLag`.
    acked_revision: u64,
    revision_lag: u64,
    bundles_served: u64,
    bundle_bytes_served: u64,
}

pub(super) fn link_object(link: &super::NodeLink) -> LinkObject {
    let status = &link.status;
    LinkObject {
        api_version: API_VERSION,
        kind: "Link",
        metadata: ObjectMeta {
            name: link.name.clone(),
            labels: BTreeMap::new(),
            creation_timestamp: None,
        },
        parent: link.parent.clone(),
        connected: status.connected,
        last_transition_time: (status.changed_unix_ms > 0).then(|| rfc3339(status.changed_unix_ms)),
        rtt_micros: status.rtt_micros,
        bytes_sent: status.bytes_sent,
        bytes_received: status.bytes_received,
        acked_revision: status.acked_revision,
        revision_lag: status.revision_lag,
        bundles_served: status.bundles_served,
        bundle_bytes_served: status.bundle_bytes_served,
    }
}

/// A `PlacementSubtree`: how each child of relay `relay` is doing with
/// placement `namespace/placement`, as that relay says.
pub(super) fn subtree_object(
    relay: &str,
    namespace: &str,
    placement: &str,
    children: &[relaymesh_protocol::query::ChildCounts],
    more: u64,
) -> serde_json::Value {
    let children: Vec<serde_json::Value> = children
        .iter()
        .map(|child| {
            let counts = &child.counts;
            serde_json::json!({
                "name": child.child,
                "pending": counts.pending,
                "applied": counts.applied,
                "ready": counts.ready,
                "failed": counts.failed,
                "offline": counts.offline,
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "PlacementSubtree",
        "metadata": {"name": relay},
        "placement": {"namespace": namespace, "name": placement},
        "children": children,
        "more": more,
    })
}

pub(super) fn rfc3339(unix_ms: u64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(unix_ms);
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(name: &str, role: Role, parent: Option<&str>) -> NodeRecord {
        NodeRecord {
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
            name: name.into(),
            role,
            parent: parent.map(Into::into),
            labels: Default::default(),
            addresses: vec![],
            version: "0.1.0".into(),
            link: parent.map(|_| LinkStatus {
                connected: true,
                ..LinkStatus::default()
            }),
        }
    }

    fn mesh() -> Vec<Arc<NodeRecord>> {
        mesh_records().into_iter().map(Arc::new).collect()
    }

    fn mesh_records() -> Vec<NodeRecord> {
        vec![
            record("root", Role::Relay, None),
            record("eu", Role::Relay, Some("root")),
            record("us", Role::Relay, Some("root")),
            record("eu-west", Role::Relay, Some("eu")),
            record("edge-1", Role::Agent, Some("eu-west")),
            record("edge-2", Role::Agent, Some("root")),
            record("lost", Role::Agent, Some("nowhere")),
        ]
    }

    fn status_of(list: &NodeList, name: &str) -> serde_json::Value {
        let item = list
            .items
            .iter()
            .find(|item| item.metadata.name == name)
            .expect("the node is listed");
        serde_json::to_value(&item.status).expect("a status serializes")
    }

    #[test]
    fn subtree_sizes_and_children_follow_parent_links() {
        let relays = list(&mesh(), &BTreeMap::new(), Role::Relay);
        let names: Vec<_> = relays
            .items
            .iter()
            .map(|item| item.metadata.name.as_str())
            .collect();
        assert_eq!(names, ["eu", "eu-west", "root", "us"]);
        let root = status_of(&relays, "root");
        assert_eq!(root["subtreeSize"], 5);
        assert_eq!(root["children"], json!(["edge-2", "eu", "us"]));
        assert_eq!(status_of(&relays, "eu")["subtreeSize"], 2);
        assert_eq!(status_of(&relays, "eu-west")["subtreeSize"], 1);
        assert_eq!(status_of(&relays, "us")["subtreeSize"], 0);
        assert_eq!(status_of(&relays, "us")["children"], json!([]));
    }

    #[test]
    fn link_measurements_are_shown_for_the_roots_children_only() {
        let mut records = mesh();
        for record in &mut records {
            if let Some(link) = &mut Arc::make_mut(record).link {
                link.bundles_served = 2;
            }
        }
        let measured = BTreeMap::from([(
            "eu".to_string(),
            LinkStatus {
                rtt_micros: 400,
                ..LinkStatus::default()
            },
        )]);
        let relays = list(&records, &measured, Role::Relay);
        let eu = status_of(&relays, "eu");
        assert_eq!(
            (eu["rttMicros"].clone(), eu["revisionLag"].clone()),
            (json!(400), json!(0))
        );
        assert_eq!(eu["bundlesServed"], 2);
        // Measured by eu, which keeps it: not reported, so absent.
        let eu_west = status_of(&relays, "eu-west");
        for field in [
            "rttMicros",
            "bytesSent",
            "bytesReceived",
            "ackedRevision",
            "revisionLag",
        ] {
            assert!(eu_west.get(field).is_none(), "{field}: {eu_west}");
        }
        assert_eq!(eu_west["bundlesServed"], 2);
        assert_eq!(eu_west["connected"], true);
        // The root has no link at all.
        let root = status_of(&relays, "root");
        assert!(root.get("rttMicros").is_none() && root.get("bundlesServed").is_none());
    }

    #[test]
    fn objects_have_the_documented_shape() {
        let mut records = mesh();
        let eu = Arc::make_mut(&mut records[1]);
        eu.labels.insert("region".into(), "eu".into());
        eu.addresses.push("10.0.0.1:7443".into());
        eu.link = Some(LinkStatus {
            connected: false,
            changed_unix_ms: 1_795_305_000_000,
            ..LinkStatus::default()
        });
        let eu = get(&records, Role::Relay, "eu").expect("eu is a relay");
        let json = serde_json::to_value(&eu).expect("an object serializes");
        assert_eq!(json["apiVersion"], "relaymesh.dev/v1alpha1");
        assert_eq!(json["kind"], "Relay");
        assert_eq!(
            json["metadata"],
            json!({"name": "eu", "labels": {"region": "eu"}})
        );
        assert_eq!(
            json["spec"],
            json!({"parent": "root", "addresses": ["10.0.0.1:7443"]})
        );
        assert_eq!(json["status"]["connected"], false);
        assert_eq!(json["status"]["lastTransitionTime"], "2026-11-21T23:50:00Z");

        let root = serde_json::to_value(get(&records, Role::Relay, "root")).expect("serializes");
        assert_eq!(root["spec"], json!({"addresses": []}));
        assert_eq!(root["status"]["connected"], true);
        assert!(root["status"].get("lastTransitionTime").is_none());
        assert!(get(&records, Role::Relay, "edge-1").is_none());
    }

    #[test]
    fn agent_list_and_cycles() {
        let mut records = mesh();
        records.push(Arc::new(record("a", Role::Relay, Some("b"))));
        records.push(Arc::new(record("b", Role::Relay, Some("a"))));
        let agents = serde_json::to_value(list(&records, &BTreeMap::new(), Role::Agent))
            .expect("serializes");
        assert_eq!(agents["kind"], "AgentList");
        assert_eq!(agents["metadata"], json!({"resourceVersion": ""}));
        assert_eq!(agents["items"].as_array().map(Vec::len), Some(3));
        // A parent cycle does not hang or overflow.
        let relays = list(&records, &BTreeMap::new(), Role::Relay);
        assert_eq!(status_of(&relays, "a")["subtreeSize"], 0);
    }
}
