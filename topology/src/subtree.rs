//! An index of a relay's subtree: for every node below the relay, the direct
//! child it lies under.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::NodeRecord;

/// Every node below one relay, keyed by name, with the direct child of the
/// relay whose subtree holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubtreeIndex {
    via: BTreeMap<String, String>,
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

    /// The names of the nodes under `child`, the child included.
    pub fn under<'a>(&'a self, child: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.via
            .iter()
            .filter(move |(_, via)| via.as_str() == child)
            .map(|(name, _)| name.as_str())
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
        self.via.insert(record.name.clone(), child.to_string());
        Ok(())
    }

    /// Forgets `node` if `child` reported it.
    pub fn remove(&mut self, child: &str, node: &str) -> bool {
        if self.via.get(node).map(String::as_str) == Some(child) {
            self.via.remove(node);
            return true;
        }
        false
    }

    /// Forgets everything under `child` but the child itself, and returns the
    /// names forgotten.
    pub fn clear_below(&mut self, child: &str) -> BTreeSet<String> {
        let below: BTreeSet<String> = self
            .under(child)
            .filter(|name| *name != child)
            .map(str::to_string)
            .collect();
        for name in &below {
            self.via.remove(name);
        }
        below
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
}
