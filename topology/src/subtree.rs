//! An index of a relay's subtree: for every node below the relay, the direct
//! child it lies under.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::NodeRecord;

/// Every node below one relay, keyed by name, with the direct child of the
/// relay whose subtree holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubtreeIndex {
    via: BTreeMap<String, String>,
    /// `via` by child: the names below each direct child, the child
    /// itself left out, so that listing one child's subtree costs its size,
    /// not a walk of every node (at the root, the fleet) for each child's
    /// report. A child with nothing below it (every agent) has no entry: a
    /// set holding only its own name cost a relay about 400 bytes per child.
    members: BTreeMap<String, BTreeSet<String>>,
}

/// A child tried to report a node it may not speak for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubtreeError {
    /// The node already lies under another child.
    #[error("node {node:?} belongs to the subtree of {owner:?}, not {child:?}")]
    OtherSubtree {
        /// The reported node.
        node: String,
        /// The child that already reports it.
        owner: String,
        /// The child that reported it now.
        child: String,
    },
    /// The record's parent is neither the child nor a node of its subtree.
    #[error("node {node:?} names parent {parent:?}, which is not in the subtree of {child:?}")]
    Detached {
        /// The reported node.
        node: String,
        /// The parent it names.
        parent: String,
        /// The child that reported it.
        child: String,
    },
}

