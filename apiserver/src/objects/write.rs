//! The store's write path: create, update, mark for deletion, delete, and
//! removing a quarantined object. Every write holds the store's lock from
//! its read of the stored object to its event, takes the next
//! resourceVersion, and persists object and counter in one batch, so that
//! optimistic concurrency, the owner index, the history and the broadcast
//! all see writes in one order.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{json, Value};
use tracing::{debug, warn};

use super::backend::Write;
use super::dependents::StoreReader;
use super::error::ObjectError;
use super::history::{ObjectEvent, WatchEventType};
use super::key::{ObjectKey, RESOURCE_VERSION_KEY};
use super::quarantine::decode_object;
use super::stamp;
use super::store::{ObjectStore, State};
use crate::depth;

impl ObjectStore {
    /// Creates the object at `key`; the server sets `uid`,
    /// `creationTimestamp`, `generation` and `resourceVersion`. Returns what
    /// was stored.
    pub fn create(&self, key: &ObjectKey, object: Value) -> Result<Value, ObjectError> {
        self.create_inner(key, object, false)
    }

    /// What [`create`](Self::create) would store, without storing it.
    pub fn create_dry_run(&self, key: &ObjectKey, object: Value) -> Result<Value, ObjectError> {
        self.create_inner(key, object, true)
    }

    /// Replaces the object at `key`. If `object` carries a non-empty
    /// `metadata.resourceVersion` it must be the stored one
    /// ([`ObjectError::Conflict`] otherwise). `uid` and `creationTimestamp`
    /// are kept; `generation` goes up when anything outside `metadata` and
    /// `status` changed. An update that changes nothing writes nothing.
    pub fn update(&self, key: &ObjectKey, object: Value) -> Result<Value, ObjectError> {
        self.update_inner(key, object, false)
    }

    /// What [`update`](Self::update) would store, without storing it.
    pub fn update_dry_run(&self, key: &ObjectKey, object: Value) -> Result<Value, ObjectError> {
        self.update_inner(key, object, true)
    }

    /// Marks the object at `key` as being deleted (`deletionTimestamp`, and
    /// `finalizers` added), as a DELETE of an object that has finalizers
    /// does; the object stays until its finalizers are gone.
    pub fn mark_for_deletion(
        &self,
        key: &ObjectKey,
        finalizers: &[&str],
    ) -> Result<Value, ObjectError> {
        if let Some(replicated) = self.replicated() {
            return self.mark_replicated(replicated, key, finalizers);
        }
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.inner.quarantine.decode_stored(key, &encoded, &bytes)?;
        let mut object = old.clone();
        stamp::mark_for_deletion(&mut object, finalizers, SystemTime::now());
        if object == old {
            return Ok(old);
        }
        self.replace(&mut state, key, &encoded, object, old)
    }

    /// Deletes the object at `key` and returns its last state.
    pub fn delete(&self, key: &ObjectKey) -> Result<Value, ObjectError> {
        if let Some(replicated) = self.replicated() {
            return self.delete_replicated(replicated, key);
        }
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.inner.quarantine.decode_stored(key, &encoded, &bytes)?;
        let mut object = old.clone();
        let resource_version = state.resource_version + 1;
        stamp::set_resource_version(&mut object, resource_version);
        self.inner.tree.apply(vec![
            (encoded.as_bytes().to_vec(), None),
            version_write(resource_version),
        ])?;
        self.publish(
            &mut state,
            WatchEventType::Deleted,
            key,
            object.clone(),
            Some(old.clone()),
        );
        self.move_dependents_on(&mut state, key, Some(&old), None)?;
        Ok(object)
    }

