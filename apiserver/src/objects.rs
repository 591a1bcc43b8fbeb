//! Unstructured object storage for the root's Kubernetes API, as kcp does it:
//! objects of every kind are JSON documents in one sorted key-value
//! backend ([`ObjectBackend`]: a sled tree by default), keyed by group,
//! plural resource, namespace and name.
//!
//! What the store owns: the single, persisted, monotonically increasing
//! `resourceVersion` (every write takes the next one), the fields the server
//! sets (`uid`, `creationTimestamp`, `generation`, `resourceVersion`),
//! optimistic concurrency on updates, and a bounded in-memory history of
//! changes plus a broadcast channel, from which watches are served.
//!
//! What it does not do: validation, kinds and scopes (the API's resource
//! registry knows those), selectors, or patching. Writes are serialized by one
//! mutex; a write is one atomic batch (object and counter together).
//!
//! Every object it writes is within the API's depth limit
//! ([`crate::depth`]), so it can always be read back. One that cannot be
//! read all the same (written by an older version, or damaged) is
//! *quarantined*: logged once by key, left out of lists, watches and the
//! owner index, named by [`ObjectStore::quarantined`] (and so at
//! `/readyz?verbose`), an error naming it on a get, and removable with
//! [`ObjectStore::remove_quarantined`]. One bad object never stops the
//! store from opening.
//!
//! Each part has a module of its own, and none imports this one: the
//! shared vocabulary (the keyspace with [`ObjectKey`], the error, the
//! backend) sits at the bottom, the history, quarantine, scans, owner index
//! and server-set fields above it, and the store's reads and its write path
//! on top. This module only declares them and hands their public items on,
//! at the paths the API has always had.

mod backend;
mod dependents;
mod error;
mod history;
mod key;
pub(crate) mod owners;
mod quarantine;
mod replica;
mod scan;
mod stamp;
mod store;
#[cfg(test)]
mod tests;
mod write;

pub use backend::{
    BackendError, Change, Entry, Expect, FeedItem, ObjectBackend, Replicated, Stored, Write,
};
pub use dependents::{GenerationDependents, StoreReader};
pub use error::ObjectError;
pub use history::{ObjectEvent, WatchEventType, HISTORY_LEN};
pub use key::{ObjectKey, OBJECT_PREFIX};
pub use stamp::new_uid;
pub use store::{ObjectStore, INITIAL_NAMESPACES};
