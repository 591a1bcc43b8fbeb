//! What `testbed chaos` changes at the root and what every cluster should
//! then hold, without IO: the placements and workloads that exist now, the
//! random changes made to them, the manifests sent to the root, and each
//! cluster's desired objects compared with what its hollow cluster holds.
//!
//! The workloads are in groups, and placement `chaos-G` carries group G
//! (the workloads labelled `chaos.relaymesh.dev/group=gG`) and nothing
//! else: no object is ever in two placements, whose joint ownership of one
//! object the product does not define. What moves is everything else: a
//! placement's cluster selector, whether it exists, and each workload's
//! existence and content.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::bench::fleet::SplitMix;
use crate::up::plan::AgentPlan;

/// The label that puts a workload in a group (and so in a placement).
pub const GROUP_LABEL: &str = "chaos.relaymesh.dev/group";

/// Placements, one per group of workloads.
const GROUPS: usize = 4;

/// ConfigMaps per group.
const CONFIGMAPS_PER_GROUP: usize = 3;

/// Deployments per group.
const DEPLOYMENTS_PER_GROUP: usize = 2;

/// The image of every workload; the revision is its tag.
const IMAGE: &str = "registry.example/chaos";

/// The kinds of workload changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A ConfigMap: its content is `data.revision`.
    ConfigMap,
    /// A Deployment: its content is its container's image.
    Deployment,
}

/// A workload that exists at the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Its group, so its placement.
    pub group: usize,
    /// Its kind.
    pub kind: Kind,
    /// Its content's revision (unique over the run).
    pub revision: u64,
}

/// Which clusters a placement selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterChoice {
    /// Every cluster (the empty label selector).
    All,
    /// Clusters whose label `key` is `value` (`matchLabels`).
    Equals(String, String),
    /// Clusters whose label `key` is not `value` (`NotIn`).
    NotEquals(String, String),
    /// These clusters by name, with no label selector.
    Names(Vec<String>),
}

/// One change made at the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Create or update workload `name`.
    ApplyWorkload(String, Workload),
    /// Delete workload `name`.
    DeleteWorkload(String),
    /// Create or update the placement of group `group`.
    ApplyPlacement(usize, ClusterChoice),
    /// Delete the placement of group `group`.
    DeletePlacement(usize),
}

/// The placements and workloads that exist at the root.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The cluster choice of each group's placement, if it exists.
    pub placements: BTreeMap<usize, ClusterChoice>,
    /// Every workload, by name.
    pub workloads: BTreeMap<String, Workload>,
    next_revision: u64,
}

/// How a cluster differs from what it should hold (object names).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClusterDiff {
    /// Desired and absent.
    pub missing: Vec<String>,
    /// Present with other content: name, desired, found.
    pub stale: Vec<(String, String, String)>,
    /// Present and not desired (not pruned).
    pub extra: Vec<String>,
}

impl ClusterDiff {
    /// Whether the cluster holds exactly what it should.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.stale.is_empty() && self.extra.is_empty()
    }
}

impl std::fmt::Display for ClusterDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stale: Vec<String> = self
            .stale
            .iter()
            .map(|(name, desired, found)| format!("{name} (has {found}, wants {desired})"))
            .collect();
        write!(
            f,
            "missing {:?}, stale {stale:?}, not pruned {:?}",
            self.missing, self.extra
        )
    }
}

impl ClusterChoice {
    /// The placement's `spec.clusters`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::All => json!({"labelSelector": {}}),
            Self::Equals(key, value) => json!({"labelSelector": {"matchLabels": {key: value}}}),
            Self::NotEquals(key, value) => json!({"labelSelector": {"matchExpressions": [
                {"key": key, "operator": "NotIn", "values": [value]}
            ]}}),
            Self::Names(names) => json!({"names": names}),
        }
    }

    /// Whether cluster `name` with `labels` is selected.
    pub fn selects(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::All => true,
            Self::Equals(key, value) => labels.get(key) == Some(value),
            Self::NotEquals(key, value) => labels.get(key) != Some(value),
            Self::Names(names) => names.iter().any(|n| n == name),
        }
    }

    /// A random choice over the labels and names of `agents`.
    pub fn random(rng: &mut SplitMix, agents: &[AgentPlan]) -> Self {
        let Some(agent) = pick(rng, agents) else {
            return Self::All;
        };
        let keys: Vec<&String> = agent.labels.keys().collect();
        let key = pick(rng, &keys).map_or_else(|| "region".to_string(), |k| (*k).clone());
        // A value some cluster has, so most selectors select something.
        let value = agent.labels.get(&key).cloned().unwrap_or_default();
        match rng.below(8) {
            0 => Self::All,
            1..=3 => Self::Equals(key, value),
            4 | 5 => Self::NotEquals(key, value),
            _ => {
                let count = 1 + rng.below(3) as usize;
                let mut names: Vec<String> = (0..count)
                    .filter_map(|_| pick(rng, agents).map(|a| a.name.clone()))
                    .collect();
                names.sort();
                names.dedup();
                Self::Names(names)
            }
        }
    }
}

