//! The core's durable state in the store: the slice's entries and log, the
//! inventory and what was served, loaded at start and changed by the
//! core's `Mutation` batches, atomically.

use std::collections::BTreeSet;

use relaymesh_protocol::BundleId;

use super::{
    encode, log_revision, prefixed, Mutation, Persisted, Store, StoreError, ANCESTORS,
    CUT_DIGEST_PREFIX, ENTRY_PREFIX, EPOCH, FLOOR, HEAD, LOG_PREFIX, NODE_PREFIX, PARENT_POSITION,
    SERVED_PREFIX, SERVED_TOTAL_PREFIX,
};

impl Store {
    /// Loads the core's durable state.
    pub fn load(&self) -> Result<Persisted, StoreError> {
        let mut persisted = Persisted {
            epoch: self.read(&self.state, EPOCH)?.unwrap_or_default(),
            head: self.read(&self.state, HEAD)?.unwrap_or_default(),
            log_floor: self.read(&self.state, FLOOR)?.unwrap_or_default(),
            parent_position: self.read(&self.state, PARENT_POSITION)?,
            ancestors: self.read(&self.state, ANCESTORS)?.unwrap_or_default(),
            ..Persisted::default()
        };
        for item in self.state.scan_prefix(ENTRY_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let (revision, entry) = self.decode(&key, &value)?;
            let name = String::from_utf8_lossy(&key[ENTRY_PREFIX.len()..]).into_owned();
            persisted.entries.insert(name, (revision, entry));
        }
        for item in self.state.scan_prefix(LOG_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let revision = log_revision(&key);
            persisted.log.insert(revision, self.decode(&key, &value)?);
        }
        for item in self.state.scan_prefix(NODE_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let (record, via): (relaymesh_protocol::NodeRecord, Option<String>) =
                self.decode(&key, &value)?;
            persisted.nodes.insert(record.name.clone(), (record, via));
        }
        for item in self.state.scan_prefix(SERVED_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let rest = &key[SERVED_PREFIX.len()..];
            let id = rest
                .get(..32)
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .map(BundleId);
            let (Some(id), Some(child)) = (id, rest.get(32..)) else {
                return Err(self.corrupt_key(&key));
            };
            let child = String::from_utf8_lossy(child).into_owned();
            persisted
                .served
                .insert((id, child), self.decode(&key, &value)?);
        }
        for item in self.state.scan_prefix(SERVED_TOTAL_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let child = String::from_utf8_lossy(&key[SERVED_TOTAL_PREFIX.len()..]).into_owned();
            persisted
                .served_totals
                .insert(child, self.decode(&key, &value)?);
        }
        for item in self.state.scan_prefix(CUT_DIGEST_PREFIX) {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            let placement = String::from_utf8_lossy(&key[CUT_DIGEST_PREFIX.len()..]).into_owned();
            persisted
                .cut_digests
                .insert(placement, self.decode(&key, &value)?);
        }
        Ok(persisted)
    }

    /// Applies a batch of mutations atomically. Durable after [`Store::flush`].
    pub fn apply(&self, mutations: &[Mutation]) -> Result<(), StoreError> {
        let mut batch = super::journal::Batch::default();
        let mut head: u64 = self.read(&self.state, HEAD)?.unwrap_or_default();
        let mut floor: u64 = self.read(&self.state, FLOOR)?.unwrap_or_default();
        // Log records this batch writes, which a TrimLog later in the same
        // batch must see although they are not in sled yet.
        let mut logged = BTreeSet::new();
        // Likewise the transfer records this batch writes, for a ForgetServed.
        let mut served_written = BTreeSet::new();
        for mutation in mutations {
            match mutation {
                Mutation::SetEpoch(epoch) => batch.insert(EPOCH, encode(epoch)?),
                Mutation::PutEntry { revision, entry } => batch.insert(
                    prefixed(ENTRY_PREFIX, entry.key.as_bytes()),
                    encode(&(revision, entry))?,
                ),
                Mutation::RemoveEntry(key) => batch.remove(prefixed(ENTRY_PREFIX, key.as_bytes())),
                Mutation::LogChange { revision, key } => {
                    batch.insert(prefixed(LOG_PREFIX, &revision.to_be_bytes()), encode(key)?);
                    logged.insert(*revision);
                    head = head.max(*revision);
                    batch.insert(HEAD, encode(&head)?);
                }
                Mutation::TrimLog { floor: new_floor } => {
                    let end = prefixed(LOG_PREFIX, &new_floor.to_be_bytes());
                    for item in self.state.range(LOG_PREFIX.to_vec()..=end) {
                        let (key, _) = item.map_err(|e| self.sled(e))?;
                        batch.remove(key);
                    }
                    for revision in logged.range(..=*new_floor) {
                        batch.remove(prefixed(LOG_PREFIX, &revision.to_be_bytes()));
                    }
                    floor = floor.max(*new_floor);
                    batch.insert(FLOOR, encode(&floor)?);
                }
                Mutation::SetParentPosition(position) => {
                    batch.insert(PARENT_POSITION, encode(position)?)
                }
                Mutation::ClearParentPosition => batch.remove(PARENT_POSITION),
                Mutation::SetAncestors(ancestors) => batch.insert(ANCESTORS, encode(ancestors)?),
                Mutation::PutNode { record, via } => batch.insert(
                    prefixed(NODE_PREFIX, record.name.as_bytes()),
                    encode(&(record, via))?,
                ),
                Mutation::RemoveNode(name) => batch.remove(prefixed(NODE_PREFIX, name.as_bytes())),
                Mutation::RecordServed {
                    child,
                    bundle,
                    bundle_total,
                    link_total,
                } => {
                    let key = prefixed(&prefixed(SERVED_PREFIX, &bundle.0), child.as_bytes());
                    batch.insert(key.clone(), encode(bundle_total)?);
                    served_written.insert(key);
                    let total = prefixed(SERVED_TOTAL_PREFIX, child.as_bytes());
                    batch.insert(total, encode(link_total)?);
                }
                Mutation::ForgetServed(bundle) => {
                    let prefix = prefixed(SERVED_PREFIX, &bundle.0);
                    for item in self.state.scan_prefix(&prefix) {
                        let (key, _) = item.map_err(|e| self.sled(e))?;
                        batch.remove(key);
                    }
                    for key in served_written.iter().filter(|key| key.starts_with(&prefix)) {
                        batch.remove(key.clone());
                    }
                }
                Mutation::SetCutDigest { key, digest } => {
                    let key = prefixed(CUT_DIGEST_PREFIX, key.as_bytes());
                    match digest {
                        Some(digest) => batch.insert(key, encode(digest)?),
                        None => batch.remove(key),
                    }
                }
            }
        }
        self.state.apply_batch(batch).map_err(|e| self.sled(e))
    }
}
