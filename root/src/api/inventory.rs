//! The read-only views of the tree: `Cluster` and SIG-Multicluster
//! `ClusterProfile` objects built from agents, and `Relay` / `Agent` objects
//! (shaped by the `nodes` module). Pure functions of the backend's
//! [`NodeRecord`]s.

use std::collections::HashMap;

use relaymesh_protocol::{NodeRecord, Role};
use serde_json::{json, Value};

use super::nodes::{self, rfc3339};
use super::MULTICLUSTER_GROUP;

/// The read-only views of the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// The tree's agents, as `Cluster` objects.
    Clusters,
    /// The tree's agents, as SIG-Multicluster `ClusterProfile`s.
    ClusterProfiles,
    /// The tree's relays, as `Relay` objects.
    Relays,
    /// The tree's agents, as `Agent` objects.
    Agents,
}

/// The objects of a read-only source, sorted by name.
pub(super) fn objects(source: View, inventory: &super::Inventory) -> Vec<Value> {
    let records = &inventory.records[..];
    match source {
        View::Relays | View::Agents => {
            let role = if source == View::Relays {
                Role::Relay
            } else {
                Role::Agent
            };
            let list = serde_json::to_value(nodes::list(records, &inventory.measured, role))
                .unwrap_or(Value::Null);
            list["items"].as_array().cloned().unwrap_or_default()
        }
        View::Clusters | View::ClusterProfiles => {
            let parents: HashMap<&str, Option<&str>> = records
                .iter()
                .map(|record| (record.name.as_str(), record.parent.as_deref()))
                .collect();
            let mut agents: Vec<&NodeRecord> = records
                .iter()
                .map(|record| &**record)
                .filter(|record| record.role == Role::Agent)
                .collect();
            agents.sort_by(|a, b| a.name.cmp(&b.name));
            agents.dedup_by(|a, b| a.name == b.name);
            agents
                .into_iter()
                .map(|record| {
                    if source == View::Clusters {
                        cluster(record, &parents, inventory.annotations.get(&record.name))
                    } else {
                        cluster_profile(record)
                    }
                })
                .collect()
        }
    }
}

/// The relays from the root down to the agent's parent.
fn relay_path(record: &NodeRecord, parents: &HashMap<&str, Option<&str>>) -> Vec<String> {
    let mut path = Vec::new();
    let mut next = record.parent.as_deref();
    while let Some(name) = next {
        // A parent cycle in a corrupt inventory must not loop forever.
        if path.iter().any(|seen: &String| seen == name) || path.len() > parents.len() {
            break;
        }
        path.push(name.to_string());
        next = parents.get(name).copied().flatten();
    }
    path.reverse();
    path
}

fn cluster(
    record: &NodeRecord,
    parents: &HashMap<&str, Option<&str>>,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Value {
    let link = record.link.clone().unwrap_or_default();
    let last_seen = (link.changed_unix_ms > 0).then(|| rfc3339(link.changed_unix_ms));
    let (cordoned, drain) = super::cordons::status_fields(&record.labels);
    let mut status = json!({
        "relayPath": relay_path(record, parents),
        "connected": link.connected,
        "lastSeen": last_seen,
        "capacity": record.capacity,
        "cordoned": cordoned,
        "lost": record.labels.contains_key(relaymesh_topology::placement::LOST_LABEL),
        "reachable": !unreachable(record),
    });
    if let Some(drain) = drain {
        status["drain"] = Value::from(drain);
    }
    let mut metadata = json!({"name": record.name, "labels": record.labels});
    if let Some(joined) = relaymesh_node::store::joined_at_ms(record) {
        metadata["creationTimestamp"] = json!(rfc3339(joined));
    }
    if let Some(annotations) = annotations.filter(|annotations| !annotations.is_empty()) {
        metadata["annotations"] = json!(annotations);
    }
    json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": metadata,
        "status": status,
    })
}

/// Whether the cluster's agent last said its cluster's API does not answer
/// (the label it sets on its own record; `ClusterUnreachable` on its
/// placements).
fn unreachable(record: &NodeRecord) -> bool {
    record
        .labels
        .contains_key(relaymesh_topology::placement::UNREACHABLE_LABEL)
}

