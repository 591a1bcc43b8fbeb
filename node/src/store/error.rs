//! Why the store failed: sled's errors with the directory they happened in,
//! undecodable values, a store of another format, a directory in use.

use relaymesh_protocol::codec::CodecError;
use relaymesh_protocol::BundleId;

use super::format::{OLDEST_MIGRATED_FORMAT, STORE_FORMAT};

/// A failure of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// sled failed (IO, corruption, or another process holds the directory).
    #[error("store at {path}: {source}")]
    Sled {
        /// The data directory.
        path: String,
        /// sled's error.
        #[source]
        source: sled::Error,
    },
    /// The mirror of a replicated root refused the journal (etcd out of
    /// reach, or this replica no longer the leader).
    #[error("store at {path}: its mirror refused the writes: {reason}")]
    Mirror {
        /// The data directory.
        path: String,
        /// The mirror's reason.
        reason: String,
    },
    /// A stored value did not decode.
    #[error("store at {path}: corrupt value under {key:?}: {source}")]
    Corrupt {
        /// The data directory.
        path: String,
        /// The key whose value is corrupt.
        key: String,
        /// The decoding error.
        #[source]
        source: CodecError,
    },
    /// A key does not have the layout its prefix promises.
    #[error("store at {path}: corrupt key {key:?}")]
    CorruptKey {
        /// The data directory.
        path: String,
        /// The key, lossily as text.
        key: String,
    },
    /// A value could not be encoded.
    #[error("cannot encode a value for the store: {0}")]
    Encode(#[source] CodecError),
    /// Another process holds the store's lock.
    #[error("the store in {path} is in use by another process (a running relay or agent?)")]
    Locked {
        /// The data directory.
        path: String,
    },
    /// Something in the data directory is open to the group or others.
    #[error(
        "{path} has mode {mode:04o}: a node's data directory holds its private keys and must be \
         private to its owner; fix it with `chmod -R go-rwx {data_dir}`"
    )]
    NotPrivate {
        /// The file or directory.
        path: String,
        /// Its permission bits.
        mode: u32,
        /// The data directory.
        data_dir: String,
    },
    /// A file or directory of the data directory could not be read or changed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no store.
    #[error(
        "{path} holds no relaymesh node: run `relay init`, `relay join` or `edge-agent join` first"
    )]
    Missing {
        /// The data directory.
        path: String,
    },
    /// The store was written by a build too old to migrate from.
    #[error(
        "the store in {path} has format {found}, and this build migrates formats \
         {OLDEST_MIGRATED_FORMAT} to {STORE_FORMAT} only (format 1 is a relaymesh from before \
         protocol version 4, which this build cannot talk to either): re-create the node with \
         `relay init`, `relay join` or `edge-agent join` in a new data directory"
    )]
    Format {
        /// The data directory.
        path: String,
        /// The format found.
        found: u32,
    },
    /// The store was written by a newer build, whose layout this one would
    /// misread.
    #[error(
        "the store in {path} has format {found}, written by relaymesh {written_by}, and this \
         build reads formats up to {STORE_FORMAT}: run that release or a newer one, or, to \
         downgrade, restore the backup that release took when it migrated the store \
         ({path}/store.format-{STORE_FORMAT}.backup; docs/production.md, \"Downgrades\")"
    )]
    NewerFormat {
        /// The data directory.
        path: String,
        /// The format found.
        found: u32,
        /// The release that last opened the store, as it recorded.
        written_by: String,
    },
    /// A bundle's chunks do not add up to the bundle (some are missing, or
    /// it was removed while being read).
    #[error("store at {path}: bundle {id} is incomplete: {reason}")]
    BundleIncomplete {
        /// The data directory.
        path: String,
        /// The bundle.
        id: BundleId,
        /// What is missing.
        reason: String,
    },
}
