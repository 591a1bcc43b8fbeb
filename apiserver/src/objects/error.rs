//! Why a store operation failed: one error type for every part of the
//! store, in a module of its own so that each part can name it without
//! importing the store.

use super::backend::BackendError;
use super::key::ObjectKey;
use crate::depth::TooDeep;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The backend failed.
    #[error("object storage failed: {0}")]
    Storage(#[from] BackendError),
    /// A stored object or counter cannot be decoded.
    #[error("stored object {key} is corrupt")]
    Corrupt {
        /// The sled key.
        key: String,
        /// Why it cannot be decoded.
        #[source]
        source: serde_json::Error,
    },
    /// The object to create exists already.
    #[error("{0} already exists")]
    AlreadyExists(ObjectKey),
    /// The object does not exist.
    #[error("{0} not found")]
    NotFound(ObjectKey),
    /// An update carried a resourceVersion other than the stored one.
    #[error("the object has been modified; please apply your changes to the latest version and try again (stored {stored}, given {given})")]
    Conflict {
        /// The stored object's resourceVersion.
        stored: u64,
        /// The one the update carried.
        given: String,
    },
    /// A watch asked for history older than the store keeps.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// The resourceVersion asked for.
        requested: u64,
        /// The oldest one a watch can start from.
        oldest: u64,
    },
    /// The object is not a JSON object.
    #[error("an object must be a JSON object")]
    NotAnObject,
    /// The object nests deeper than the API's limit.
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// The stored object cannot be decoded: it is quarantined.
    #[error("stored object {key} is corrupt and quarantined ({reason}); delete it to clear it")]
    Quarantined {
        /// Which object.
        key: ObjectKey,
        /// Why it cannot be decoded.
        reason: String,
    },
}
