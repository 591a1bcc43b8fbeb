//! The relay's sled store: its identity and configuration, the durable state
//! of its core, the bundles it holds, and the join tokens it has accepted.
//!
//! The core never touches the store; it emits [`Mutation`] batches that the
//! daemon applies here, atomically, before anything that depends on them (an
//! acknowledgement to the parent) leaves the node. Values are encoded with the
//! protocol codec, so every decode is bounded like a frame.
//!
//! Bundles are kept in chunks of [`BUNDLE_CHUNK_LEN`] bytes (`store::bundles`),
//! so a relay serves and receives one without holding it whole in memory.
//! The layout has a version, [`STORE_FORMAT`]; an older store is migrated
//! forward on open after a backup, and a newer one is refused with an error
//! that says so rather than misread (see [`format`](mod@format)).

mod bundles;
mod error;
pub mod format;
mod issued_tokens;
mod issuer_keys;
pub mod journal;
mod node_state;
pub mod permissions;
mod slice_state;
mod users;

use std::path::Path;
use std::sync::Arc;

use relaymesh_protocol::codec;
use relaymesh_protocol::BundleId;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use bundles::{BundleChunks, BundleWriter, BUNDLE_CHUNK_LEN};
pub use error::StoreError;
pub use issuer_keys::{reported_issuer_key, with_issuer_key_label, ISSUER_KEY_LABEL};
pub use relaymesh_core::state::{Mutation, Persisted, Served};

use crate::identity::Identity;
pub use issued_tokens::{
    joined_at_ms, used_by, with_join_token_label, PruneGate, TokenRecord, JOINED_AT_LABEL,
    JOIN_TOKEN_LABEL, KEEP_EXPIRED_SECS, PRUNE_EVERY_SECS,
};
use journal::{Journal, Journaled};
pub use users::UserRecord;

/// The sled page cache a relay uses. Sled's default (1 GiB) is far more than a
/// relay's slice needs, and edge machines are small.
pub const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// The sled page cache of a [`Store::temporary`] store.
const TEMPORARY_CACHE_BYTES: u64 = 256 * 1024;

/// The log segment size of a [`Store::temporary`] store: a bundle chunk
/// and its neighbours fit, and thousands of stores stay small.
const TEMPORARY_SEGMENT_BYTES: usize = 256 * 1024;

/// How many times opening retries while the directory's lock is held (20 ms
/// apart): sled's flusher thread wakes every 500 ms and keeps the lock until
/// it sees the last handle gone, which on a loaded machine has taken more
/// than a second (a unit test that reopens a store failed so under CI load).
const LOCK_RETRIES: u32 = 150;

pub use format::STORE_FORMAT;

/// The root API's TLS material: its server certificate chain (leaf first)
/// and PKCS#8 key, and the API CA that signed it and signs users.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct ApiCertificate {
    /// The chain, leaf first.
    pub chain_der: Vec<Vec<u8>>,
    /// The leaf's private key.
    pub key_der: Vec<u8>,
    /// The API CA, which only the root holds.
    pub authority: crate::pki::ApiAuthority,
}

/// An Ed25519 key that signs join tokens and slice entries: PKCS#8, then
/// the public half.
pub type TokenKey = (Vec<u8>, Vec<u8>);

/// A relay's store, in one sled database.
#[derive(Clone)]
pub struct Store {
    path: String,
    db: sled::Db,
    node: Journaled,
    state: Journaled,
    /// Bundle id → its length (8 bytes, big-endian): the bundles held.
    bundles: Journaled,
    /// Bundle id + chunk index (4 bytes, big-endian) → the chunk's bytes.
    bundle_chunks: Journaled,
    tokens: Journaled,
    /// What the trees above recorded for a mirror (a replicated root's).
    journal: Arc<Journal>,
    /// The format found on open, and what opening did about it.
    opened: format::Opened,
    /// When issuing a token last forgot the expired ones.
    tokens_pruned: Arc<issued_tokens::PruneGate>,
    /// When claiming a token last forgot the expired claims.
    claims_pruned: Arc<issued_tokens::PruneGate>,
}