fn cluster_profile(record: &NodeRecord) -> Value {
    let connected = record.link.as_ref().is_some_and(|link| link.connected);
    let (healthy, reason, message) = if !connected {
        ("False", "Disconnected", "the agent's link is down")
    } else if unreachable(record) {
        (
            "False",
            "ClusterUnreachable",
            "the agent says its cluster's API does not answer",
        )
    } else {
        ("True", "Connected", "the agent's link is up")
    };
    let changed = record
        .link
        .as_ref()
        .filter(|link| link.changed_unix_ms > 0)
        .map(|link| rfc3339(link.changed_unix_ms))
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string());
    let properties: Vec<Value> = record
        .labels
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "apiVersion": format!("{MULTICLUSTER_GROUP}/v1alpha1"),
        "kind": "ClusterProfile",
        "metadata": {
            "name": record.name,
            "labels": {"x-k8s.io/cluster-manager": "relaymesh"},
        },
        "spec": {
            "displayName": record.name,
            "clusterManager": {"name": "relaymesh"},
        },
        "status": {
            "conditions": [{
                "type": "ControlPlaneHealthy",
                "status": healthy,
                "reason": reason,
                "message": message,
                "lastTransitionTime": changed,
            }],
            "properties": properties,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use relaymesh_protocol::LinkStatus;

    use super::*;

    fn record(name: &str, role: Role, parent: Option<&str>) -> NodeRecord {
        NodeRecord {
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
            name: name.into(),
            role,
            parent: parent.map(Into::into),
            labels: BTreeMap::from([("region".to_string(), "eu".to_string())]).into(),
            addresses: vec![],
            version: "0.1.0".into(),
            link: parent.map(|_| LinkStatus {
                connected: true,
                changed_unix_ms: 1_795_305_000_000,
                ..LinkStatus::default()
            }),
        }
    }

    fn records() -> super::super::Inventory {
        super::super::Inventory {
            version: 1,
            records: Arc::new(
                [
                    record("root", Role::Relay, None),
                    record("eu", Role::Relay, Some("root")),
                    record("edge-1", Role::Agent, Some("eu")),
                ]
                .map(Arc::new)
                .into(),
            ),
            measured: Default::default(),
            annotations: std::sync::Arc::new(
                [(
                    "edge-1".to_string(),
                    [("example.com/owner".to_string(), "team-a".to_string())].into(),
                )]
                .into(),
            ),
        }
    }

    #[test]
    fn clusters_carry_relay_paths() {
        let clusters = objects(View::Clusters, &records());
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0]["metadata"]["name"], "edge-1");
        assert_eq!(clusters[0]["metadata"]["labels"]["region"], "eu");
        assert_eq!(clusters[0]["status"]["relayPath"], json!(["root", "eu"]));
        assert_eq!(clusters[0]["status"]["connected"], true);
        assert_eq!(clusters[0]["status"]["lastSeen"], "2026-11-21T23:50:00Z");
        assert_eq!(
            clusters[0]["metadata"]["annotations"]["example.com/owner"],
            "team-a"
        );
    }

    #[test]
    fn cluster_profiles_follow_sig_multicluster() {
        let profiles = objects(View::ClusterProfiles, &records());
        let profile = &profiles[0];
        assert_eq!(profile["apiVersion"], "multicluster.x-k8s.io/v1alpha1");
        assert_eq!(profile["spec"]["clusterManager"]["name"], "relaymesh");
        assert_eq!(
            profile["status"]["conditions"][0]["type"],
            "ControlPlaneHealthy"
        );
        assert_eq!(profile["status"]["conditions"][0]["status"], "True");
        assert_eq!(
            profile["status"]["properties"],
            json!([{"name": "region", "value": "eu"}])
        );
    }

    #[test]
    fn a_cluster_whose_agent_says_unreachable_shows_it() {
        let mut inventory = records();
        assert_eq!(
            objects(View::Clusters, &inventory)[0]["status"]["reachable"],
            true
        );
        let mut records = inventory.records.to_vec();
        Arc::make_mut(&mut records[2]).labels.insert(
            relaymesh_topology::placement::UNREACHABLE_LABEL.to_string(),
            "true".to_string(),
        );
        inventory.records = Arc::new(records);
        let cluster = &objects(View::Clusters, &inventory)[0];
        assert_eq!(cluster["status"]["reachable"], false, "{cluster}");
        assert_eq!(cluster["status"]["connected"], true, "{cluster}");
        let profile = &objects(View::ClusterProfiles, &inventory)[0];
        let condition = &profile["status"]["conditions"][0];
        assert_eq!(condition["type"], "ControlPlaneHealthy", "{profile}");
        assert_eq!(condition["status"], "False", "{profile}");
        assert_eq!(condition["reason"], "ClusterUnreachable", "{profile}");
    }

    #[test]
    fn relays_come_from_the_node_objects() {
        let relays = objects(View::Relays, &records());
        let names: Vec<_> = relays
            .iter()
            .map(|r| r["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("eu"), json!("root")]);
        assert_eq!(relays[1]["status"]["children"], json!(["eu"]));
    }
}