    /// Removes the object at `key` if it is quarantined, without decoding
    /// it; watches see it deleted (as an object holding only its name).
    /// False if it is not quarantined.
    pub fn remove_quarantined(&self, key: &ObjectKey) -> Result<bool, ObjectError> {
        if let Some(replicated) = self.replicated() {
            return self.remove_quarantined_replicated(replicated, key);
        }
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            self.inner.quarantine.forget(&encoded);
            return Ok(false);
        };
        if decode_object(&encoded, &bytes.value).is_ok() {
            return Ok(false);
        }
        let resource_version = state.resource_version + 1;
        self.inner.tree.apply(vec![
            (encoded.as_bytes().to_vec(), None),
            version_write(resource_version),
        ])?;
        self.inner.quarantine.forget(&encoded);
        let mut object = json!({"metadata": {"name": key.name}});
        if let Some(namespace) = &key.namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        stamp::set_resource_version(&mut object, resource_version);
        warn!(%key, "quarantined object deleted");
        self.publish(&mut state, WatchEventType::Deleted, key, object, None);
        Ok(true)
    }

    fn create_inner(
        &self,
        key: &ObjectKey,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ObjectError> {
        if let Some(replicated) = self.replicated() {
            return self.create_replicated(replicated, key, object, dry_run);
        }
        storable(&object)?;
        let mut state = self.lock();
        let encoded = key.encode();
        if self.inner.tree.contains(encoded.as_bytes())? {
            return Err(ObjectError::AlreadyExists(key.clone()));
        }
        let resource_version = state.resource_version + 1;
        stamp::new_object(&mut object, key, SystemTime::now());
        stamp::set_resource_version(&mut object, resource_version);
        if dry_run {
            return Ok(object);
        }
        self.write(&encoded, &object, resource_version)?;
        self.publish(&mut state, WatchEventType::Added, key, object.clone(), None);
        self.move_dependents_on(&mut state, key, None, Some(&object))?;
        Ok(object)
    }

    fn update_inner(
        &self,
        key: &ObjectKey,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ObjectError> {
        if let Some(replicated) = self.replicated() {
            return self.update_replicated(replicated, key, object, dry_run);
        }
        storable(&object)?;
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.inner.quarantine.decode_stored(key, &encoded, &bytes)?;
        let stored = stamp::resource_version(&old);
        let given = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !given.is_empty() && given != stored.to_string() {
            return Err(ObjectError::Conflict { stored, given });
        }
        stamp::carry_over(&old, &mut object, key);
        stamp::set_resource_version(&mut object, stored);
        if object == old {
            debug!(%key, "update changes nothing");
            return Ok(old);
        }
        if dry_run {
            // As kube-apiserver: a dry run shows the change at the stored
            // resourceVersion, which nothing has moved.
            return Ok(object);
        }
        let written = self.replace(&mut state, key, &encoded, object, old.clone())?;
        self.move_dependents_on(&mut state, key, Some(&old), Some(&written))?;
        Ok(written)
    }

    /// Moves on the generation of the objects whose desired state the
    /// write of `key` changed (`GenerationDependents`), each one write of
    /// its own under the same lock, so no reader sees the written object
    /// with its dependents' generations still behind.
    fn move_dependents_on(
        &self,
        state: &mut State,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), ObjectError> {
        for dependent in self.dependents_of_write(key, old, new) {
            let encoded = dependent.encode();
            let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
                continue;
            };
            let Ok(stored) = self
                .inner
                .quarantine
                .decode_stored(&dependent, &encoded, &bytes)
            else {
                continue;
            };
            let Some(generation) = stored
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
            else {
                continue;
            };
            let mut object = stored.clone();
            object["metadata"]["generation"] = Value::from(generation.saturating_add(1));
            debug!(%key, %dependent, generation = generation + 1, "dependent's generation moved on");
            self.replace(state, &dependent, &encoded, object, stored)?;
        }
        Ok(())
    }

    /// The objects whose generation the write of `key` from `old` to `new`
    /// moves on (`GenerationDependents`), `key` itself left out.
    pub(super) fn dependents_of_write(
        &self,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Vec<ObjectKey> {
        let Some(dependents) = self.inner.dependents.get() else {
            return Vec::new();
        };
        let reader = StoreReader::new(self.scan());
        let mut found = dependents.dependents(key, old, new, &reader);
        found.retain(|dependent| dependent != key);
        found
    }

    /// Writes `object` over `old` at the next resourceVersion and publishes
    /// the change.
    fn replace(
        &self,
        state: &mut State,
        key: &ObjectKey,
        encoded: &str,
        mut object: Value,
        old: Value,
    ) -> Result<Value, ObjectError> {
        let resource_version = state.resource_version + 1;
        stamp::set_resource_version(&mut object, resource_version);
        self.write(encoded, &object, resource_version)?;
        self.publish(
            state,
            WatchEventType::Modified,
            key,
            object.clone(),
            Some(old),
        );
        Ok(object)
    }

    fn write(
        &self,
        encoded: &str,
        object: &Value,
        resource_version: u64,
    ) -> Result<(), ObjectError> {
        let bytes = serde_json::to_vec(object).map_err(|source| ObjectError::Corrupt {
            key: encoded.to_string(),
            source,
        })?;
        self.inner.tree.apply(vec![
            (encoded.as_bytes().to_vec(), Some(bytes)),
            version_write(resource_version),
        ])?;
        Ok(())
    }

    /// Records a write that took the next resourceVersion.
    fn publish(
        &self,
        state: &mut State,
        event_type: WatchEventType,
        key: &ObjectKey,
        object: Value,
        previous: Option<Value>,
    ) {
        state.resource_version += 1;
        let event = ObjectEvent {
            event_type,
            key: key.clone(),
            object,
            resource_version: state.resource_version,
            previous: previous.map(Arc::new),
        };
        debug!(%key, resource_version = state.resource_version, ?event_type, "object changed");
        self.record(state, event);
    }

    /// Keeps the owner index and the history in step with `event`, and
    /// broadcasts it.
    pub(super) fn record(&self, state: &mut State, event: ObjectEvent) {
        if let Some(previous) = &event.previous {
            state.owners.remove(&event.key, previous);
        }
        if event.event_type != WatchEventType::Deleted {
            state.owners.insert(&event.key, &event.object);
        }
        state.history.push(event.clone());
        // No subscribers is fine.
        let _ = self.inner.events.send(event);
    }
}

/// The write that persists `resource_version`, beside every change.
fn version_write(resource_version: u64) -> Write {
    (
        RESOURCE_VERSION_KEY.to_vec(),
        Some(resource_version.to_string().into_bytes()),
    )
}

/// Whether `object` may be stored: a JSON object, nested no deeper than the
/// limit.
pub(super) fn storable(object: &Value) -> Result<(), ObjectError> {
    if !object.is_object() {
        return Err(ObjectError::NotAnObject);
    }
    Ok(depth::check_value(object)?)
}
