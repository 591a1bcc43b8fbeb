//! The store on a replicated backend ([`Replicated`], etcd): several stores,
//! one per root replica, share one keyspace.
//!
//! - **Writes** are checked against what the key held when the store read
//!   it ([`Expect`]); when another replica wrote first, the write reads
//!   again and retries, so a stale `resourceVersion` is a 409 on every
//!   replica alike. The backend numbers the writes: resourceVersions are
//!   its revisions.
//! - **Events** come only from the backend's feed, the store's own writes
//!   and every other replica's alike, in revision order; a write returns
//!   once the feed has brought it back, so this replica's watches, owner
//!   index and controllers have seen it.
//! - **History** older than the feed's start is read back from the backend
//!   (a watch resumed on another replica, or after a restart); what the
//!   backend has compacted is 410 Gone.
//!
//! No call to the backend is made with the store's lock held: the feed needs
//! the lock to hand over each change.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use tracing::{debug, error, warn};

use super::backend::{BackendError, Change, Expect, FeedItem, Replicated, Stored};
use super::error::ObjectError;
use super::history::{History, ObjectEvent, WatchEventType};
use super::key::{ObjectKey, OBJECT_PREFIX};
use super::quarantine::decode_stored;
use super::stamp;
use super::store::ObjectStore;
use super::write::storable;

/// How many times a write reads again after another replica came first.
const COMMIT_ATTEMPTS: usize = 16;

/// How long a write waits for the feed to bring it back, and a watch for
/// the feed to reach the version it resumes from.
const CATCH_UP: Duration = Duration::from_secs(10);

/// How long a wait for the feed waits before it writes a fence: the
/// revision waited for may lie outside this store's keyspace (another
/// tenant of the etcd cluster), where no change of the feed would reach it.
const FENCE_AFTER: Duration = Duration::from_millis(300);

impl ObjectStore {
    /// The replicated side of the backend, if it has one.
    pub(super) fn replicated(&self) -> Option<&dyn Replicated> {
        self.inner.tree.replicated()
    }

    /// Starts following the backend's feed after `revision`, which the
    /// store was opened at.
    pub(super) fn follow_feed(
        &self,
        replicated: &dyn Replicated,
        revision: u64,
    ) -> Result<(), ObjectError> {
        let weak = Arc::downgrade(&self.inner);
        replicated.follow(
            revision,
            Box::new(move |item| {
                if let Some(inner) = weak.upgrade() {
                    ObjectStore { inner }.take_feed(item);
                }
            }),
        )?;
        Ok(())
    }

    /// Takes one item of the feed: records the change, or starts the
    /// history over.
    fn take_feed(&self, item: FeedItem) {
        match item {
            FeedItem::Change(change) => {
                let mut state = self.lock();
                // Strictly older only: one transaction's changes share a
                // revision, and a feed that watches again starts after the
                // last revision it handed over, so none comes twice.
                if change.revision < state.resource_version {
                    return;
                }
                state.resource_version = change.revision;
                if let Some(event) = self.event_of(&change) {
                    debug!(key = %event.key, resource_version = event.resource_version, ?event.event_type, "object changed (feed)");
                    self.record(&mut state, event);
                }
            }
            FeedItem::Restarted(revision) => {
                error!(
                    revision,
                    "the backend compacted changes this replica had not seen; watches from before resume with 410 Gone"
                );
                let owners = self.owners_at(revision);
                let mut state = self.lock();
                state.resource_version = revision;
                state.history = History::starting_at(revision);
                if let Ok(owners) = owners {
                    state.owners = owners;
                }
                drop(state);
                self.inner.restarts.send_modify(|restarts| *restarts += 1);
            }
        }
        self.inner.caught_up.notify_all();
    }

    /// The owner index of the objects as they were at `revision`.
    pub(super) fn owners_at(
        &self,
        revision: u64,
    ) -> Result<super::owners::OwnerIndex, ObjectError> {
        let mut owners = super::owners::OwnerIndex::default();
        let Some(replicated) = self.replicated() else {
            return Ok(owners);
        };
        for (key, stored) in replicated.scan_at(OBJECT_PREFIX.as_bytes(), revision)? {
            let Some(object_key) = ObjectKey::decode(&key) else {
                continue;
            };
            if let Some(object) = self.inner.quarantine.decode_listed(&key, &stored) {
                owners.insert(&object_key, &object);
            }
        }
        Ok(owners)
    }

