//! Where the object store keeps its bytes. Two kinds of backend:
//!
//! - **Local** (sled, the embedded default): a sorted map whose batches of
//!   writes are atomic. The store numbers resourceVersions itself, holds its
//!   lock across every write and publishes each change as it makes it.
//! - **Replicated** (etcd, [`super::etcd`]): several stores (root replicas)
//!   share it. The backend numbers the versions (etcd's revisions), every
//!   write is checked against what its key held when the store read it
//!   ([`Expect`]), and each store learns of every change, its own and the
//!   other replicas', from the backend's feed ([`Replicated::follow`]).
//!
//! A scan hands out [`Bytes`], not owned vectors: lists read every object of
//! a resource, and a backend that keeps its values in shared buffers (sled
//! does) can lend them without copying each one.

use bytes::Bytes;

/// One write of a batch: the value to put at a key, or `None` to remove it.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// A key and what it holds, as a scan yields them.
pub type Entry = (Bytes, Stored);

/// A stored value and, in a replicated backend, the revision that wrote it:
/// the object's resourceVersion, which the stored bytes cannot carry (the
/// revision is known only once the write is made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The stored bytes.
    pub value: Bytes,
    /// The revision of the write, if the backend numbers them; a local
    /// backend's values carry their resourceVersion themselves.
    pub revision: Option<u64>,
}

impl Stored {
    /// A value whose resourceVersion is inside it (a local backend's).
    pub fn local(value: impl Into<Bytes>) -> Self {
        Self {
            value: value.into(),
            revision: None,
        }
    }
}

/// Why a backend could not read or write.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend failed (an IO error, a corrupt file).
    #[error("{0}")]
    Failed(String),
    /// The backend cannot answer now (a replicated one without a quorum, or
    /// out of reach); the request may be retried.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The history asked for was compacted away.
    #[error("revision {requested} was compacted (the oldest kept is {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: u64,
        /// The compaction revision: history begins after it.
        compacted: u64,
    },
}

impl From<sled::Error> for BackendError {
    fn from(error: sled::Error) -> Self {
        Self::Failed(format!("sled: {error}"))
    }
}

/// What the object store needs of its storage.
pub trait ObjectBackend: Send + Sync + 'static {
    /// The value at `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Stored>, BackendError>;

    /// Whether `key` holds a value.
    fn contains(&self, key: &[u8]) -> Result<bool, BackendError> {
        Ok(self.get(key)?.is_some())
    }

    /// Every key that starts with `prefix`, and its value, in key order.
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a>;

    /// Applies `writes` at once: all of them or none. Only a local backend's
    /// store calls it; a replicated one writes through
    /// [`Replicated::commit`].
    fn apply(&self, writes: Vec<Write>) -> Result<(), BackendError>;

    /// The replicated side of this backend; `None` for a local one.
    fn replicated(&self) -> Option<&dyn Replicated> {
        None
    }
}

/// What a replicated write expects its key to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing (a create).
    Absent,
    /// The value written at this revision (an update or delete of what the
    /// store read).
    Revision(u64),
}

/// What happened to a key, as a replicated backend's feed reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The key.
    pub key: Bytes,
    /// The revision of the change.
    pub revision: u64,
    /// What the key holds after it (`None`: it was deleted).
    pub value: Option<Bytes>,
    /// Whether the change created the key (a put where nothing was).
    pub created: bool,
    /// What it held before, when the backend still has it.
    pub previous: Option<Stored>,
}

/// What a replicated backend's feed hands its store, in revision order.
#[derive(Debug)]
pub enum FeedItem {
    /// A key changed.
    Change(Change),
    /// The changes up to this revision that the feed had not handed over
    /// were compacted away while it was broken; it goes on after this
    /// revision, and the store must rebuild what it derived from them.
    Restarted(u64),
}

/// A backend several stores share, which numbers the versions itself.
pub trait Replicated: Send + Sync {
    /// Puts `value` at `key` (or removes it, for `None`) if the key holds
    /// what `expect` says. The revision the write took, or `None` if the key
    /// held something else (another writer came first).
    fn commit(
        &self,
        key: &[u8],
        value: Option<Vec<u8>>,
        expect: Expect,
    ) -> Result<Option<u64>, BackendError>;

