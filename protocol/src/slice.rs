//! The desired-state slice: what a relay holds for its subtree and sends on.
//!
//! A slice is a set of entries by key. Each entry says which part of the tree
//! it is for ([`Target`]), which bundles it references, and carries a body the
//! transport does not interpret (placements, later). A relay forwards to each
//! child only the entries that can concern that child's subtree.

use serde::{Deserialize, Serialize};

use crate::{BundleId, PlacementTarget};

/// One entry of a slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceEntry {
    /// Unique key within the slice, such as `bundle/demo`.
    pub key: String,
    /// Which subtrees the entry is for.
    pub target: Target,
    /// Bundles the entry references; a relay that forwards the entry fetches
    /// them from its parent.
    pub bundles: Vec<BundleId>,
    /// The entry's payload, opaque to the transport.
    pub body: Vec<u8>,
}

/// Which part of the tree a slice entry is for.
// Not `non_exhaustive`: a new variant must make every routing decision in
// `topology` fail to compile until it handles it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// Every node of the tree.
    Everywhere,
    /// The named nodes and their subtrees.
    Subtrees(Vec<String>),
    /// The clusters a placement selects, resolved level by level.
    Placement(PlacementTarget),
}

/// One change of a slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceChange {
    /// Add or replace the entry with this key.
    Upsert(SliceEntry),
    /// Remove the entry with this key (a no-op if absent).
    Remove(String),
}

impl SliceChange {
    /// The key this change is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Upsert(entry) => &entry.key,
            Self::Remove(key) => key,
        }
    }
}