impl std::fmt::Display for ClusterChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => write!(f, "all clusters"),
            Self::Equals(key, value) => write!(f, "{key}={value}"),
            Self::NotEquals(key, value) => write!(f, "{key}!={value}"),
            Self::Names(names) => write!(f, "names {}", names.join(",")),
        }
    }
}

impl Model {
    /// A random change to one workload slot: create it if absent, else
    /// update it (mostly) or delete it.
    pub fn workload_change(&mut self, rng: &mut SplitMix) -> Change {
        let group = rng.below(GROUPS as u64) as usize;
        let per_group = CONFIGMAPS_PER_GROUP + DEPLOYMENTS_PER_GROUP;
        let slot = rng.below(per_group as u64) as usize;
        let (kind, name) = if slot < CONFIGMAPS_PER_GROUP {
            (Kind::ConfigMap, format!("g{group}-config-{slot}"))
        } else {
            let index = slot - CONFIGMAPS_PER_GROUP;
            (Kind::Deployment, format!("g{group}-web-{index}"))
        };
        if self.workloads.contains_key(&name) && rng.below(10) < 3 {
            return Change::DeleteWorkload(name);
        }
        self.next_revision += 1;
        let workload = Workload {
            group,
            kind,
            revision: self.next_revision,
        };
        Change::ApplyWorkload(name, workload)
    }

    /// A random change to one placement: create it if absent, else move
    /// its clusters (mostly) or delete it.
    pub fn placement_change(&self, rng: &mut SplitMix, agents: &[AgentPlan]) -> Change {
        let group = rng.below(GROUPS as u64) as usize;
        if self.placements.contains_key(&group) && rng.below(10) < 4 {
            return Change::DeletePlacement(group);
        }
        Change::ApplyPlacement(group, ClusterChoice::random(rng, agents))
    }

    /// Records a change made at the root.
    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::ApplyWorkload(name, workload) => {
                self.workloads.insert(name.clone(), *workload);
            }
            Change::DeleteWorkload(name) => {
                self.workloads.remove(name);
            }
            Change::ApplyPlacement(group, choice) => {
                self.placements.insert(*group, choice.clone());
            }
            Change::DeletePlacement(group) => {
                self.placements.remove(group);
            }
        }
    }

    /// What cluster `name` with `labels` should hold: object name → content.
    pub fn desired(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        self.workloads
            .iter()
            .filter(|(_, workload)| {
                self.placements
                    .get(&workload.group)
                    .is_some_and(|choice| choice.selects(name, labels))
            })
            .map(|(object, workload)| (object.clone(), content(workload.kind, workload.revision)))
            .collect()
    }
}

/// Placement `chaos-G`'s name.
pub fn placement_name(group: usize) -> String {
    format!("chaos-{group}")
}

/// The manifest of workload `name` in `namespace`.
pub fn workload_manifest(namespace: &str, name: &str, workload: &Workload) -> Value {
    let labels = json!({GROUP_LABEL: format!("g{}", workload.group)});
    match workload.kind {
        Kind::ConfigMap => json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": {"revision": content(Kind::ConfigMap, workload.revision)},
        }),
        Kind::Deployment => json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{
                        "name": "app",
                        "image": content(Kind::Deployment, workload.revision),
                    }]},
                },
            },
        }),
    }
}

/// The manifest of group `group`'s placement in `namespace`.
pub fn placement_manifest(namespace: &str, group: usize, choice: &ClusterChoice) -> Value {
    json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": placement_name(group), "namespace": namespace},
        "spec": {
            "workloads": [{
                "namespaces": [namespace],
                "labelSelector": {"matchLabels": {GROUP_LABEL: format!("g{group}")}},
            }],
            "clusters": choice.to_json(),
        },
    })
}