    /// The latest revision, read from a quorum.
    fn revision(&self) -> Result<u64, BackendError>;

    /// Every key under `prefix` and its value now, in key order, and the
    /// revision they are at.
    fn scan_latest(&self, prefix: &[u8]) -> Result<(Vec<Entry>, u64), BackendError>;

    /// Every key under `prefix` and its value as they were at `revision`,
    /// in key order.
    fn scan_at(&self, prefix: &[u8], revision: u64) -> Result<Vec<Entry>, BackendError>;

    /// The changes of the keyspace after revision `after`, up to and with
    /// `until`, which must be the revision of a change (the feed's last, or
    /// a fence's); [`BackendError::Compacted`] if they are no longer kept.
    fn changes(&self, after: u64, until: u64) -> Result<Vec<Change>, BackendError>;

    /// Hands every change of the backend's keyspace after revision `after`
    /// to `sink`, in order, from a task of its own, for as long as the
    /// backend lives. The whole keyspace, not only the objects: every
    /// revision the store may be asked to reach then arrives as a change.
    fn follow(&self, after: u64, sink: Box<dyn FnMut(FeedItem) + Send>)
        -> Result<(), BackendError>;

    /// Writes a fence: a key outside the objects whose change the feed
    /// hands over like any other. Its revision, later than every write
    /// made before the call: once the feed has brought it, it has brought
    /// them. (etcd's own progress notifications could overtake events in
    /// etcd before 3.4.24, etcd-io/etcd#15220, so they are not used.)
    fn fence(&self) -> Result<u64, BackendError>;
}

/// The embedded default: one sled tree.
impl ObjectBackend for sled::Tree {
    fn get(&self, key: &[u8]) -> Result<Option<Stored>, BackendError> {
        Ok(sled::Tree::get(self, key)?.map(|value| Stored::local(Bytes::from_owner(value))))
    }

    fn contains(&self, key: &[u8]) -> Result<bool, BackendError> {
        Ok(self.contains_key(key)?)
    }

    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a> {
        Box::new(sled::Tree::scan_prefix(self, prefix).map(|item| {
            // An `IVec` shares sled's buffer (or holds a short value
            // inline): the `Bytes` keeps it alive instead of copying it.
            item.map(|(key, value)| {
                (
                    Bytes::from_owner(key),
                    Stored::local(Bytes::from_owner(value)),
                )
            })
            .map_err(BackendError::from)
        }))
    }

    fn apply(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        let mut batch = sled::Batch::default();
        for (key, value) in writes {
            match value {
                Some(value) => batch.insert(key, value),
                None => batch.remove(key),
            }
        }
        Ok(self.apply_batch(batch)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_applies_batches_and_scans_in_key_order() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let tree = db.open_tree("objects").expect("a tree");
        let backend: &dyn ObjectBackend = &tree;
        backend
            .apply(vec![
                (b"o/b".to_vec(), Some(b"2".to_vec())),
                (b"o/a".to_vec(), Some(b"1".to_vec())),
                (b"v".to_vec(), Some(b"9".to_vec())),
            ])
            .expect("written");
        assert_eq!(
            backend.get(b"o/a").expect("read"),
            Some(Stored::local(Bytes::from_static(b"1")))
        );
        assert!(backend.contains(b"v").expect("read"));
        let scanned: Vec<Entry> = backend
            .scan_prefix(b"o/")
            .collect::<Result<_, _>>()
            .expect("scanned");
        assert_eq!(
            scanned,
            vec![
                (Bytes::from_static(b"o/a"), Stored::local(&b"1"[..])),
                (Bytes::from_static(b"o/b"), Stored::local(&b"2"[..]))
            ]
        );
        backend
            .apply(vec![(b"o/a".to_vec(), None)])
            .expect("removed");
        assert_eq!(backend.get(b"o/a").expect("read"), None);
    }
}
