//! Stored objects that cannot be decoded (written by an older version, or
//! damaged): decoding goes through here, so that one such object is logged
//! once by key, remembered with why, and left out, instead of failing every
//! list, watch and start that meets it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tracing::warn;

use super::backend::Stored;
use super::error::ObjectError;
use super::key::ObjectKey;

/// The quarantined objects, by encoded key, with why.
#[derive(Default)]
pub(super) struct Quarantine {
    entries: Mutex<BTreeMap<String, String>>,
}

impl Quarantine {
    /// A stored object, or [`ObjectError::Quarantined`] (quarantining it).
    pub(super) fn decode_stored(
        &self,
        key: &ObjectKey,
        encoded: &str,
        stored: &Stored,
    ) -> Result<Value, ObjectError> {
        decode_stored(encoded, stored).map_err(|error| ObjectError::Quarantined {
            key: key.clone(),
            reason: self.record(encoded, &error),
        })
    }

    /// A listed object, or `None` (quarantining it) if it cannot be
    /// decoded.
    pub(super) fn decode_listed(&self, key: &[u8], stored: &Stored) -> Option<Value> {
        let encoded = String::from_utf8_lossy(key);
        match decode_stored(&encoded, stored) {
            Ok(object) => Some(object),
            Err(error) => {
                self.record(&encoded, &error);
                None
            }
        }
    }

    /// The quarantined objects, with why.
    pub(super) fn list(&self) -> Vec<(ObjectKey, String)> {
        self.entries()
            .iter()
            .filter_map(|(encoded, reason)| {
                ObjectKey::decode(encoded.as_bytes()).map(|key| (key, reason.clone()))
            })
            .collect()
    }

    /// Forgets `encoded`, which is stored no more.
    pub(super) fn forget(&self, encoded: &str) {
        self.entries().remove(encoded);
    }

    /// Records `encoded` as quarantined, logging it the first time; returns
    /// the reason.
    fn record(&self, encoded: &str, error: &ObjectError) -> String {
        let reason = match error {
            ObjectError::Corrupt { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        let mut entries = self.entries();
        if !entries.contains_key(encoded) {
            let key = ObjectKey::decode(encoded.as_bytes())
                .map_or_else(|| encoded.to_string(), |key| key.to_string());
            warn!(%key, %reason, "stored object quarantined: it cannot be decoded; delete it to clear it");
            entries.insert(encoded.to_string(), reason.clone());
        }
        reason
    }

    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        // A map of keys, consistent after every statement.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The object `stored` at `key`, with the resourceVersion of the write
/// that stored it when the backend numbers its writes.
pub(super) fn decode_stored(key: &str, stored: &Stored) -> Result<Value, ObjectError> {
    let mut object = decode_object(key, &stored.value)?;
    if let Some(revision) = stored.revision {
        if !object.is_object() {
            return Err(ObjectError::NotAnObject);
        }
        super::stamp::set_resource_version(&mut object, revision);
    }
    Ok(object)
}

/// The object stored as `bytes` at `key`.
pub(super) fn decode_object(key: &str, bytes: &[u8]) -> Result<Value, ObjectError> {
    serde_json::from_slice(bytes).map_err(|source| ObjectError::Corrupt {
        key: key.to_string(),
        source,
    })
}