    /// The event a change of the backend is, if its key is an object's and
    /// its value can be decoded.
    fn event_of(&self, change: &Change) -> Option<ObjectEvent> {
        let key = ObjectKey::decode(&change.key)?;
        let encoded = key.encode();
        let previous = change
            .previous
            .as_ref()
            .and_then(|previous| decode_stored(&encoded, previous).ok());
        match &change.value {
            Some(value) => {
                let stored = Stored {
                    value: value.clone(),
                    revision: Some(change.revision),
                };
                let object = self
                    .inner
                    .quarantine
                    .decode_stored(&key, &encoded, &stored)
                    .ok()?;
                self.inner.quarantine.forget(&encoded);
                // Not from `previous`: replayed from the oldest revision
                // etcd keeps, a change comes without what it replaced.
                let event_type = if change.created {
                    WatchEventType::Added
                } else {
                    WatchEventType::Modified
                };
                Some(ObjectEvent {
                    event_type,
                    key,
                    object,
                    resource_version: change.revision,
                    previous: previous.map(Arc::new),
                })
            }
            None => {
                self.inner.quarantine.forget(&encoded);
                let mut object = previous.clone().unwrap_or_else(|| {
                    let mut object = json!({"metadata": {"name": key.name}});
                    if let Some(namespace) = &key.namespace {
                        object["metadata"]["namespace"] = json!(namespace);
                    }
                    object
                });
                stamp::set_resource_version(&mut object, change.revision);
                Some(ObjectEvent {
                    event_type: WatchEventType::Deleted,
                    key,
                    object,
                    resource_version: change.revision,
                    previous: previous.map(Arc::new),
                })
            }
        }
    }

