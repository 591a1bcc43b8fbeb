//! The durable state of a relay's core, and the mutations that change it.
//!
//! [`Persisted`] is both what a relay loads at start-up and the in-memory
//! model the sled store is checked against: applying the same mutations to
//! both must give the same state, before and after a reopen.

use std::collections::BTreeMap;

use relaymesh_protocol::message::Resume;
use relaymesh_protocol::{BundleId, NodeRecord, SliceEntry};
use serde::{Deserialize, Serialize};

/// One durable change. The core emits them in batches; a batch is applied
/// atomically.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mutation {
    /// Sets the store's epoch (once, when the store is created).
    SetEpoch(u64),
    /// Adds or replaces a slice entry, changed at `revision`.
    PutEntry {
        /// The local revision of the change.
        revision: u64,
        /// The entry.
        entry: SliceEntry,
    },
    /// Removes the slice entry with this key.
    RemoveEntry(String),
    /// Records that `key` changed at `revision`, and makes `revision` the head.
    LogChange {
        /// The new head revision.
        revision: u64,
        /// The key that changed.
        key: String,
    },
    /// Forgets log records at or below `floor`; a child behind `floor` gets a
    /// snapshot.
    TrimLog {
        /// The new floor.
        floor: u64,
    },
    /// Where this relay stands in its parent's history.
    SetParentPosition(Resume),
    /// Forgets the position in the parent's history (a snapshot is needed).
    ClearParentPosition,
    /// The chain of names from the root to this relay's parent.
    SetAncestors(Vec<String>),
    /// Adds or replaces an inventory record; `via` is the direct child whose
    /// subtree holds the node (`None` for this relay itself).
    PutNode {
        /// The record.
        record: NodeRecord,
        /// The child it lies under.
        via: Option<String>,
    },
    /// Removes an inventory record.
    RemoveNode(String),
    /// Records a completed bundle transfer to a child, as running totals (so
    /// applying it twice changes nothing).
    RecordServed {
        /// The child the bundle went to.
        child: String,
        /// The bundle.
        bundle: BundleId,
        /// Transfers of this bundle to this child so far.
        bundle_total: Served,
        /// Transfers of any bundle to this child so far.
        link_total: Served,
    },
    /// Forgets the per-bundle transfer records of a bundle this relay no
    /// longer holds; the per-link totals stay.
    ForgetServed(BundleId),
    /// What a placement's cut among the children is now, as a digest
    /// (`None`: the placement is gone), so that a restarted relay can tell
    /// whether its first cut differs from the one its children hold.
    SetCutDigest {
        /// The placement entry's key.
        key: String,
        /// The digest of the cut.
        digest: Option<[u8; 32]>,
    },
}

/// Completed bundle transfers: how many, and their payload bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// Completed transfers.
    pub times: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

impl Served {
    /// These totals with one more transfer of `bytes`.
    pub fn plus(self, bytes: u64) -> Self {
        Self {
            times: self.times.saturating_add(1),
            bytes: self.bytes.saturating_add(bytes),
        }
    }
}

/// Everything a relay's core needs to start where it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persisted {
    /// A random number fixed when the store was created.
    pub epoch: u64,
    /// The newest local revision.
    pub head: u64,
    /// Log records at or below this revision were trimmed.
    pub log_floor: u64,
    /// Which key changed at each revision above the floor.
    pub log: BTreeMap<u64, String>,
    /// The slice: entries by key, with the revision of their last change.
    pub entries: BTreeMap<String, (u64, SliceEntry)>,
    /// Where this relay stands in its parent's history.
    pub parent_position: Option<Resume>,
    /// The chain of names from the root to this relay's parent.
    pub ancestors: Vec<String>,
    /// The inventory of this relay's subtree, with the child each node is under.
    pub nodes: BTreeMap<String, (NodeRecord, Option<String>)>,
    /// Bundle transfers to each child, per held bundle.
    pub served: BTreeMap<(BundleId, String), Served>,
    /// Bundle transfers to each child, in all.
    pub served_totals: BTreeMap<String, Served>,
    /// The digest of each placement's last cut among the children.
    pub cut_digests: BTreeMap<String, [u8; 32]>,
}

impl Persisted {
    /// Applies one mutation to the in-memory state.
    pub fn apply(&mut self, mutation: &Mutation) {
        match mutation {
            Mutation::SetEpoch(epoch) => self.epoch = *epoch,
            Mutation::PutEntry { revision, entry } => {
                self.entries
                    .insert(entry.key.clone(), (*revision, entry.clone()));
            }
            Mutation::RemoveEntry(key) => {
                self.entries.remove(key);
            }
            Mutation::LogChange { revision, key } => {
                self.log.insert(*revision, key.clone());
                self.head = self.head.max(*revision);
            }
            Mutation::TrimLog { floor } => {
                self.log.retain(|revision, _| revision > floor);
                self.log_floor = self.log_floor.max(*floor);
            }
            Mutation::SetParentPosition(position) => self.parent_position = Some(*position),
            Mutation::ClearParentPosition => self.parent_position = None,
            Mutation::SetAncestors(ancestors) => self.ancestors = ancestors.clone(),
            Mutation::PutNode { record, via } => {
                self.nodes
                    .insert(record.name.clone(), (record.clone(), via.clone()));
            }
            Mutation::RemoveNode(name) => {
                self.nodes.remove(name);
            }
            Mutation::RecordServed {
                child,
                bundle,
                bundle_total,
                link_total,
            } => {
                self.served.insert((*bundle, child.clone()), *bundle_total);
                self.served_totals.insert(child.clone(), *link_total);
            }
            Mutation::ForgetServed(bundle) => {
                self.served.retain(|(id, _), _| id != bundle);
            }
            Mutation::SetCutDigest { key, digest } => match digest {
                Some(digest) => {
                    self.cut_digests.insert(key.clone(), *digest);
                }
                None => {
                    self.cut_digests.remove(key);
                }
            },
        }
    }
}
