//! Where the object store keeps its bytes: a sorted map of keys to values
//! whose batches of writes are atomic. The store's own logic (resource
//! versions, history, watches, owners, quarantine) sits above it, so a
//! replicated backend slots in beside the embedded sled default.
//!
//! The store writes at most one batch at a time (it holds its lock), and
//! every batch carries the new resourceVersion beside the objects, so a
//! backend need not order concurrent writers.
//!
//! A scan hands out [`Bytes`], not owned vectors: lists read every object of
//! a resource, and a backend that keeps its values in shared buffers (sled
//! does) can lend them without copying each one.

use bytes::Bytes;

/// One write of a batch: the value to put at a key, or `None` to remove it.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// A key and its value, as a scan yields them.
pub type Entry = (Bytes, Bytes);

/// Why a backend could not read or write.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

impl From<sled::Error> for BackendError {
    fn from(error: sled::Error) -> Self {
        Self(format!("sled: {error}"))
    }
}

/// What the object store needs of its storage.
pub trait ObjectBackend: Send + Sync + 'static {
    /// The value at `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, BackendError>;

    /// Whether `key` holds a value.
    fn contains(&self, key: &[u8]) -> Result<bool, BackendError> {
        Ok(self.get(key)?.is_some())
    }

    /// Every key that starts with `prefix`, and its value, in key order.
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a>;

    /// Applies `writes` at once: all of them or none.
    fn apply(&self, writes: Vec<Write>) -> Result<(), BackendError>;
}

/// The embedded default: one sled tree.
impl ObjectBackend for sled::Tree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, BackendError> {
        Ok(sled::Tree::get(self, key)?.map(|value| value.to_vec()))
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
            item.map(|(key, value)| (Bytes::from_owner(key), Bytes::from_owner(value)))
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
        assert_eq!(backend.get(b"o/a").expect("read"), Some(b"1".to_vec()));
        assert!(backend.contains(b"v").expect("read"));
        let scanned: Vec<Entry> = backend
            .scan_prefix(b"o/")
            .collect::<Result<_, _>>()
            .expect("scanned");
        assert_eq!(
            scanned,
            vec![
                (Bytes::from_static(b"o/a"), Bytes::from_static(b"1")),
                (Bytes::from_static(b"o/b"), Bytes::from_static(b"2"))
            ]
        );
        backend
            .apply(vec![(b"o/a".to_vec(), None)])
            .expect("removed");
        assert_eq!(backend.get(b"o/a").expect("read"), None);
    }
}
