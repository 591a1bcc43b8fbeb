//! Reading many stored objects at once, in key order: the scans behind the
//! store's lists, a paged list's snapshot, the owner index's rebuild at open
//! and the generation dependents' reads. Every scan decodes through the
//! quarantine, so an object that cannot be decoded is left out instead of
//! failing the whole scan. The callers differ in what a backend error or a
//! malformed key does to them, so each has its own scan.

use std::collections::BTreeMap;

use serde_json::Value;
use tracing::warn;

use super::backend::ObjectBackend;
use super::error::ObjectError;
use super::key::{ObjectKey, OBJECT_PREFIX};
use super::quarantine::Quarantine;

/// The stored objects, as scans read them.
#[derive(Clone, Copy)]
pub(super) struct Scan<'a> {
    tree: &'a dyn ObjectBackend,
    quarantine: &'a Quarantine,
}

impl<'a> Scan<'a> {
    pub(super) fn new(tree: &'a dyn ObjectBackend, quarantine: &'a Quarantine) -> Self {
        Self { tree, quarantine }
    }

    /// The objects under `prefix`.
    pub(super) fn objects(&self, prefix: &str) -> Result<Vec<Value>, ObjectError> {
        let mut objects = Vec::new();
        for item in self.tree.scan_prefix(prefix.as_bytes()) {
            let (key, bytes) = item?;
            if let Some(object) = self.quarantine.decode_listed(&key, &bytes) {
                objects.push(object);
            }
        }
        Ok(objects)
    }

    /// The objects under `prefix`, by encoded key: what a paged list
    /// undoes later changes in.
    pub(super) fn by_encoded_key(
        &self,
        prefix: &str,
    ) -> Result<BTreeMap<String, Value>, ObjectError> {
        let mut objects = BTreeMap::new();
        for item in self.tree.scan_prefix(prefix.as_bytes()) {
            let (key, bytes) = item?;
            let text = String::from_utf8_lossy(&key).into_owned();
            if let Some(object) = self.quarantine.decode_listed(&key, &bytes) {
                objects.insert(text, object);
            }
        }
        Ok(objects)
    }

    /// Every object of every kind, with its key; one whose key is malformed
    /// is logged and left out.
    pub(super) fn all(&self) -> Result<Vec<(ObjectKey, Value)>, ObjectError> {
        let mut objects = Vec::new();
        for item in self.tree.scan_prefix(OBJECT_PREFIX.as_bytes()) {
            let (key, bytes) = item?;
            let text = String::from_utf8_lossy(&key).into_owned();
            let Some(object_key) = ObjectKey::decode(&key) else {
                warn!(key = %text, "stored object skipped: its key is malformed");
                continue;
            };
            if let Some(object) = self.quarantine.decode_listed(&key, &bytes) {
                objects.push((object_key, object));
            }
        }
        Ok(objects)
    }

    /// The objects under `prefix`, with their keys, as far as they can be
    /// read: a caller that cannot fail (it runs inside a write) gets what
    /// the backend yields, without the entries it fails on.
    pub(super) fn keyed(&self, prefix: &str) -> Vec<(ObjectKey, Value)> {
        let mut objects = Vec::new();
        for item in self.tree.scan_prefix(prefix.as_bytes()) {
            let Ok((key, bytes)) = item else {
                continue;
            };
            let Some(object_key) = ObjectKey::decode(&key) else {
                continue;
            };
            if let Some(object) = self.quarantine.decode_listed(&key, &bytes) {
                objects.push((object_key, object));
            }
        }
        objects
    }
}
