//! A placement resolved over a whole tree held in memory, by chaining the
//! one decision every relay makes: each relay sees only its children's
//! aggregates, calls [`placement::split`], and [`placement::cut`]s the
//! target per child.
//!
//! This is a model, not the relays' code path. The relays make that
//! decision in `relaymesh-core` (its `placements` module calls the same
//! `split` and `cut` for its own children, and the tree of real cores runs
//! in `relaymesh_core::simulation`, which the testbed's benchmarks drive).
//! The model exists for what needs the whole tree at once without running
//! it: the property tests of [`placement`] check it against brute force,
//! and `relayctl explain` shows from the root's inventory why a cluster was
//! (not) chosen.
//!
//! Clusters share their label sets (interned), so a cluster costs a name and
//! a few words, and every cluster with the same labels shares one aggregate.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use relaymesh_protocol::{LabelSet, PlacementTarget, Quota};

use crate::aggregate::{Aggregate, Labels};
use crate::placement::{self, ChildInput, Split};

/// A node of a [`Tree`], by position.
pub type NodeId = usize;

/// A tree of relays with clusters as leaves. Node 0 is the root relay.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    by_name: HashMap<String, NodeId>,
    label_sets: Vec<Aggregate>,
    label_set_ids: HashMap<Labels, usize>,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    parent: Option<NodeId>,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Relay {
        children: Vec<NodeId>,
        aggregate: Aggregate,
    },
    Cluster {
        label_set: usize,
    },
}

/// What resolving one placement over a [`Tree`] gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Clusters selected by the selector and the bound.
    pub by_label: BTreeSet<String>,
    /// Clusters selected because they are named.
    pub by_name: BTreeSet<String>,
    /// The split each relay that received the entry made, by relay name:
    /// pass the whole resolution back as `previous` to keep it sticky.
    pub splits: BTreeMap<String, Split>,
    /// The quota the root derived (`None`: unbounded).
    pub root_quota: Option<Quota>,
}

impl Resolution {
    /// Every selected cluster.
    pub fn selected(&self) -> BTreeSet<String> {
        self.by_label.union(&self.by_name).cloned().collect()
    }
}

impl Tree {
    /// A tree holding only its root relay.
    pub fn new(root: &str) -> Self {
        let mut tree = Self {
            nodes: Vec::new(),
            by_name: HashMap::new(),
            label_sets: Vec::new(),
            label_set_ids: HashMap::new(),
        };
        tree.push(
            root,
            None,
            Kind::Relay {
                children: Vec::new(),
                aggregate: Aggregate::new(),
            },
        );
        tree
    }

    /// The root relay.
    pub fn root(&self) -> NodeId {
        0
    }

    /// Adds a relay under `parent`; `None` if `parent` is not a relay.
    pub fn add_relay(&mut self, parent: NodeId, name: &str) -> Option<NodeId> {
        let kind = Kind::Relay {
            children: Vec::new(),
            aggregate: Aggregate::new(),
        };
        self.add(parent, name, kind)
    }

    /// Adds a cluster under `parent`; `None` if `parent` is not a relay.
    /// Call [`build_aggregates`](Self::build_aggregates) before resolving.
    pub fn add_cluster(&mut self, parent: NodeId, name: &str, labels: &Labels) -> Option<NodeId> {
        let next = self.label_sets.len();
        let label_set = *self.label_set_ids.entry(labels.clone()).or_insert(next);
        if label_set == next {
            self.label_sets
                .push(Aggregate::of_cluster(&labels.clone().into()));
        }
        self.add(parent, name, Kind::Cluster { label_set })
    }

    /// Recomputes every relay's aggregate from its children, bottom up.
    pub fn build_aggregates(&mut self) {
        // Children are always added after their parent, so reverse order is
        // bottom up.
        for id in (0..self.nodes.len()).rev() {
            let Kind::Relay { children, .. } = &self.nodes[id].kind else {
                continue;
            };
            let mut merged = Aggregate::new();
            for child in children {
                merged.merge(self.aggregate(*child));
            }
            if let Kind::Relay { aggregate, .. } = &mut self.nodes[id].kind {
                *aggregate = merged;
            }
        }
    }

    /// How many nodes (relays and clusters).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree holds only its root.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// A node by name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// A node's name.
    pub fn name(&self, id: NodeId) -> &str {
        &self.nodes[id].name
    }

    /// A cluster's labels (`None` for a relay).
    pub fn labels(&self, id: NodeId) -> Option<&LabelSet> {
        match self.nodes[id].kind {
            Kind::Cluster { label_set } => self.label_sets[label_set].iter().next().map(|(l, _)| l),
            Kind::Relay { .. } => None,
        }
    }

