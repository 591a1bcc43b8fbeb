//! `relayctl explain`: why a placement selects the clusters it does,
//! computed at the root by resolving it over the whole inventory level by
//! level, with the same decisions the relays make (`topology::model`).

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::{NodeRecord, Role};
use relaymesh_topology::model::{resolve_tree, Tree};
use relaymesh_topology::placement::ChildShare;
use serde_json::{json, Value};

use super::{entry_key, PlacementError, PlacementSpec};

/// Explains `placement` over the tree of `nodes` (the root's inventory; the
/// root is the relay without a parent).
pub fn explain(placement: &Value, nodes: &[NodeRecord]) -> Result<Value, PlacementError> {
    let spec = PlacementSpec::from_object(placement)?;
    let tree = build_tree(nodes);
    let key = entry_key(&spec.namespace, &spec.name);
    let resolution = resolve_tree(&tree, &key, &spec.target, None);
    let paths = paths(nodes);
    let matching = nodes
        .iter()
        .filter(|node| node.role == Role::Agent)
        .filter(|node| {
            spec.target.selector.as_ref().is_some_and(|selector| {
                relaymesh_topology::selector::matches(selector, &node.labels)
            })
        })
        .count();
    let mut clusters = Vec::new();
    for name in resolution.selected() {
        let reason = match (
            resolution.by_name.contains(&name),
            resolution.by_label.contains(&name),
        ) {
            (true, true) => "named in spec.clusters.names and matched by the label selector",
            (true, false) => "named in spec.clusters.names",
            _ if spec.target.max_clusters.is_some() => {
                "matched by the label selector, within its relay's quota"
            }
            _ => "matched by the label selector",
        };
        clusters.push(json!({
            "name": name,
            "path": paths.get(&name).cloned().unwrap_or_default(),
            "reason": reason,
        }));
    }
    let quotas: Vec<Value> = resolution
        .splits
        .iter()
        .flat_map(|(relay, split)| {
            split.per_child.iter().map(move |(child, share)| {
                let share = match share {
                    ChildShare::Unbounded => "every matching cluster".to_string(),
                    ChildShare::Quota(quota) if quota.per_value.is_empty() => {
                        format!("{} cluster(s)", quota.total)
                    }
                    ChildShare::Quota(quota) => format!(
                        "{} cluster(s): {}",
                        quota.total,
                        quota
                            .per_value
                            .iter()
                            .map(|(value, count)| format!("{value}={count}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                json!({"relay": format!("{relay} → {child}"), "share": share})
            })
        })
        .collect();
    Ok(json!({
        "placement": format!("{}/{}", spec.namespace, spec.name),
        "selects": describe(&spec),
        "matching": matching,
        "selected": clusters.len(),
        "clusters": clusters,
        "quotas": quotas,
    }))
}

fn describe(spec: &PlacementSpec) -> String {
    let mut parts = Vec::new();
    if let Some(selector) = &spec.target.selector {
        let mut terms: Vec<String> = selector
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        terms.extend(
            selector
                .match_expressions
                .iter()
                .map(|e| format!("{} {:?} {:?}", e.key, e.operator, e.values)),
        );
        parts.push(if terms.is_empty() {
            "every cluster".to_string()
        } else {
            format!("clusters with {}", terms.join(", "))
        });
    }
    if let Some(max) = spec.target.max_clusters {
        parts.push(format!("at most {max}"));
    }
    if let Some(spread) = &spec.target.spread_by {
        parts.push(format!("spread by {spread}"));
    }
    if !spec.target.names.is_empty() {
        parts.push(format!("plus {}", spec.target.names.join(", ")));
    }
    parts.join(", ")
}

/// The simulation tree of the inventory, parents added before children.
fn build_tree(nodes: &[NodeRecord]) -> Tree {
    let root = nodes
        .iter()
        .find(|node| node.parent.is_none())
        .map_or("root", |node| node.name.as_str());
    let mut tree = Tree::new(root);
    let mut pending: Vec<&NodeRecord> = nodes.iter().filter(|n| n.parent.is_some()).collect();
    // Add whatever's parent is already in the tree until nothing moves;
    // nodes whose chain is broken are left out.
    loop {
        let before = pending.len();
        pending.retain(|node| {
            let Some(parent) = node.parent.as_deref().and_then(|p| tree.find(p)) else {
                return true;
            };
            match node.role {
                Role::Agent => tree.add_cluster(parent, &node.name, &node.labels),
                _ => tree.add_relay(parent, &node.name),
            };
            false
        });
        if pending.len() == before {
            break;
        }
    }
    tree.build_aggregates();
    tree
}

/// Each node's path from the root, as `root/eu/eu-west/edge-1`.
fn paths(nodes: &[NodeRecord]) -> BTreeMap<String, String> {
    let parents: BTreeMap<&str, &str> = nodes
        .iter()
        .filter_map(|node| Some((node.name.as_str(), node.parent.as_deref()?)))
        .collect();
    nodes
        .iter()
        .map(|node| {
            let mut chain = vec![node.name.as_str()];
            let mut seen = BTreeSet::new();
            let mut current = node.name.as_str();
            while let Some(parent) = parents.get(current) {
                if !seen.insert(*parent) {
                    break;
                }
                chain.push(parent);
                current = parent;
            }
            chain.reverse();
            (node.name.clone(), chain.join("/"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, parent: Option<&str>, role: Role, labels: &[(&str, &str)]) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            role,
            parent: parent.map(str::to_string),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            addresses: vec![],
            version: String::new(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        }
    }

    #[test]
    fn explains_selected_clusters_with_paths_and_reasons() {
        let nodes = vec![
            node("root", None, Role::Relay, &[]),
            node("eu", Some("root"), Role::Relay, &[]),
            node("e1", Some("eu"), Role::Agent, &[("region", "eu")]),
            node("e2", Some("eu"), Role::Agent, &[("region", "eu")]),
            node("u1", Some("root"), Role::Agent, &[("region", "us")]),
        ];
        let placement = json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"workloads": [{}], "clusters": {"labelSelector": {"matchLabels": {"region": "eu"}}, "names": ["u1"]}, "maxClusters": 1}
        });
        let explained = explain(&placement, &nodes).expect("explains");
        assert_eq!(explained["matching"], 2);
        assert_eq!(explained["selected"], 2, "{explained}");
        let clusters = explained["clusters"].as_array().expect("list");
        let u1 = clusters.iter().find(|c| c["name"] == "u1").expect("u1");
        assert_eq!(u1["path"], "root/u1");
        assert_eq!(u1["reason"], "named in spec.clusters.names");
        let eu = clusters
            .iter()
            .find(|c| c["name"] != "u1")
            .expect("one eu cluster");
        assert!(eu["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("root/eu/")));
        assert!(explained["quotas"]
            .as_array()
            .is_some_and(|q| !q.is_empty()));
    }
}