const IDENTITY: &[u8] = b"identity";
/// [`Identity::extra_anchors_der`], apart from the identity so that
/// identities stored before rotations existed decode as they are.
const EXTRA_ANCHORS: &[u8] = b"extra-anchors";
/// [`Identity::previous_issuer`], apart for the same reason.
const PREVIOUS_ISSUER: &[u8] = b"previous-issuer";
const CONFIG: &[u8] = b"config";
const CANDIDATES: &[u8] = b"candidates";
/// [`Store::objects_store`]: sled unless `relay init --store etcd`.
const OBJECTS_STORE: &[u8] = b"objects-store";
const API_CERTIFICATE: &[u8] = b"api-certificate";
/// [`Store::next_token_key`].
const NEXT_TOKEN_KEY: &[u8] = b"next-token-key";
/// [`Store::previous_api_ca`].
const PREVIOUS_API_CA: &[u8] = b"api-ca-previous";
const EPOCH: &[u8] = b"m/epoch";
const HEAD: &[u8] = b"m/head";
const FLOOR: &[u8] = b"m/floor";
const PARENT_POSITION: &[u8] = b"m/parent";
const ANCESTORS: &[u8] = b"m/ancestors";
const ENTRY_PREFIX: &[u8] = b"e/";
const LOG_PREFIX: &[u8] = b"l/";
const NODE_PREFIX: &[u8] = b"n/";
/// `s/` + bundle id (32 bytes) + child name: transfers of a bundle to a child.
const SERVED_PREFIX: &[u8] = b"s/";
/// `t/` + child name: transfers of any bundle to a child.
const SERVED_TOTAL_PREFIX: &[u8] = b"t/";
/// `c/` + placement key: the digest of the placement's last cut.
const CUT_DIGEST_PREFIX: &[u8] = b"c/";

impl Store {
    /// Opens the store in `dir`, which must already hold one (so a typo in
    /// `--data-dir` is an error, not a new empty node) and be private to its
    /// owner (see [`permissions`]).
    pub fn open_existing(dir: &Path) -> Result<Self, StoreError> {
        if !dir.join("store").is_dir() {
            return Err(StoreError::Missing {
                path: dir.display().to_string(),
            });
        }
        permissions::check_private(dir)?;
        Self::open(dir)
    }