impl SubtreeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The direct child whose subtree holds `node`, or `node` itself if it is
    /// a direct child.
    pub fn via(&self, node: &str) -> Option<&str> {
        self.via.get(node).map(String::as_str)
    }

    /// Whether `node` lies below this relay.
    pub fn contains(&self, node: &str) -> bool {
        self.via.contains_key(node)
    }

    /// How many nodes lie below this relay.
    pub fn len(&self) -> usize {
        self.via.len()
    }

    /// Whether nothing lies below this relay.
    pub fn is_empty(&self) -> bool {
        self.via.is_empty()
    }

    /// The names of the nodes under `child`: the child first, if it is
    /// indexed as a direct child, then the nodes below it by name.
    pub fn under<'a>(&'a self, child: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let own = (self.via(child) == Some(child)).then_some(child);
        own.into_iter().chain(
            self.members
                .get(child)
                .into_iter()
                .flatten()
                .map(String::as_str),
        )
    }

    /// Checks that `child` may report `record` and, if so, indexes it. A child
    /// speaks for itself and for nodes whose parent is already in its subtree
    /// (records arrive parent first), never for a node of another subtree.
    pub fn admit(&mut self, child: &str, record: &NodeRecord) -> Result<(), SubtreeError> {
        if let Some(owner) = self.via.get(&record.name) {
            if owner != child {
                return Err(SubtreeError::OtherSubtree {
                    node: record.name.clone(),
                    owner: owner.clone(),
                    child: child.to_string(),
                });
            }
        }
        if record.name != child {
            let parent = record.parent.as_deref().unwrap_or_default();
            if self.via.get(parent).map(String::as_str) != Some(child) {
                return Err(SubtreeError::Detached {
                    node: record.name.clone(),
                    parent: parent.to_string(),
                    child: child.to_string(),
                });
            }
        }
        if self
            .via
            .insert(record.name.clone(), child.to_string())
            .is_none()
            && record.name != child
        {
            self.members
                .entry(child.to_string())
                .or_default()
                .insert(record.name.clone());
        }
        Ok(())
    }

    /// Forgets `node` if `child` reported it.
    pub fn remove(&mut self, child: &str, node: &str) -> bool {
        if self.via.get(node).map(String::as_str) == Some(child) {
            self.via.remove(node);
            self.forget_member(child, node);
            return true;
        }
        false
    }

    /// Forgets everything under `child` but the child itself, and returns the
    /// names forgotten.
    pub fn clear_below(&mut self, child: &str) -> BTreeSet<String> {
        let below = self.members.remove(child).unwrap_or_default();
        for name in &below {
            self.via.remove(name);
        }
        below
    }

    fn forget_member(&mut self, child: &str, node: &str) {
        if let Some(members) = self.members.get_mut(child) {
            members.remove(node);
            if members.is_empty() {
                self.members.remove(child);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaymesh_protocol::Role;

    fn record(name: &str, parent: &str) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            role: Role::Relay,
            parent: Some(parent.into()),
            labels: Default::default(),
            addresses: vec![],
            version: String::new(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        }
    }

    #[test]
    fn a_child_speaks_only_for_its_subtree() {
        let mut index = SubtreeIndex::new();
        assert!(index.admit("eu", &record("eu", "root")).is_ok());
        assert!(index.admit("us", &record("us", "root")).is_ok());
        assert!(index.admit("eu", &record("eu-west", "eu")).is_ok());
        assert_eq!(index.via("eu-west"), Some("eu"));
        // us may not claim eu's node, nor hang a node under eu's subtree.
        assert!(matches!(
            index.admit("us", &record("eu-west", "us")),
            Err(SubtreeError::OtherSubtree { .. })
        ));
        assert!(matches!(
            index.admit("us", &record("us-x", "eu-west")),
            Err(SubtreeError::Detached { .. })
        ));
        assert!(!index.remove("us", "eu-west"));
        assert_eq!(index.clear_below("eu").len(), 1);
        assert!(index.contains("eu") && !index.contains("eu-west"));
    }

    #[test]
    fn a_child_with_nothing_below_it_costs_no_member_set() {
        let mut index = SubtreeIndex::new();
        for child in ["eu", "us"] {
            assert!(index.admit(child, &record(child, "root")).is_ok());
        }
        assert!(index.members.is_empty());
        assert_eq!(index.under("eu").collect::<Vec<_>>(), ["eu"]);
        assert!(index.admit("eu", &record("eu-west", "eu")).is_ok());
        assert_eq!(index.under("eu").collect::<Vec<_>>(), ["eu", "eu-west"]);
        assert_eq!(
            index.clear_below("eu"),
            BTreeSet::from(["eu-west".to_string()])
        );
        assert!(index.members.is_empty());
        assert_eq!(index.under("eu").collect::<Vec<_>>(), ["eu"]);
    }

    /// What `under` answered before it had its own index: a walk of every
    /// node.
    fn walked(index: &SubtreeIndex, child: &str) -> Vec<String> {
        let via = &index.via;
        via.iter()
            .filter(|(_, via)| via.as_str() == child)
            .map(|(name, _)| name.clone())
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn under_lists_what_a_walk_of_every_node_finds(
            steps in proptest::collection::vec((0u8..3, 0u8..3, 0u8..12), 0..150)
        ) {
            let mut index = SubtreeIndex::new();
            let children = ["a", "b", "c"];
            for (op, child, node) in steps {
                let child = children[usize::from(child)];
                // Nodes hang under the child or under a node of its subtree.
                let name = format!("n{node}");
                let parent = index
                    .under(child)
                    .filter(|held| *held != name)
                    .last()
                    .unwrap_or(child)
                    .to_string();
                match op {
                    0 => {
                        let _ = index.admit(child, &record(child, "root"));
                        let _ = index.admit(child, &record(&name, &parent));
                    }
                    1 => {
                        index.remove(child, &name);
                    }
                    _ => {
                        let cleared = index.clear_below(child);
                        proptest::prop_assert!(!cleared.contains(child));
                    }
                }
                for child in children {
                    let mut listed: Vec<String> = index.under(child).map(str::to_string).collect();
                    // The child itself comes first; the rest by name.
                    if index.contains(child) {
                        proptest::prop_assert_eq!(listed.first().map(String::as_str), Some(child));
                    }
                    listed.sort();
                    proptest::prop_assert_eq!(listed, walked(&index, child));
                }
            }
        }
    }
}
