//! The store's journal: at a root replicated on etcd, every write to the
//! node's own trees is recorded and handed to a [`Mirror`] at the next
//! flush, before the flush returns. What the daemon made durable (and may
//! acknowledge to a child) is then in the mirror too, so a replica that
//! takes over loads the node exactly as its children last saw it.
//!
//! - Writes go through [`Journaled`], a sled tree that records each write
//!   while it holds the journal's lock, so the record's order is sled's.
//! - Per-replica keys (its configuration, candidates, where its objects
//!   live, the store's format) are never recorded: each replica has its own.
//! - Without a mirror nothing is recorded; a relay pays one atomic load.

use std::sync::{Arc, Mutex, OnceLock};

use sled::IVec;

/// The trees of the node's own state: everything a replica must load to
/// be the root (not `objects`, which has its own backend).
pub const MIRRORED_TREES: &[&str] = &[
    "node",
    "state",
    "bundles",
    "bundle-chunks",
    "tokens",
    super::issued_tokens::TREE,
    super::issuer_keys::TREE,
    super::issuer_keys::ROTATED,
    super::users::TREE,
];

/// The keys of the `node` tree that belong to one replica alone.
const LOCAL_KEYS: &[&[u8]] = &[
    super::format::FORMAT,
    super::format::WRITTEN_BY,
    super::CONFIG,
    super::CANDIDATES,
    super::OBJECTS_STORE,
];

/// Whether `key` of `tree` is one replica's own.
pub fn is_local(tree: &str, key: &[u8]) -> bool {
    tree == "node" && LOCAL_KEYS.contains(&key)
}

/// One write: `value` under `key` of `tree`, or the key removed (`None`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Op {
    /// The tree's name (one of [`MIRRORED_TREES`]).
    pub tree: String,
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a removal.
    pub value: Option<Vec<u8>>,
}

/// Why a mirror did not take a group of writes.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// Out of reach for now (etcd without a quorum): the flush waits and
    /// tries again, so nothing depending on the writes leaves the node.
    #[error("the mirror is unavailable: {0}")]
    Unavailable(String),
    /// Refused for good (this replica no longer leads).
    #[error("{0}")]
    Refused(String),
}

/// How long a flush waits between two tries of an unavailable mirror.
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Where the journal goes: at a replicated root, etcd.
pub trait Mirror: Send + Sync {
    /// Stores `ops`, in order, atomically: all or none. `image` gives every
    /// key the store holds now, for a mirror that compacts its log into a
    /// checkpoint.
    fn ship(&self, ops: &[Op], image: &dyn Fn() -> Vec<Op>) -> Result<(), MirrorError>;
}

/// The journal one store's handles share.
#[derive(Default)]
pub(super) struct Journal {
    mirror: OnceLock<Arc<dyn Mirror>>,
    /// Written, not yet shipped, in sled's order.
    pending: Mutex<Vec<Op>>,
    /// Held while shipping, so that groups reach the mirror in order.
    shipping: Mutex<()>,
}

impl Journal {
    /// Sets the mirror; `false` if one was set already.
    pub(super) fn set_mirror(&self, mirror: Arc<dyn Mirror>) -> bool {
        self.mirror.set(mirror).is_ok()
    }

    pub(super) fn recording(&self) -> bool {
        self.mirror.get().is_some()
    }