    /// Waits until the feed has handed over every change up to `revision`;
    /// false if it did not within `limit`.
    pub(super) fn caught_up(&self, revision: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut fence_at = Instant::now() + FENCE_AFTER;
        crate::blocking::blocking(|| loop {
            {
                let mut state = self.lock();
                loop {
                    if state.resource_version >= revision {
                        return true;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    if now >= fence_at {
                        break;
                    }
                    state = self
                        .inner
                        .caught_up
                        .wait_timeout(state, fence_at.min(deadline) - now)
                        .map(|(state, _)| state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0);
                }
            }
            // Later than `revision`, and a change the feed will bring.
            fence_at = deadline;
            if let Some(replicated) = self.replicated() {
                if let Err(error) = replicated.fence() {
                    warn!(%error, revision, "cannot write a fence to wait for the feed");
                    return false;
                }
            }
        })
    }

    /// The objects under `prefix` now, and the revision they are at.
    pub(super) fn list_replicated(
        &self,
        replicated: &dyn Replicated,
        prefix: &str,
    ) -> Result<(Vec<Value>, u64), ObjectError> {
        let (entries, revision) = replicated.scan_latest(prefix.as_bytes())?;
        let objects = entries
            .iter()
            .filter_map(|(key, stored)| self.inner.quarantine.decode_listed(key, stored))
            .collect();
        Ok((objects, revision))
    }

    /// The objects under `prefix` as they were at `revision`, by encoded
    /// key.
    pub(super) fn list_at_replicated(
        &self,
        replicated: &dyn Replicated,
        prefix: &str,
        revision: u64,
    ) -> Result<Vec<Value>, ObjectError> {
        let entries = replicated
            .scan_at(prefix.as_bytes(), revision)
            .map_err(|error| gone_if_compacted(error, revision))?;
        Ok(entries
            .iter()
            .filter_map(|(key, stored)| self.inner.quarantine.decode_listed(key, stored))
            .collect())
    }

    /// What [`ObjectStore::watch`] does on a replicated backend: the
    /// history from this replica's feed, or, older than its start, from the
    /// backend.
    pub(super) fn watch_replicated(
        &self,
        replicated: &dyn Replicated,
        resource_version: u64,
    ) -> Result<
        (
            Vec<ObjectEvent>,
            tokio::sync::broadcast::Receiver<ObjectEvent>,
        ),
        ObjectError,
    > {
        // A version another replica handed out may be ahead of this one's
        // feed: replaying from it before the feed is there would send again
        // what the client has.
        if !self.caught_up(resource_version, CATCH_UP) {
            return Err(BackendError::Unavailable(format!(
                "resourceVersion {resource_version} is ahead of what this replica has seen"
            ))
            .into());
        }
        let state = self.lock();
        if let Ok(events) = state.history.since(resource_version) {
            return Ok((events, self.inner.events.subscribe()));
        }
        // Every change up to `current` was broadcast before this
        // subscription; every later one reaches it.
        let current = state.resource_version;
        let receiver = self.inner.events.subscribe();
        drop(state);
        let changes = replicated
            .changes(resource_version, current)
            .map_err(|error| gone_if_compacted(error, resource_version))?;
        let events = changes
            .iter()
            .filter_map(|change| self.event_of(change))
            .collect();
        Ok((events, receiver))
    }

    /// [`ObjectStore::create`] on a replicated backend.
    pub(super) fn create_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ObjectError> {
        storable(&object)?;
        let encoded = key.encode();
        stamp::new_object(&mut object, key, SystemTime::now());
        if dry_run {
            if self.inner.tree.contains(encoded.as_bytes())? {
                return Err(ObjectError::AlreadyExists(key.clone()));
            }
            stamp::set_resource_version(&mut object, self.resource_version());
            return Ok(object);
        }
        // One round trip: the transaction itself says whether the name is
        // taken.
        let Some(revision) = self.commit(replicated, &encoded, Some(&object), Expect::Absent)?
        else {
            return Err(ObjectError::AlreadyExists(key.clone()));
        };
        stamp::set_resource_version(&mut object, revision);
        self.move_dependents_replicated(replicated, key, None, Some(&object))?;
        Ok(object)
    }

    /// [`ObjectStore::update`] on a replicated backend.
    pub(super) fn update_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
        object: Value,
        dry_run: bool,
    ) -> Result<Value, ObjectError> {
        storable(&object)?;
        let encoded = key.encode();
        let given = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for _ in 0..COMMIT_ATTEMPTS {
            let (old, stored) = self.read_for_write(key, &encoded)?;
            if !given.is_empty() && given != stored.to_string() {
                return Err(ObjectError::Conflict { stored, given });
            }
            let mut new = object.clone();
            stamp::carry_over(&old, &mut new, key);
            stamp::set_resource_version(&mut new, stored);
            if new == old {
                debug!(%key, "update changes nothing");
                return Ok(old);
            }
            if dry_run {
                return Ok(new);
            }
            if let Some(revision) =
                self.commit(replicated, &encoded, Some(&new), Expect::Revision(stored))?
            {
                stamp::set_resource_version(&mut new, revision);
                self.move_dependents_replicated(replicated, key, Some(&old), Some(&new))?;
                return Ok(new);
            }
        }
        Err(too_contended(key))
    }

