//! Bundles in the store, in chunks.
//!
//! A bundle may be 256 MiB (`protocol::limits::MAX_BUNDLE_LEN`) and a relay
//! serves many children at once, so no path through the relay holds one
//! whole: it is kept as chunks of [`BUNDLE_CHUNK_LEN`] bytes, read one at a
//! time to be sent ([`BundleChunks`]) and written one at a time as it
//! arrives ([`BundleWriter`]).
//!
//! A bundle is held when its length is recorded in the `bundles` tree. The
//! length is written after every chunk and removed before any, so a bundle
//! that is held is whole; sled recovers from a crash to a prefix of the
//! writes made, so that holds after a crash too. Chunks left behind by a
//! transfer that failed or a crash are removed by
//! [`Store::remove_partial_bundles`] at start-up.

use relaymesh_protocol::BundleId;

use super::{Store, StoreError};

/// The size of the chunks a bundle is stored, read and sent in (the last
/// one may be shorter).
pub const BUNDLE_CHUNK_LEN: usize = 64 * 1024;

/// A held bundle's chunks, read from the store one at a time.
pub struct BundleChunks {
    store: Store,
    id: BundleId,
    len: u64,
    next: u32,
    read: u64,
}

/// Writes a bundle into the store as its bytes arrive. Nothing counts as
/// held until [`BundleWriter::commit`]; [`BundleWriter::abort`] removes
/// what was written.
pub struct BundleWriter {
    store: Store,
    id: BundleId,
    buffer: Vec<u8>,
    next: u32,
    written: u64,
}

impl Store {
    /// Whether a bundle is held.
    pub fn has_bundle(&self, id: &BundleId) -> Result<bool, StoreError> {
        self.bundles.contains_key(id.0).map_err(|e| self.sled(e))
    }

    /// The length of a bundle, if held.
    pub fn bundle_len(&self, id: &BundleId) -> Result<Option<u64>, StoreError> {
        let Some(value) = self.bundles.get(id.0).map_err(|e| self.sled(e))? else {
            return Ok(None);
        };
        let len = <[u8; 8]>::try_from(value.as_ref())
            .map(u64::from_be_bytes)
            .map_err(|_| self.corrupt_key(&id.0))?;
        Ok(Some(len))
    }

    /// Events from now on for every bundle becoming held (an insert at
    /// [`BundleWriter::commit`]) or removed: for a benchmark to time when
    /// a bundle reached a node's disk, which no status reports.
    pub fn watch_bundles(&self) -> sled::Subscriber {
        self.bundles.watch_prefix(Vec::<u8>::new())
    }

    /// A reader of a held bundle's chunks, in order.
    pub fn bundle_chunks(&self, id: &BundleId) -> Result<Option<BundleChunks>, StoreError> {
        Ok(self.bundle_len(id)?.map(|len| BundleChunks {
            store: self.clone(),
            id: *id,
            len,
            next: 0,
            read: 0,
        }))
    }

    /// The whole bytes of a bundle, if held: for those who need it whole
    /// anyway (an agent parses it). Serving and fetching go by chunks.
    pub fn bundle(&self, id: &BundleId) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(mut chunks) = self.bundle_chunks(id)? else {
            return Ok(None);
        };
        let mut bytes = Vec::with_capacity(usize::try_from(chunks.len()).unwrap_or(0));
        while let Some(chunk) = chunks.next_chunk()? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    /// Stores a bundle whose bytes are at hand; the caller has checked that
    /// `id` is their hash. A bundle already held is left as it is (the same
    /// id is the same bytes).
    pub fn put_bundle(&self, id: &BundleId, bytes: &[u8]) -> Result<(), StoreError> {
        if self.has_bundle(id)? {
            return Ok(());
        }
        let mut writer = self.bundle_writer(id);
        writer.write(bytes)?;
        writer.commit()
    }

    /// A writer for bundle `id`, whose bytes will arrive in pieces.
    pub fn bundle_writer(&self, id: &BundleId) -> BundleWriter {
        BundleWriter {
            store: self.clone(),
            id: *id,
            buffer: Vec::new(),
            next: 0,
            written: 0,
        }
    }

    /// Deletes a bundle: first its length (so it is no longer held), then
    /// its chunks.
    pub fn remove_bundle(&self, id: &BundleId) -> Result<(), StoreError> {
        self.bundles.remove(id.0).map_err(|e| self.sled(e))?;
        self.remove_chunks(id)
    }

    /// The ids and sizes of every bundle held.
    pub fn bundle_sizes(&self) -> Result<Vec<(BundleId, u64)>, StoreError> {
        let mut sizes = Vec::new();
        for item in self.bundles.iter() {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let id = <[u8; 32]>::try_from(key.as_ref()).map_err(|_| self.corrupt_key(&key))?;
            let len = <[u8; 8]>::try_from(value.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| self.corrupt_key(&key))?;
            sizes.push((BundleId(id), len));
        }
        Ok(sizes)
    }