    /// Runs `write` and records `ops` if it succeeds and `keep` says so,
    /// under the lock, so that two writers of one key are recorded in the
    /// order sled applied them.
    fn write<T>(
        &self,
        ops: impl FnOnce() -> Vec<Op>,
        write: impl FnOnce() -> sled::Result<T>,
        keep: impl FnOnce(&T) -> bool,
    ) -> sled::Result<T> {
        if !self.recording() {
            return write();
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let written = write()?;
        if keep(&written) {
            pending.extend(ops());
        }
        Ok(written)
    }

    /// Hands what was written since the last ship to the mirror.
    pub(super) fn ship(&self, image: &dyn Fn() -> Vec<Op>) -> Result<(), String> {
        let Some(mirror) = self.mirror.get() else {
            return Ok(());
        };
        let _shipping = self.shipping.lock().unwrap_or_else(|p| p.into_inner());
        let ops = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if ops.is_empty() {
            return Ok(());
        }
        let mut tries = 0u32;
        loop {
            match mirror.ship(&ops, image) {
                Ok(()) => return Ok(()),
                // The flush waits: what depends on these writes (entries
                // sent down, a token accepted) must not happen before the
                // mirror holds them, and a root without etcd does nothing
                // new; its fleet keeps what it has.
                Err(MirrorError::Unavailable(reason)) => {
                    if tries.is_multiple_of(40) {
                        tracing::warn!(%reason, "the mirror is unavailable; waiting to flush");
                    }
                    tries = tries.wrapping_add(1);
                    std::thread::sleep(RETRY_EVERY);
                }
                Err(MirrorError::Refused(reason)) => {
                    // Kept, ahead of anything written since.
                    let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    pending.splice(0..0, ops);
                    return Err(reason);
                }
            }
        }
    }
}

/// A batch of writes to one [`Journaled`] tree, applied atomically.
#[derive(Default)]
pub struct Batch {
    writes: Vec<(IVec, Option<IVec>)>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: impl Into<IVec>, value: impl Into<IVec>) {
        self.writes.push((key.into(), Some(value.into())));
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: impl Into<IVec>) {
        self.writes.push((key.into(), None));
    }
}

/// A sled tree whose writes the journal records. Reads go to sled as they
/// are (through `Deref`); the writes below shadow sled's own.
#[derive(Clone)]
pub struct Journaled {
    tree: sled::Tree,
    name: Arc<str>,
    journal: Arc<Journal>,
}

impl std::ops::Deref for Journaled {
    type Target = sled::Tree;

    fn deref(&self) -> &sled::Tree {
        &self.tree
    }
}

impl Journaled {
    pub(super) fn new(tree: sled::Tree, name: &str, journal: Arc<Journal>) -> Self {
        Self {
            tree,
            name: name.into(),
            journal,
        }
    }

    fn op(&self, key: &[u8], value: Option<&[u8]>) -> Option<Op> {
        (!is_local(&self.name, key)).then(|| Op {
            tree: self.name.to_string(),
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
        })
    }

    /// sled's `insert`, recorded.
    pub fn insert(
        &self,
        key: impl AsRef<[u8]>,
        value: impl Into<IVec>,
    ) -> sled::Result<Option<IVec>> {
        let value: IVec = value.into();
        let key = key.as_ref();
        self.journal.write(
            || self.op(key, Some(&value)).into_iter().collect(),
            || self.tree.insert(key, value.clone()),
            |_| true,
        )
    }

    /// sled's `remove`, recorded.
    pub fn remove(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        let key = key.as_ref();
        self.journal.write(
            || self.op(key, None).into_iter().collect(),
            || self.tree.remove(key),
            |_| true,
        )
    }

    /// sled's `apply_batch`, recorded.
    pub fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        let ops = || {
            batch
                .writes
                .iter()
                .filter_map(|(key, value)| self.op(key, value.as_deref()))
                .collect()
        };
        let mut sled_batch = sled::Batch::default();
        for (key, value) in &batch.writes {
            match value {
                Some(value) => sled_batch.insert(key.clone(), value.clone()),
                None => sled_batch.remove(key.clone()),
            }
        }
        self.journal
            .write(ops, || self.tree.apply_batch(sled_batch), |_| true)
    }

    /// sled's `compare_and_swap`, recorded when it swapped.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> sled::Result<Result<(), sled::CompareAndSwapError>> {
        let key = key.as_ref();
        self.journal.write(
            || self.op(key, new).into_iter().collect(),
            || self.tree.compare_and_swap(key, old, new),
            |swapped| swapped.is_ok(),
        )
    }
}