    /// [`ObjectStore::mark_for_deletion`] on a replicated backend.
    pub(super) fn mark_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
        finalizers: &[&str],
    ) -> Result<Value, ObjectError> {
        let encoded = key.encode();
        for _ in 0..COMMIT_ATTEMPTS {
            let (old, stored) = self.read_for_write(key, &encoded)?;
            let mut object = old.clone();
            stamp::mark_for_deletion(&mut object, finalizers, SystemTime::now());
            if object == old {
                return Ok(old);
            }
            if let Some(revision) = self.commit(
                replicated,
                &encoded,
                Some(&object),
                Expect::Revision(stored),
            )? {
                stamp::set_resource_version(&mut object, revision);
                return Ok(object);
            }
        }
        Err(too_contended(key))
    }

    /// [`ObjectStore::delete`] on a replicated backend.
    pub(super) fn delete_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
    ) -> Result<Value, ObjectError> {
        let encoded = key.encode();
        for _ in 0..COMMIT_ATTEMPTS {
            let (old, stored) = self.read_for_write(key, &encoded)?;
            if let Some(revision) =
                self.commit(replicated, &encoded, None, Expect::Revision(stored))?
            {
                let mut object = old.clone();
                stamp::set_resource_version(&mut object, revision);
                self.move_dependents_replicated(replicated, key, Some(&old), None)?;
                return Ok(object);
            }
        }
        Err(too_contended(key))
    }

    /// [`ObjectStore::remove_quarantined`] on a replicated backend.
    pub(super) fn remove_quarantined_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
    ) -> Result<bool, ObjectError> {
        let encoded = key.encode();
        let Some(stored) = self.inner.tree.get(encoded.as_bytes())? else {
            self.inner.quarantine.forget(&encoded);
            return Ok(false);
        };
        if decode_stored(&encoded, &stored).is_ok() {
            return Ok(false);
        }
        let expect = Expect::Revision(stored.revision.unwrap_or_default());
        if self.commit(replicated, &encoded, None, expect)?.is_none() {
            // Rewritten meanwhile: no longer the quarantined object.
            return Ok(false);
        }
        self.inner.quarantine.forget(&encoded);
        warn!(%key, "quarantined object deleted");
        Ok(true)
    }

    /// The stored object at `key` and its resourceVersion, or NotFound.
    fn read_for_write(&self, key: &ObjectKey, encoded: &str) -> Result<(Value, u64), ObjectError> {
        let Some(stored) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.inner.quarantine.decode_stored(key, encoded, &stored)?;
        let version = stamp::resource_version(&old);
        Ok((old, version))
    }

    /// Writes `object` (or removes the key) if it holds what `expect`
    /// says, then waits for the feed to bring the write back. The write's
    /// revision, or `None` if another writer came first.
    fn commit(
        &self,
        replicated: &dyn Replicated,
        encoded: &str,
        object: Option<&Value>,
        expect: Expect,
    ) -> Result<Option<u64>, ObjectError> {
        let bytes = object
            .map(|object| {
                serde_json::to_vec(object).map_err(|source| ObjectError::Corrupt {
                    key: encoded.to_string(),
                    source,
                })
            })
            .transpose()?;
        let Some(revision) = replicated.commit(encoded.as_bytes(), bytes, expect)? else {
            debug!(
                key = encoded,
                ?expect,
                "another replica wrote first; reading again"
            );
            return Ok(None);
        };
        // The write is made and acknowledged whatever the feed does; a feed
        // that lags only delays this replica's watches.
        if !self.caught_up(revision, CATCH_UP) {
            warn!(
                key = encoded,
                revision,
                "the write is stored, but this replica's feed has not brought it back yet"
            );
        }
        Ok(Some(revision))
    }

    /// Moves on the generation of the objects whose desired state the
    /// write of `key` changed, each with its own checked write.
    fn move_dependents_replicated(
        &self,
        replicated: &dyn Replicated,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), ObjectError> {
        for dependent in self.dependents_of_write(key, old, new) {
            let encoded = dependent.encode();
            for _ in 0..COMMIT_ATTEMPTS {
                let Ok((stored, version)) = self.read_for_write(&dependent, &encoded) else {
                    break;
                };
                let Some(generation) = stored
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                else {
                    break;
                };
                let mut object = stored;
                object["metadata"]["generation"] = Value::from(generation.saturating_add(1));
                if self
                    .commit(
                        replicated,
                        &encoded,
                        Some(&object),
                        Expect::Revision(version),
                    )?
                    .is_some()
                {
                    debug!(%key, %dependent, generation = generation + 1, "dependent's generation moved on");
                    break;
                }
            }
        }
        Ok(())
    }
}

/// A backend's compaction, as a store error: 410 Gone.
fn gone_if_compacted(error: BackendError, requested: u64) -> ObjectError {
    match error {
        BackendError::Compacted { compacted, .. } => ObjectError::Gone {
            requested,
            oldest: compacted,
        },
        other => other.into(),
    }
}

/// Too many other writers came first, every time.
fn too_contended(key: &ObjectKey) -> ObjectError {
    BackendError::Unavailable(format!(
        "{key}: other replicas wrote it {COMMIT_ATTEMPTS} times while this one tried; try again"
    ))
    .into()
}

#[cfg(test)]
mod tests;