    /// The ids of every bundle held.
    pub fn bundle_ids(&self) -> Result<std::collections::BTreeSet<BundleId>, StoreError> {
        Ok(self.bundle_sizes()?.into_iter().map(|(id, _)| id).collect())
    }

    /// Removes the chunks of bundles that are not held: what a transfer
    /// that failed, or was cut by a crash, left behind. Returns how many
    /// bundles' chunks went. Run at start-up, before anything writes.
    pub fn remove_partial_bundles(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        let mut from = Vec::new();
        loop {
            let Some(item) = self.bundle_chunks.range(from.clone()..).next() else {
                return Ok(removed);
            };
            let (key, _) = item.map_err(|e| self.sled(e))?;
            let id = key
                .get(..32)
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .map(BundleId)
                .ok_or_else(|| self.corrupt_key(&key))?;
            if !self.has_bundle(&id)? {
                self.remove_chunks(&id)?;
                removed += 1;
            }
            // The next bundle's chunks start after this one's last index.
            from = chunk_key(&id, u32::MAX);
            from.push(0);
        }
    }

    fn remove_chunks(&self, id: &BundleId) -> Result<(), StoreError> {
        let mut batch = super::journal::Batch::default();
        for item in self.bundle_chunks.scan_prefix(id.0) {
            let (key, _) = item.map_err(|e| self.sled(e))?;
            batch.remove(key);
        }
        self.bundle_chunks
            .apply_batch(batch)
            .map_err(|e| self.sled(e))
    }

    fn incomplete(&self, id: &BundleId, reason: String) -> StoreError {
        StoreError::BundleIncomplete {
            path: self.path.clone(),
            id: *id,
            reason,
        }
    }
}

impl BundleChunks {
    /// The bundle's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the bundle is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next chunk, or `None` after the last. A chunk missing before the
    /// length is reached (the bundle was removed meanwhile) is an error.
    pub fn next_chunk(&mut self) -> Result<Option<sled::IVec>, StoreError> {
        if self.read >= self.len {
            return Ok(None);
        }
        let key = chunk_key(&self.id, self.next);
        let store = &self.store;
        let chunk = store
            .bundle_chunks
            .get(key)
            .map_err(|e| store.sled(e))?
            .ok_or_else(|| store.incomplete(&self.id, format!("chunk {} is missing", self.next)))?;
        let left = self.len - self.read;
        if chunk.is_empty() || chunk.len() as u64 > left {
            return Err(store.incomplete(
                &self.id,
                format!("chunk {} has {} bytes", self.next, chunk.len()),
            ));
        }
        self.read += chunk.len() as u64;
        self.next = self.next.saturating_add(1);
        Ok(Some(chunk))
    }
}

impl BundleWriter {
    /// Takes the next bytes of the bundle; full chunks go to the store.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), StoreError> {
        while !bytes.is_empty() {
            let room = BUNDLE_CHUNK_LEN - self.buffer.len();
            let (now, later) = bytes.split_at(room.min(bytes.len()));
            self.buffer.extend_from_slice(now);
            bytes = later;
            if self.buffer.len() == BUNDLE_CHUNK_LEN {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    /// How many bytes were written so far.
    pub fn written(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }

    /// Writes the last chunk and records the bundle as held. The caller has
    /// checked that the bytes hash to the id.
    pub fn commit(mut self) -> Result<(), StoreError> {
        if !self.buffer.is_empty() {
            self.flush_chunk()?;
        }
        let store = &self.store;
        store
            .bundles
            .insert(self.id.0, &self.written.to_be_bytes())
            .map_err(|e| store.sled(e))?;
        Ok(())
    }

    /// Removes what was written: the transfer failed.
    pub fn abort(self) -> Result<(), StoreError> {
        if self.store.has_bundle(&self.id)? {
            return Ok(()); // someone else stored it whole meanwhile
        }
        self.store.remove_chunks(&self.id)
    }

    fn flush_chunk(&mut self) -> Result<(), StoreError> {
        let store = &self.store;
        store
            .bundle_chunks
            .insert(chunk_key(&self.id, self.next), self.buffer.as_slice())
            .map_err(|e| store.sled(e))?;
        self.written += self.buffer.len() as u64;
        self.next = self.next.saturating_add(1);
        self.buffer.clear();
        Ok(())
    }
}

impl std::fmt::Debug for BundleChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BundleChunks")
            .field("id", &self.id)
            .field("len", &self.len)
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for BundleWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BundleWriter")
            .field("id", &self.id)
            .field("written", &self.written())
            .finish_non_exhaustive()
    }
}

fn chunk_key(id: &BundleId, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(36);
    key.extend_from_slice(&id.0);
    key.extend_from_slice(&index.to_be_bytes());
    key
}