    /// Creates `dir` private to its owner (0700) if needed and opens (or
    /// creates) the store in it, with every file private (0600): for a node
    /// being initialized or joined.
    pub fn create(dir: &Path) -> Result<Self, StoreError> {
        permissions::create_private_dir(dir)?;
        let store = Self::open(dir)?;
        permissions::make_private(dir)?;
        Ok(store)
    }

    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.display().to_string();
        let sled_error = |source| StoreError::Sled {
            path: path.clone(),
            source,
        };
        let config = sled::Config::new()
            .path(dir.join("store"))
            .cache_capacity(CACHE_BYTES);
        // sled's flusher thread keeps the file lock for a moment after the
        // last handle of a previous open in this process is dropped; another
        // process holding it keeps it for good, and then this gives up.
        let mut attempts = 0;
        let db = loop {
            match config.open() {
                Err(error) if is_lock_held(&error) && attempts < LOCK_RETRIES => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(error) if is_lock_held(&error) => {
                    return Err(StoreError::Locked { path: path.clone() });
                }
                other => break other.map_err(sled_error)?,
            }
        };
        Self::on(db, path, Some(dir))
    }

    /// A store that lives in memory and is gone when its last handle is
    /// dropped: for the testbed's hollow agents, thousands of which share
    /// one process. It is the same sled code on a temporary file in
    /// `/dev/shm` (or the temporary directory), without the background
    /// flusher thread, with a small cache and small log segments, so an
    /// idle one costs about 200 KB and no thread. `label` names it in
    /// errors.
    pub fn temporary(label: &str) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .temporary(true)
            .flush_every_ms(None)
            .cache_capacity(TEMPORARY_CACHE_BYTES)
            .segment_size(TEMPORARY_SEGMENT_BYTES)
            .open()
            .map_err(|source| StoreError::Sled {
                path: label.to_string(),
                source,
            })?;
        Self::on(db, label.to_string(), None)
    }

    /// The store on an open database: its format checked (and migrated,
    /// with a backup in `dir` if it has one), then its trees.
    fn on(db: sled::Db, path: String, dir: Option<&Path>) -> Result<Self, StoreError> {
        let sled_error = |source| StoreError::Sled {
            path: path.clone(),
            source,
        };
        let opened = format::open(&db, &db.open_tree("node").map_err(sled_error)?, dir, &path)?;
        let journal = Arc::new(Journal::default());
        let tree = |name: &str| {
            db.open_tree(name)
                .map(|tree| Journaled::new(tree, name, journal.clone()))
                .map_err(sled_error)
        };
        let store = Self {
            node: tree("node")?,
            state: tree("state")?,
            bundles: tree("bundles")?,
            bundle_chunks: tree("bundle-chunks")?,
            tokens: tree("tokens")?,
            journal: journal.clone(),
            path: path.clone(),
            opened,
            tokens_pruned: Arc::default(),
            claims_pruned: Arc::default(),
            db,
        };
        Ok(store)
    }

    /// The format the store had when opened, the release that opened it
    /// before, and the backup taken if opening migrated it.
    pub fn opened(&self) -> &format::Opened {
        &self.opened
    }

    /// Opens (or creates) the sled tree `name` in the store's database, for
    /// stores that keep their own data (as the object store does).
    pub fn open_tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(name).map_err(|e| self.sled(e))
    }

    /// A tree of the node's own state, its writes journaled (see
    /// [`journal`]).
    fn journaled(&self, name: &str) -> Result<Journaled, StoreError> {
        let tree = self.open_tree(name)?;
        Ok(Journaled::new(tree, name, self.journal.clone()))
    }

    /// From now on, hands every write to the node's own state to `mirror`
    /// at each flush (a replicated root's leader). `false` if a mirror was
    /// set already.
    pub fn set_mirror(&self, mirror: Arc<dyn journal::Mirror>) -> bool {
        self.journal.set_mirror(mirror)
    }

    /// Whether writes go to a mirror too (a replicated root's leader).
    pub fn mirrored(&self) -> bool {
        self.journal.recording()
    }

    /// Every key of the node's own state ([`journal::MIRRORED_TREES`]),
    /// but the replica's own keys: what a mirror's checkpoint holds.
    pub fn image(&self) -> Result<Vec<journal::Op>, StoreError> {
        let mut ops = Vec::new();
        for name in journal::MIRRORED_TREES {
            for item in self.open_tree(name)?.iter() {
                let (key, value) = item.map_err(|e| self.sled(e))?;
                if !journal::is_local(name, &key) {
                    ops.push(journal::Op {
                        tree: name.to_string(),
                        key: key.to_vec(),
                        value: Some(value.to_vec()),
                    });
                }
            }
        }
        Ok(ops)
    }

    /// Replaces the node's own state with `ops` applied to nothing (a
    /// mirror's checkpoint and log), keeping the replica's own keys, and
    /// flushes: a replica taking over as the root.
    pub fn replace_image(&self, ops: &[journal::Op]) -> Result<(), StoreError> {
        for name in journal::MIRRORED_TREES {
            let tree = self.open_tree(name)?;
            let mut batch = sled::Batch::default();
            for key in tree.iter().keys() {
                let key = key.map_err(|e| self.sled(e))?;
                if !journal::is_local(name, &key) {
                    batch.remove(key);
                }
            }
            tree.apply_batch(batch).map_err(|e| self.sled(e))?;
        }
        for op in ops {
            if !journal::MIRRORED_TREES.contains(&op.tree.as_str())
                || journal::is_local(&op.tree, &op.key)
            {
                return Err(self.corrupt_key(&op.key));
            }
            let tree = self.open_tree(&op.tree)?;
            match &op.value {
                Some(value) => tree.insert(&op.key, value.as_slice()).map(drop),
                None => tree.remove(&op.key).map(drop),
            }
            .map_err(|e| self.sled(e))?;
        }
        self.flush()
    }

    /// [`Store::set_identity`] on tokio's blocking pool (it flushes): the
    /// loop waits for it, no runtime worker does.
    pub async fn set_identity_off_runtime(&self, identity: Identity) -> Result<(), StoreError> {
        let store = self.clone();
        self.off_runtime(move || store.set_identity(&identity))
            .await
    }

    /// [`Store::remove_bundle`] on tokio's blocking pool.
    pub async fn remove_bundle_off_runtime(&self, id: BundleId) -> Result<(), StoreError> {
        let store = self.clone();
        self.off_runtime(move || store.remove_bundle(&id)).await
    }

    /// Runs `work` on tokio's blocking pool; a task that failed is a store
    /// error, as sled's IO errors are.
    async fn off_runtime(
        &self,
        work: impl FnOnce() -> Result<(), StoreError> + Send + 'static,
    ) -> Result<(), StoreError> {
        match tokio::task::spawn_blocking(work).await {
            Ok(result) => result,
            Err(error) => Err(self.sled(sled::Error::Io(std::io::Error::other(format!(
                "the store task failed: {error}"
            ))))),
        }
    }

    /// The data directory the store lives in.
    pub fn dir(&self) -> &std::path::Path {
        std::path::Path::new(&self.path)
    }

    /// The store's size on disk, in bytes.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db.size_on_disk().map_err(|e| self.sled(e))
    }

    /// Makes everything written so far durable: on disk and, at a
    /// replicated root, in its mirror.
    pub fn flush(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        self.db.flush().map(drop).map_err(|e| self.sled(e))?;
        self.ship()?;
        crate::metrics::STORE_FLUSH.observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Hands the journal to the mirror, if there is one.
    fn ship(&self) -> Result<(), StoreError> {
        self.journal
            .ship(&|| self.image().unwrap_or_default())
            .map_err(|reason| StoreError::Mirror {
                path: self.path.clone(),
                reason,
            })
    }

    /// [`Store::apply`] on tokio's blocking pool: the daemon's event loop
    /// waits for it (mutations are applied in order, before anything is
    /// acknowledged), but no runtime worker is held up by sled meanwhile.
    pub async fn apply_off_runtime(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        let store = self.clone();
        self.off_runtime(move || store.apply(&mutations)).await
    }

    /// [`Store::put_bundle`] on tokio's blocking pool.
    pub async fn put_bundle_off_runtime(
        &self,
        id: BundleId,
        bytes: bytes::Bytes,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        self.off_runtime(move || store.put_bundle(&id, &bytes))
            .await
    }

    /// Makes everything written so far durable, without blocking the runtime
    /// (see [`flush_off_runtime`]).
    pub async fn flush_async(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        flush_off_runtime(&self.db)
            .await
            .map_err(|e| self.sled(e))?;
        if self.journal.recording() {
            let store = self.clone();
            self.off_runtime(move || store.ship()).await?;
        }
        crate::metrics::STORE_FLUSH.observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Records join token `id` as used, unless it already was (and has not
    /// expired since). Returns whether this call recorded it. Expired
    /// records are forgotten at most once per
    /// [`issued_tokens::PRUNE_EVERY_SECS`]: forgetting reads every record,
    /// and on every claim it made each join cost O(joined nodes) (issue
    /// 35's profile of 5,000 joins).
    pub fn claim_token(
        &self,
        id: [u8; 16],
        not_after_unix: u64,
        now_unix: u64,
    ) -> Result<bool, StoreError> {
        let claimed = &not_after_unix.to_be_bytes()[..];
        let mut held = None;
        let recorded = loop {
            match self
                .tokens
                .compare_and_swap(id, held.as_deref(), Some(claimed))
                .map_err(|e| self.sled(e))?
            {
                Ok(()) => break true,
                Err(swap) => match swap.current {
                    // Claimed before and expired since: a record the
                    // prune has not reached yet.
                    Some(current) if expired(&current, now_unix) => held = Some(current),
                    _ => break false,
                },
            }
        };
        if recorded {
            if self.claims_pruned.due(now_unix) {
                self.forget_expired_tokens(now_unix)?;
            }
            self.flush()?;
        }
        Ok(recorded)
    }

    /// A BLAKE3 digest of everything stored, to show that a refused request
    /// changed nothing.
    pub fn digest(&self) -> Result<String, StoreError> {
        let mut hasher = BundleId::hasher();
        for (name, tree) in [
            ("node", &self.node),
            ("state", &self.state),
            ("bundles", &self.bundles),
            ("bundle-chunks", &self.bundle_chunks),
            ("tokens", &self.tokens),
        ] {
            hasher.update(name.as_bytes());
            for item in tree.iter() {
                let (key, value) = item.map_err(|e| self.sled(e))?;
                hasher.update(&(key.len() as u64).to_be_bytes());
                hasher.update(&key);
                hasher.update(&(value.len() as u64).to_be_bytes());
                hasher.update(&value);
            }
        }
        Ok(hasher.finish().to_hex())
    }

    fn forget_expired_tokens(&self, now_unix: u64) -> Result<(), StoreError> {
        for item in self.tokens.iter() {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            // A used token must stay recorded until it expires, or it could be
            // replayed; after that the signature check refuses it anyway.
            if expired(&value, now_unix) {
                self.tokens.remove(key).map_err(|e| self.sled(e))?;
            }
        }
        Ok(())
    }

    fn read<T: DeserializeOwned>(
        &self,
        tree: &sled::Tree,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        match tree.get(key).map_err(|e| self.sled(e))? {
            Some(value) => self.decode(key, &value).map(Some),
            None => Ok(None),
        }
    }

    fn decode<T: DeserializeOwned>(&self, key: &[u8], value: &[u8]) -> Result<T, StoreError> {
        codec::decode(value).map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            key: String::from_utf8_lossy(key).into_owned(),
            source,
        })
    }

    fn corrupt_key(&self, key: &[u8]) -> StoreError {
        StoreError::CorruptKey {
            path: self.path.clone(),
            key: String::from_utf8_lossy(key).into_owned(),
        }
    }

    fn sled(&self, source: sled::Error) -> StoreError {
        StoreError::Sled {
            path: self.path.clone(),
            source,
        }
    }
}

