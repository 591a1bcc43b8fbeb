//! `relayctl explain`: why a placement selects the clusters it does, read
//! from the relays: the root asks each relay that receives the placement
//! how it split it over its children (`Query::Split`), level by level, and
//! lays the answers out as the clusters that run it, with their paths and
//! reasons, and the share each relay handed each child. What a relay says
//! of its own split is shown as it said it: it explains, it decides nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use relaymesh_protocol::query::ChildCut;
use relaymesh_protocol::{NodeRecord, PlacementTarget, Quota, Role};
use serde_json::{json, Value};

use super::{PlacementError, PlacementSpec};

/// The most relays one `explain` asks: its answer lists every relay that
/// receives the placement, so a placement spread over more of them is
/// explained in part (the answer says which relays were not asked).
pub const MAX_RELAYS_ASKED: usize = 1_000;

/// How many relays are asked at once.
const ASKED_AT_ONCE: usize = 16;

/// One relay's answer to `Query::Split`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelaySplit {
    /// The share the relay received (`None` at the root, or unbounded).
    pub quota: Option<Quota>,
    /// What each child receives, by child name.
    pub children: Vec<ChildCut>,
    /// How many children it left out of its answer.
    pub more: u64,
}

/// What the relays said, by relay, and the relays that could not say.
#[derive(Debug, Default)]
pub struct Splits {
    /// The answers, by relay name.
    pub answered: BTreeMap<String, RelaySplit>,
    /// Relays that receive the placement but did not answer, with why.
    pub unanswered: BTreeMap<String, String>,
    /// Relays that receive it and were not asked ([`MAX_RELAYS_ASKED`]).
    pub not_asked: u64,
}

/// Asks the root (the relay of `nodes` without a parent), then every relay
/// its answers name, level by level, how it split placement `key`.
pub async fn ask_splits<F, Fut, E>(nodes: &[Arc<NodeRecord>], key: &str, ask: F) -> Splits
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<RelaySplit, E>>,
    E: std::fmt::Display,
{
    let relays: BTreeSet<&str> = nodes
        .iter()
        .filter(|node| node.role == Role::Relay)
        .map(|node| node.name.as_str())
        .collect();
    let mut splits = Splits::default();
    let Some(root) = nodes.iter().find(|node| node.parent.is_none()) else {
        return splits;
    };
    let mut frontier = vec![root.name.clone()];
    let mut asked = 0usize;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for batch in frontier.chunks(ASKED_AT_ONCE) {
            let answers =
                futures::future::join_all(batch.iter().map(|relay| ask(relay.clone()))).await;
            for (relay, answer) in batch.iter().zip(answers) {
                match answer {
                    Ok(split) => {
                        next.extend(
                            split
                                .children
                                .iter()
                                .filter(|cut| relays.contains(cut.child.as_str()))
                                .map(|cut| cut.child.clone()),
                        );
                        splits.answered.insert(relay.clone(), split);
                    }
                    Err(error) => {
                        tracing::debug!(relay, %error, key, "a relay did not say how it split a placement");
                        splits.unanswered.insert(relay.clone(), error.to_string());
                    }
                }
            }
        }
        asked = asked.saturating_add(frontier.len());
        let room = MAX_RELAYS_ASKED.saturating_sub(asked);
        if next.len() > room {
            splits.not_asked = (next.len() - room) as u64;
            next.truncate(room);
        }
        frontier = next;
    }
    splits
}