/// What a cluster holds of the chaos workloads: object name → content,
/// from its objects in the chaos namespace (`(resource, object)` pairs).
/// Objects without the group label are not the run's.
pub fn held<'a>(
    objects: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> BTreeMap<String, String> {
    objects
        .into_iter()
        .filter(|(_, object)| object["metadata"]["labels"][GROUP_LABEL].is_string())
        .filter_map(|(resource, object)| {
            let name = object["metadata"]["name"].as_str()?.to_string();
            let found = match resource {
                "configmaps" => object["data"]["revision"].as_str(),
                "deployments" => {
                    object["spec"]["template"]["spec"]["containers"][0]["image"].as_str()
                }
                _ => None,
            };
            Some((name, found.unwrap_or("(none)").to_string()))
        })
        .collect()
}

/// How `found` differs from `desired`.
pub fn diff(desired: &BTreeMap<String, String>, found: &BTreeMap<String, String>) -> ClusterDiff {
    let mut result = ClusterDiff::default();
    for (name, want) in desired {
        match found.get(name) {
            None => result.missing.push(name.clone()),
            Some(have) if have != want => {
                result
                    .stale
                    .push((name.clone(), want.clone(), have.clone()))
            }
            Some(_) => {}
        }
    }
    result.extra = found
        .keys()
        .filter(|name| !desired.contains_key(*name))
        .cloned()
        .collect();
    result
}

/// A workload's content at `revision`: what its ConfigMap's
/// `data.revision` or its Deployment's image says.
fn content(kind: Kind, revision: u64) -> String {
    match kind {
        Kind::ConfigMap => format!("r{revision}"),
        Kind::Deployment => format!("{IMAGE}:r{revision}"),
    }
}

/// A random item of `items`.
fn pick<'a, T>(rng: &mut SplitMix, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        return None;
    }
    items.get(rng.below(items.len() as u64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::up::plan::Plan;

    #[test]
    fn a_cluster_wants_the_workloads_of_the_placements_that_select_it() {
        let plan = Plan::new(&[2], 4);
        let eu = &plan.agents[0];
        let mut model = Model::default();
        let mut rng = SplitMix(1);
        let config = Workload {
            group: 0,
            kind: Kind::ConfigMap,
            revision: 7,
        };
        let web = Workload {
            group: 1,
            kind: Kind::Deployment,
            revision: 8,
        };
        model.apply(&Change::ApplyWorkload("g0-config-0".into(), config));
        model.apply(&Change::ApplyWorkload("g1-web-0".into(), web));
        assert!(
            model.desired(&eu.name, &eu.labels).is_empty(),
            "no placement"
        );
        let region = eu.labels["region"].clone();
        model.apply(&Change::ApplyPlacement(
            0,
            ClusterChoice::Equals("region".into(), region.clone()),
        ));
        model.apply(&Change::ApplyPlacement(
            1,
            ClusterChoice::NotEquals("region".into(), region),
        ));
        let desired = model.desired(&eu.name, &eu.labels);
        assert_eq!(
            desired,
            BTreeMap::from([("g0-config-0".to_string(), "r7".to_string())])
        );

        let manifest = workload_manifest("chaos", "g1-web-0", &web);
        let found = held([("deployments", &manifest)]);
        let diff = diff(&desired, &found);
        assert_eq!(diff.missing, ["g0-config-0"]);
        assert_eq!(diff.extra, ["g1-web-0"]);
        assert!(!diff.is_empty());

        let change = model.workload_change(&mut rng);
        model.apply(&change);
        assert!(!model.workloads.is_empty());
    }

    #[test]
    fn held_reads_the_content_of_both_kinds() {
        let config = Workload {
            group: 2,
            kind: Kind::ConfigMap,
            revision: 3,
        };
        let web = Workload {
            kind: Kind::Deployment,
            ..config
        };
        let config_manifest = workload_manifest("chaos", "a", &config);
        let web_manifest = workload_manifest("chaos", "b", &web);
        let found = held([
            ("configmaps", &config_manifest),
            ("deployments", &web_manifest),
        ]);
        assert_eq!(found["a"], "r3");
        assert_eq!(found["b"], format!("{IMAGE}:r3"));
    }
}