    /// A node's parent (`None` for the root).
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.nodes[id].parent
    }

    /// A relay's children (none for a cluster).
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        match &self.nodes[id].kind {
            Kind::Relay { children, .. } => children,
            Kind::Cluster { .. } => &[],
        }
    }

    /// The clusters of a node's subtree, summarised (as last built).
    pub fn aggregate(&self, id: NodeId) -> &Aggregate {
        match &self.nodes[id].kind {
            Kind::Relay { aggregate, .. } => aggregate,
            Kind::Cluster { label_set } => &self.label_sets[*label_set],
        }
    }

    fn add(&mut self, parent: NodeId, name: &str, kind: Kind) -> Option<NodeId> {
        if !matches!(self.nodes.get(parent)?.kind, Kind::Relay { .. }) {
            return None;
        }
        let id = self.push(name, Some(parent), kind);
        if let Kind::Relay { children, .. } = &mut self.nodes[parent].kind {
            children.push(id);
        }
        Some(id)
    }

    fn push(&mut self, name: &str, parent: Option<NodeId>, kind: Kind) -> NodeId {
        let id = self.nodes.len();
        self.nodes.push(Node {
            name: name.to_string(),
            parent,
            kind,
        });
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// The child of `relay` whose subtree holds `name`, if any.
    fn via(&self, relay: NodeId, name: &str) -> Option<String> {
        let mut node = self.find(name)?;
        while let Some(parent) = self.nodes[node].parent {
            if parent == relay {
                return Some(self.nodes[node].name.clone());
            }
            node = parent;
        }
        None
    }
}

/// Resolves `target` (as the root receives it, without a quota) over the
/// whole tree, relay by relay from the root down, visiting only the relays
/// that receive the entry. `previous` makes every relay's split sticky to
/// the split it made in that earlier resolution.
pub fn resolve_tree(
    tree: &Tree,
    placement_key: &str,
    target: &PlacementTarget,
    previous: Option<&Resolution>,
) -> Resolution {
    let mut resolution = Resolution::default();
    let mut pending = vec![(tree.root(), target.clone())];
    while let Some((relay, received)) = pending.pop() {
        let children: Vec<ChildInput<'_>> = tree
            .children(relay)
            .iter()
            .map(|child| ChildInput {
                name: tree.name(*child),
                aggregate: tree.aggregate(*child),
            })
            .collect();
        let name = tree.name(relay);
        let before = previous.and_then(|previous| previous.splits.get(name));
        let own_quota = received.quota.as_ref();
        let split = placement::split(placement_key, &received, own_quota, &children, before);
        let named = placement::named_children_by(&received, |node| tree.via(relay, node));
        if relay == tree.root() {
            resolution.root_quota = received.max_clusters.map(|_| split.quota_sum());
        }
        for child in tree.children(relay) {
            let child_name = tree.name(*child);
            if tree.labels(*child).is_some() {
                // A leaf: selected by its share or by name, as
                // `placement::leaf_selects` would decide on the agent.
                if split.per_child.contains_key(child_name) {
                    resolution.by_label.insert(child_name.to_string());
                }
                if named.contains(child_name) && received.names.iter().any(|n| n == child_name) {
                    resolution.by_name.insert(child_name.to_string());
                }
            } else if let Some(cut) = placement::cut(&received, &split, &named, child_name) {
                pending.push((*child, cut));
            }
        }
        resolution.splits.insert(name.to_string(), split);
    }
    resolution
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector;

    #[test]
    fn a_tree_aggregates_bottom_up_and_resolves_named_and_bounded() {
        let mut tree = Tree::new("root");
        let eu = tree.add_relay(tree.root(), "eu").expect("root is a relay");
        let edge: Labels = [("tier".to_string(), "edge".to_string())].into();
        let one = tree.add_cluster(eu, "eu-1", &edge).expect("eu is a relay");
        tree.add_cluster(eu, "eu-2", &edge).expect("eu is a relay");
        assert_eq!(tree.add_relay(one, "below-a-cluster"), None);
        assert!(tree.aggregate(tree.root()).is_empty(), "not built yet");
        tree.build_aggregates();
        assert_eq!(tree.aggregate(tree.root()).clusters(), 2);
        assert_eq!(tree.aggregate(one).label_sets(), 1);
        assert_eq!(tree.via(tree.root(), "eu-2").as_deref(), Some("eu"));
        assert_eq!(tree.via(eu, "eu"), None);

        let target = PlacementTarget {
            selector: Some(selector::parse("tier=edge").expect("valid")),
            names: vec!["eu-2".into()],
            max_clusters: Some(1),
            ..PlacementTarget::default()
        };
        let resolution = resolve_tree(&tree, "p", &target, None);
        assert_eq!(resolution.by_label.len(), 1);
        assert_eq!(resolution.by_name, ["eu-2".to_string()].into());
        assert_eq!(resolution.splits.len(), 2, "the root and eu decided");
        assert_eq!(resolution.root_quota.as_ref().map(|q| q.total), Some(1));
        assert_eq!(
            resolve_tree(&tree, "p", &target, Some(&resolution)),
            resolution
        );
    }
}