/// Explains the Placement of `spec` from the relays' `splits` over the tree of `nodes`
/// (the root's inventory, for roles, labels and paths).
pub fn explain(
    spec: &PlacementSpec,
    nodes: &[Arc<NodeRecord>],
    splits: &Splits,
) -> Result<Value, PlacementError> {
    let records: BTreeMap<&str, &NodeRecord> = nodes
        .iter()
        .map(|node| (node.name.as_str(), &**node))
        .collect();
    let paths = paths(nodes);
    // Selected by its labels: named clusters are told apart below.
    let by_labels = PlacementTarget {
        names: Vec::new(),
        ..spec.target.clone()
    };
    let matches = |node: &NodeRecord| {
        relaymesh_topology::placement::target_selects(&by_labels, &node.name, &node.labels)
    };
    let matching = nodes
        .iter()
        .filter(|node| node.role == Role::Agent && matches(node))
        .count();
    let mut clusters = Vec::new();
    let mut kept = Vec::new();
    let mut quotas = Vec::new();
    for (relay, split) in &splits.answered {
        for cut in &split.children {
            let share = describe_cut(cut);
            quotas.push(json!({"relay": format!("{relay} → {}", cut.child), "share": share}));
            let Some(record) = records.get(cut.child.as_str()) else {
                continue;
            };
            if record.role != Role::Agent {
                continue;
            }
            let named = spec.target.names.contains(&cut.child);
            let reason = match (named, matches(record)) {
                (true, true) => "named in spec.clusters.names and matched by the label selector",
                (true, false) => "named in spec.clusters.names",
                _ if spec.target.max_clusters.is_some() => {
                    "matched by the label selector, within its relay's quota"
                }
                _ => "matched by the label selector",
            };
            let mut cluster = json!({
                "name": cut.child,
                "path": paths.get(&cut.child).cloned().unwrap_or_default(),
                "reason": reason,
            });
            if let Some(wave) = cut.wave {
                cluster["revision"] = json!(if wave > 0 { "newest" } else { "previous" });
            }
            if cut.kept {
                cluster["reason"] =
                    json!("kept until the clusters replacing it are ready (a handover or a drain)");
                kept.push(cluster);
            } else {
                clusters.push(cluster);
            }
        }
    }
    let mut explained = json!({
        "placement": format!("{}/{}", spec.namespace, spec.name),
        "selects": describe(spec),
        "matching": matching,
        "selected": clusters.len(),
        "clusters": clusters,
        "quotas": quotas,
    });
    if !kept.is_empty() {
        explained["leaving"] = json!(kept);
    }
    if !splits.unanswered.is_empty() {
        explained["unanswered"] = json!(splits
            .unanswered
            .iter()
            .map(|(relay, reason)| json!({"relay": relay, "reason": reason}))
            .collect::<Vec<_>>());
    }
    if splits.not_asked > 0 {
        explained["notAsked"] = json!(splits.not_asked);
    }
    Ok(explained)
}

