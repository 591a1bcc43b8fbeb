//! Which children a slice entry concerns.

use std::collections::BTreeSet;

use relaymesh_protocol::Target;

use crate::SubtreeIndex;

/// The children of one relay that an entry must be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Every child.
    All,
    /// Only these children (possibly none).
    Some(BTreeSet<String>),
}

impl Reach {
    /// Whether the entry goes to `child`.
    pub fn includes(&self, child: &str) -> bool {
        match self {
            Self::All => true,
            Self::Some(children) => children.contains(child),
        }
    }
}

/// The children of relay `me` that an entry with `target` concerns.
///
/// `ancestors` are the names from the root down to `me`'s parent. A target
/// naming `me` or an ancestor covers `me`'s whole subtree; one naming a node
/// below `me` goes only towards it; a name that is neither is not ours.
pub fn reach(target: &Target, me: &str, ancestors: &[String], index: &SubtreeIndex) -> Reach {
    match target {
        Target::Everywhere => Reach::All,
        Target::Subtrees(names) => {
            let mut children = BTreeSet::new();
            for name in names {
                if name == me || ancestors.iter().any(|a| a == name) {
                    return Reach::All;
                }
                if let Some(child) = index.via(name) {
                    children.insert(child.to_string());
                }
            }
            Reach::Some(children)
        }
        // Placements are cut per child by quota; see `placement`. Until a
        // relay knows its children's clusters it offers them to all.
        Target::Placement(_) => Reach::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use relaymesh_protocol::{NodeRecord, Role};

    fn index(pairs: &[(&str, &str)]) -> SubtreeIndex {
        let mut index = SubtreeIndex::new();
        for (name, parent) in pairs {
            let child = if *parent == "me" {
                *name
            } else {
                index.via(parent).unwrap_or(parent)
            }
            .to_string();
            let record = NodeRecord {
                name: name.to_string(),
                role: Role::Relay,
                parent: Some(parent.to_string()),
                labels: Default::default(),
                addresses: vec![],
                version: String::new(),
                link: None,
                capacity: Default::default(),
                refused_entries: 0,
                limit_refusals: Default::default(),
            };
            assert!(index.admit(&child, &record).is_ok());
        }
        index
    }

    #[test]
    fn targets_route_towards_named_nodes() {
        let index = index(&[("a", "me"), ("b", "me"), ("a1", "a"), ("a11", "a1")]);
        let ancestors = vec!["root".to_string()];
        let only = |names: &[&str]| Reach::Some(names.iter().map(|n| n.to_string()).collect());
        let subtrees =
            |names: &[&str]| Target::Subtrees(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(
            reach(&Target::Everywhere, "me", &ancestors, &index),
            Reach::All
        );
        assert_eq!(
            reach(&subtrees(&["a11"]), "me", &ancestors, &index),
            only(&["a"])
        );
        assert_eq!(
            reach(&subtrees(&["b", "a1"]), "me", &ancestors, &index),
            only(&["a", "b"])
        );
        assert_eq!(
            reach(&subtrees(&["me"]), "me", &ancestors, &index),
            Reach::All
        );
        assert_eq!(
            reach(&subtrees(&["root"]), "me", &ancestors, &index),
            Reach::All
        );
        assert_eq!(
            reach(&subtrees(&["elsewhere"]), "me", &ancestors, &index),
            only(&[])
        );
    }

    proptest! {
        #[test]
        fn reach_is_exactly_the_children_above_named_nodes(
            picks in prop::collection::vec(0usize..12, 0..5)
        ) {
            // A fixed tree: three children with three descendants each.
            let mut pairs = Vec::new();
            let mut names = Vec::new();
            for c in 0..3 {
                let child = format!("c{c}");
                pairs.push((child.clone(), "me".to_string()));
                names.push((child.clone(), child.clone()));
                for g in 0..3 {
                    let grandchild = format!("c{c}g{g}");
                    pairs.push((grandchild.clone(), child.clone()));
                    names.push((grandchild, child.clone()));
                }
            }
            let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let index = index(&borrowed);
            let targeted: Vec<String> = picks.iter().map(|i| names[*i].0.clone()).collect();
            let expected: BTreeSet<String> = picks.iter().map(|i| names[*i].1.clone()).collect();
            prop_assert_eq!(
                reach(&Target::Subtrees(targeted), "me", &[], &index),
                Reach::Some(expected)
            );
        }
    }
}