/// Flushes `tree` (a whole database, as a `sled::Db` derefs to its default
/// tree) on tokio's blocking pool, so the runtime goes on meanwhile.
///
/// Never sled's own `flush_async`: it waits on sled's IO thread pool, the
/// pool that also performs the writes the flush waits for. With several
/// stores flushing at once every pool thread ends up waiting and nothing
/// writes: the testbed's hollow agents (many stores in one process) hung so
/// within seconds, and one relay could too under concurrent flushes.
pub async fn flush_off_runtime(tree: &sled::Tree) -> Result<(), sled::Error> {
    let tree = tree.clone();
    match tokio::task::spawn_blocking(move || tree.flush()).await {
        Ok(result) => result.map(drop),
        Err(error) => Err(sled::Error::Io(std::io::Error::other(format!(
            "the flush task failed: {error}"
        )))),
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    codec::encode(value).map_err(StoreError::Encode)
}

fn prefixed(prefix: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + rest.len());
    key.extend_from_slice(prefix);
    key.extend_from_slice(rest);
    key
}

fn log_revision(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let digits = &key[LOG_PREFIX.len()..];
    let len = digits.len().min(8);
    bytes[8 - len..].copy_from_slice(&digits[..len]);
    u64::from_be_bytes(bytes)
}

/// Whether opening failed because the directory's lock is held. sled 0.34
/// reports it as an `Other` I/O error whose message says so (its
/// `try_lock` wraps the `WouldBlock`), so the kind alone never matches.
fn is_lock_held(error: &sled::Error) -> bool {
    match error {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock
                || io.to_string().contains("could not acquire lock")
        }
        _ => false,
    }
}

/// Whether a claimed token's record (its expiry, 8 bytes big-endian) says
/// it expired before `now_unix`; an unreadable one counts as expired.
fn expired(record: &[u8], now_unix: u64) -> bool {
    <[u8; 8]>::try_from(record)
        .map(|bytes| u64::from_be_bytes(bytes) < now_unix)
        .unwrap_or(true)
}

#[cfg(test)]
mod tests;
