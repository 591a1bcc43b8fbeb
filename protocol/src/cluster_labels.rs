//! Cluster labels set at the root: `relayctl label cluster NAME k=v k2-`
//! changes a cluster's labels without joining it again.
//!
//! The root sends the change as a signed slice entry keyed under
//! [`KEY_PREFIX`] to the cluster alone (and the relays above it, which
//! forward it). The cluster's labels are then the ones its agent was given
//! at join, with [`ClusterLabels::set`] set and [`ClusterLabels::remove`]
//! removed; its agent reports them up like any change of its record, so
//! placements follow, and its templates and status rules read them. The
//! same entry carries the cluster's annotations (`relayctl annotate
//! cluster`), which only its templates read: they stay at the cluster and
//! the root, and never climb the tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::{SliceEntry, Target};

/// The key prefix of every cluster-labels entry in the slice.
pub const KEY_PREFIX: &str = "labels/";

/// Why a slice entry under [`KEY_PREFIX`] is not usable.
pub type ClusterLabelsError = crate::slice::KeyedEntryError;

/// The root's changes to one node's labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterLabels {
    /// The node.
    pub node: String,
    /// Labels set, over those it joined with.
    pub set: BTreeMap<String, String>,
    /// Labels removed from those it joined with.
    pub remove: Vec<String>,
    /// The cluster's annotations, all of them (a cluster joins with none).
    /// Appended in protocol version 7; an entry written before decodes
    /// with none.
    pub annotations: BTreeMap<String, String>,
}

/// [`ClusterLabels`] as protocol version 6 encoded it, without annotations:
/// what a store written then holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ClusterLabelsV6 {
    node: String,
    set: BTreeMap<String, String>,
    remove: Vec<String>,
}

impl ClusterLabels {
    /// The entry key for `node`: `labels/<node>`.
    pub fn key_for(node: &str) -> String {
        format!("{KEY_PREFIX}{node}")
    }

    /// The node's labels: `base` (those it joined with) with these changes.
    pub fn apply(&self, base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut labels = base.clone();
        for key in &self.remove {
            labels.remove(key);
        }
        labels.extend(
            self.set
                .iter()
                .map(|(key, value)| (key.clone(), value.clone())),
        );
        labels
    }

    /// The unsigned slice entry that carries the change to the node.
    pub fn to_entry(&self) -> Result<SliceEntry, CodecError> {
        Ok(SliceEntry {
            key: Self::key_for(&self.node),
            target: Target::Subtrees(vec![self.node.clone()]),
            bundles: Vec::new(),
            body: codec::encode(self)?,
            serial: 0,
            signature: Vec::new(),
        })
    }

    /// The change an entry carries: `None` if the entry is not one, an error
    /// if it claims to be one but does not decode or names another node.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, ClusterLabelsError>> {
        let decoded = crate::slice::decode_keyed(
            entry,
            "cluster labels",
            KEY_PREFIX,
            |labels: &ClusterLabels| ClusterLabels::key_for(&labels.node),
        );
        if !matches!(decoded, Some(Err(ClusterLabelsError::Body { .. }))) {
            return decoded;
        }
        let older = crate::slice::decode_keyed(
            entry,
            "cluster labels",
            KEY_PREFIX,
            |labels: &ClusterLabelsV6| ClusterLabels::key_for(&labels.node),
        );
        match older {
            Some(Ok(ClusterLabelsV6 { node, set, remove })) => Some(Ok(Self {
                node,
                set,
                remove,
                annotations: BTreeMap::new(),
            })),
            _ => decoded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_change_survives_its_entry(
            node in "[a-z][a-z0-9-]{0,20}",
            set in proptest::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,8}", 0..4),
            remove in proptest::collection::vec("[a-z]{1,8}", 0..4),
            annotations in proptest::collection::btree_map("[a-z./]{1,12}", ".{0,16}", 0..3),
        ) {
            let labels = ClusterLabels { node: node.clone(), set, remove, annotations };
            let entry = labels.to_entry().expect("test");
            prop_assert_eq!(&entry.target, &Target::Subtrees(vec![node]));
            prop_assert_eq!(ClusterLabels::from_entry(&entry).expect("labels").expect("decodes"), labels);
        }
    }

    #[test]
    fn set_wins_over_the_base_and_remove_takes_away() {
        let base: BTreeMap<String, String> = [
            ("region".into(), "eu".into()),
            ("tier".into(), "small".into()),
        ]
        .into();
        let change = ClusterLabels {
            node: "edge-1".into(),
            set: [("tier".into(), "large".into())].into(),
            remove: vec!["region".into()],
            annotations: BTreeMap::new(),
        };
        let labels = change.apply(&base);
        assert_eq!(labels, [("tier".to_string(), "large".to_string())].into());
    }

    #[test]
    fn an_entry_written_before_annotations_reads_with_none() {
        let older = ClusterLabelsV6 {
            node: "edge-1".into(),
            set: [("tier".into(), "large".into())].into(),
            remove: vec![],
        };
        let mut entry = ClusterLabels::default().to_entry().expect("encodes");
        entry.key = ClusterLabels::key_for("edge-1");
        entry.body = codec::encode(&older).expect("encodes");
        let read = ClusterLabels::from_entry(&entry)
            .expect("a labels entry")
            .expect("decodes");
        assert_eq!(read.set, older.set);
        assert!(read.annotations.is_empty());
        entry.body = vec![0xff; 3];
        assert!(matches!(
            ClusterLabels::from_entry(&entry),
            Some(Err(ClusterLabelsError::Body { .. }))
        ));
    }
}