/// A child's cut in words, as `2 cluster(s): eu=1, us=1`.
fn describe_cut(cut: &ChildCut) -> String {
    let mut parts = Vec::new();
    match &cut.quota {
        None => parts.push("every matching cluster".to_string()),
        Some(quota) if quota.per_value.is_empty() => {
            if quota.total > 0 || cut.named == 0 {
                parts.push(format!("{} cluster(s)", quota.total));
            }
        }
        Some(quota) => parts.push(format!(
            "{} cluster(s): {}",
            quota.total,
            quota
                .per_value
                .iter()
                .map(|(value, count)| format!("{value}={count}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    if cut.named > 0 {
        parts.push(format!("{} named", cut.named));
    }
    if let Some(wave) = cut.wave {
        parts.push(format!("{wave} on the newest revision"));
    }
    if cut.kept {
        parts.push("kept as it was until its replacement is ready".to_string());
    }
    parts.join(", ")
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

/// Each node's path from the root, as `root/eu/eu-west/edge-1`.
fn paths(nodes: &[Arc<NodeRecord>]) -> BTreeMap<String, String> {
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

    fn cut(child: &str, quota: Option<u32>, named: u32, kept: bool) -> ChildCut {
        ChildCut {
            child: child.into(),
            quota: quota.map(|total| Quota {
                total,
                per_value: BTreeMap::new(),
            }),
            named,
            wave: None,
            kept,
        }
    }

    fn tree() -> Vec<Arc<NodeRecord>> {
        tree_records().into_iter().map(Arc::new).collect()
    }

    fn tree_records() -> Vec<NodeRecord> {
        vec![
            node("root", None, Role::Relay, &[]),
            node("eu", Some("root"), Role::Relay, &[]),
            node("e1", Some("eu"), Role::Agent, &[("region", "eu")]),
            node("e2", Some("eu"), Role::Agent, &[("region", "eu")]),
            node("u1", Some("root"), Role::Agent, &[("region", "us")]),
        ]
    }

    fn answers() -> BTreeMap<String, RelaySplit> {
        let split = |quota: Option<u32>, children: Vec<ChildCut>| RelaySplit {
            quota: quota.map(|total| Quota {
                total,
                per_value: BTreeMap::new(),
            }),
            children,
            more: 0,
        };
        BTreeMap::from([
            (
                "root".to_string(),
                split(
                    None,
                    vec![cut("eu", Some(1), 0, false), cut("u1", Some(0), 1, false)],
                ),
            ),
            (
                "eu".to_string(),
                split(
                    Some(1),
                    vec![cut("e1", Some(1), 0, true), cut("e2", Some(1), 0, false)],
                ),
            ),
        ])
    }

    #[test]
    fn explains_what_the_relays_decided_with_paths_and_reasons() {
        let placement = json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"workloads": [{}], "clusters": {"labelSelector": {"matchLabels": {"region": "eu"}}, "names": ["u1"]}, "maxClusters": 1}
        });
        let splits = Splits {
            answered: answers(),
            ..Splits::default()
        };
        let explained = explain(
            &PlacementSpec::from_object(&placement).expect("valid"),
            &tree(),
            &splits,
        )
        .expect("explains");
        assert_eq!(explained["matching"], 2);
        // A drained cluster is no candidate of a bounded placement.
        let mut drained = tree();
        Arc::make_mut(&mut drained[3]).labels.insert(
            relaymesh_topology::placement::DRAINING_LABEL.into(),
            "true".into(),
        );
        let with_drained = explain(
            &PlacementSpec::from_object(&placement).expect("valid"),
            &drained,
            &splits,
        )
        .expect("explains");
        assert_eq!(with_drained["matching"], 1);
        assert_eq!(explained["selected"], 2, "{explained}");
        let clusters = explained["clusters"].as_array().expect("list");
        let u1 = clusters.iter().find(|c| c["name"] == "u1").expect("u1");
        assert_eq!(u1["path"], "root/u1");
        assert_eq!(u1["reason"], "named in spec.clusters.names");
        let e2 = clusters.iter().find(|c| c["name"] == "e2").expect("e2");
        assert_eq!(e2["path"], "root/eu/e2");
        assert_eq!(
            e2["reason"],
            "matched by the label selector, within its relay's quota"
        );
        assert_eq!(explained["leaving"][0]["name"], "e1", "{explained}");
        let quotas = explained["quotas"].as_array().expect("quotas");
        assert!(
            quotas.iter().any(|quota| quota["relay"] == "eu → e1"
                && quota["share"]
                    .as_str()
                    .is_some_and(|share| share.contains("kept"))),
            "{quotas:?}"
        );
        assert!(quotas
            .iter()
            .any(|quota| quota["relay"] == "root → u1" && quota["share"] == "1 named"));
    }

    #[test]
    fn asks_the_relays_that_receive_it_level_by_level_and_says_who_did_not_answer() {
        let answers = answers();
        let asked = std::sync::Mutex::new(Vec::new());
        let splits =
            futures::executor::block_on(ask_splits(&tree(), "placement/shop/web", |relay| {
                asked.lock().expect("not poisoned").push(relay.clone());
                let answer = match relay.as_str() {
                    "eu" => Err("eu is not connected".to_string()),
                    _ => answers
                        .get(&relay)
                        .cloned()
                        .ok_or_else(|| format!("{relay} not found")),
                };
                async move { answer }
            }));
        assert_eq!(
            *asked.lock().expect("not poisoned"),
            ["root", "eu"],
            "agents are not asked"
        );
        assert_eq!(splits.answered.keys().collect::<Vec<_>>(), ["root"]);
        assert!(splits.unanswered["eu"].contains("not connected"));
        let placement = json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"workloads": [{}], "clusters": {"labelSelector": {"matchLabels": {"region": "eu"}}}}
        });
        let explained = explain(
            &PlacementSpec::from_object(&placement).expect("valid"),
            &tree(),
            &splits,
        )
        .expect("explains");
        assert_eq!(explained["unanswered"][0]["relay"], "eu", "{explained}");
    }
}
