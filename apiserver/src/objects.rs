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

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::SystemTime;

use serde_json::{json, Value};
use tokio::sync::broadcast;
use tracing::{debug, info, warn};

use crate::depth::{self, TooDeep};

use owners::OwnerIndex;

mod backend;
pub(crate) mod owners;
mod stamp;
#[cfg(test)]
mod tests;

pub use backend::{BackendError, Entry, ObjectBackend, Write};
pub use stamp::new_uid;

/// How many past events watches can resume from.
pub const HISTORY_LEN: usize = 10_000;

/// How many events a slow subscriber may fall behind before it is told it
/// lagged.
const BROADCAST_CAPACITY: usize = 4096;

/// The sled key of the persisted resourceVersion counter.
const RESOURCE_VERSION_KEY: &[u8] = b"m/resourceVersion";
/// The prefix of object keys.
const OBJECT_PREFIX: &str = "o/";

/// The write that persists `resource_version`, beside every change.
fn version_write(resource_version: u64) -> Write {
    (
        RESOURCE_VERSION_KEY.to_vec(),
        Some(resource_version.to_string().into_bytes()),
    )
}

/// Namespaces that exist from the start, as in every Kubernetes cluster.
pub const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Where an object lives: its group, plural resource, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The API group; empty for the core group.
    pub group: String,
    /// The plural resource name, as `deployments`.
    pub resource: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// It was created.
    Added,
    /// It was changed.
    Modified,
    /// It was deleted.
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectEvent {
    /// What happened.
    pub event_type: WatchEventType,
    /// Which object.
    pub key: ObjectKey,
    /// The object after the change (for deletions: its last state, with the
    /// deletion's resourceVersion).
    pub object: Value,
    /// The resourceVersion the change took.
    pub resource_version: u64,
    /// The object before the change (none for creations): what a paged
    /// list continued at an older version shows.
    pub previous: Option<Arc<Value>>,
}

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

/// Which other objects a write changes the desired state of: their
/// `metadata.generation` moves on in the same write, before the writer hears
/// back. The root's Placements use it: a Placement's desired state includes
/// the objects it selects, so editing one makes every status that describes
/// the old objects stale at once (`observedGeneration` behind `generation`),
/// which `kubectl wait` and kstatus already understand.
pub trait GenerationDependents: Send + Sync {
    /// The objects whose generation moves on because the object at `key`
    /// went from `old` to `new` (`None`: created, or deleted). `objects`
    /// reads the store as the write left it. Called with the store's write
    /// lock held: it must be quick, and must not write.
    fn dependents(
        &self,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
        objects: &StoreReader<'_>,
    ) -> Vec<ObjectKey>;
}

/// Reads for a [`GenerationDependents`] while the store's write lock is
/// held.
pub struct StoreReader<'a> {
    store: &'a ObjectStore,
}

impl StoreReader<'_> {
    /// The objects of a resource in every namespace, with their keys;
    /// quarantined ones left out.
    pub fn list(&self, group: &str, resource: &str) -> Vec<(ObjectKey, Value)> {
        let mut objects = Vec::new();
        for item in self
            .store
            .inner
            .tree
            .scan_prefix(prefix(group, resource, None).as_bytes())
        {
            let Ok((key, bytes)) = item else {
                continue;
            };
            let Some(object_key) = ObjectKey::decode(&key) else {
                continue;
            };
            if let Some(object) = self.store.decode_listed(&key, &bytes) {
                objects.push((object_key, object));
            }
        }
        objects
    }
}

/// The object store. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ObjectStore {
    inner: Arc<Inner>,
}

struct Inner {
    tree: Box<dyn ObjectBackend>,
    state: Mutex<State>,
    events: broadcast::Sender<ObjectEvent>,
    /// Stored objects that cannot be decoded, by sled key, with why.
    quarantine: Mutex<BTreeMap<String, String>>,
    /// Whose generation a write moves on besides the written object's.
    dependents: OnceLock<Arc<dyn GenerationDependents>>,
}

struct State {
    /// The last resourceVersion handed out.
    resource_version: u64,
    /// Watches can start from any version at or after this one.
    oldest_watchable: u64,
    /// The latest events, oldest first.
    history: VecDeque<ObjectEvent>,
    /// Uids and owner references, in step with the stored objects.
    owners: OwnerIndex,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        match &self.namespace {
            Some(namespace) => write!(f, "{resource} {namespace}/{:?}", self.name),
            None => write!(f, "{resource} {:?}", self.name),
        }
    }
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(group: &str, resource: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    fn encode(&self) -> String {
        // Cluster-scoped objects have an empty namespace segment.
        format!(
            "{}{}",
            prefix(
                &self.group,
                &self.resource,
                Some(self.namespace.as_deref().unwrap_or_default())
            ),
            self.name
        )
    }

    fn decode(key: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(key).ok()?.strip_prefix(OBJECT_PREFIX)?;
        let mut parts = text.splitn(4, '/');
        let group = parts.next()?;
        let resource = parts.next()?;
        let namespace = parts.next()?;
        let name = parts.next()?;
        Some(Self::new(
            group,
            resource,
            (!namespace.is_empty()).then_some(namespace),
            name,
        ))
    }
}

/// The sled key prefix of a resource's objects, in one namespace or all.
fn prefix(group: &str, resource: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{OBJECT_PREFIX}{group}/{resource}/{namespace}/"),
        None => format!("{OBJECT_PREFIX}{group}/{resource}/"),
    }
}

impl ObjectStore {
    /// Opens the store on a sled tree, the embedded default (see
    /// [`ObjectStore::open_on`]).
    pub fn open(tree: sled::Tree) -> Result<Self, ObjectError> {
        Self::open_on(Box::new(tree))
    }

    /// Opens the store on `tree`, creating the initial namespaces if
    /// missing.
    pub fn open_on(tree: Box<dyn ObjectBackend>) -> Result<Self, ObjectError> {
        let resource_version = match tree.get(RESOURCE_VERSION_KEY)? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| ObjectError::Corrupt {
                    key: "resourceVersion".into(),
                    source,
                })?
            }
            None => 0,
        };
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let store = Self {
            inner: Arc::new(Inner {
                tree,
                state: Mutex::new(State {
                    resource_version,
                    oldest_watchable: resource_version,
                    history: VecDeque::new(),
                    owners: OwnerIndex::default(),
                }),
                events,
                quarantine: Mutex::new(BTreeMap::new()),
                dependents: OnceLock::new(),
            }),
        };
        {
            let mut state = store.lock();
            for (key, object) in store.list_all()? {
                state.owners.insert(&key, &object);
            }
        }
        for name in INITIAL_NAMESPACES {
            let key = ObjectKey::new("", "namespaces", None, name);
            let missing = match store.get(&key) {
                Ok(found) => found.is_none(),
                // Quarantined: named at readyz; deleting it lets the next
                // start create it again.
                Err(ObjectError::Quarantined { .. }) => false,
                Err(error) => return Err(error),
            };
            if missing {
                let namespace = json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                });
                store.create(&key, namespace)?;
            }
        }
        info!(resource_version, "object store open");
        Ok(store)
    }

    /// Sets whose generation a write moves on besides the written object's
    /// (once; later calls are ignored and return false).
    pub fn set_generation_dependents(&self, dependents: Arc<dyn GenerationDependents>) -> bool {
        self.inner.dependents.set(dependents).is_ok()
    }

    /// The object at `key`, if any; [`ObjectError::Quarantined`] if it
    /// cannot be decoded.
    pub fn get(&self, key: &ObjectKey) -> Result<Option<Value>, ObjectError> {
        let encoded = key.encode();
        match self.inner.tree.get(encoded.as_bytes())? {
            Some(bytes) => Ok(Some(self.decode_stored(key, &encoded, &bytes)?)),
            None => Ok(None),
        }
    }

    /// The quarantined objects (stored, but not decodable), with why.
    pub fn quarantined(&self) -> Vec<(ObjectKey, String)> {
        self.quarantine()
            .iter()
            .filter_map(|(encoded, reason)| {
                ObjectKey::decode(encoded.as_bytes()).map(|key| (key, reason.clone()))
            })
            .collect()
    }

    /// Removes the object at `key` if it is quarantined, without decoding
    /// it; watches see it deleted (as an object holding only its name).
    /// False if it is not quarantined.
    pub fn remove_quarantined(&self, key: &ObjectKey) -> Result<bool, ObjectError> {
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            self.quarantine().remove(&encoded);
            return Ok(false);
        };
        if decode_object(&encoded, &bytes).is_ok() {
            return Ok(false);
        }
        let resource_version = state.resource_version + 1;
        self.inner.tree.apply(vec![
            (encoded.as_bytes().to_vec(), None),
            version_write(resource_version),
        ])?;
        self.quarantine().remove(&encoded);
        let mut object = json!({"metadata": {"name": key.name}});
        if let Some(namespace) = &key.namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        stamp::set_resource_version(&mut object, resource_version);
        warn!(%key, "quarantined object deleted");
        self.publish(&mut state, WatchEventType::Deleted, key, object, None);
        Ok(true)
    }

    /// The objects of a resource, in one namespace or all, sorted by
    /// namespace and name, and the resourceVersion they are current at.
    pub fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(Vec<Value>, u64), ObjectError> {
        // Holding the lock makes the list and its version consistent.
        let state = self.lock();
        let mut objects = Vec::new();
        for item in self
            .inner
            .tree
            .scan_prefix(prefix(group, resource, namespace).as_bytes())
        {
            let (key, bytes) = item?;
            if let Some(object) = self.decode_listed(&key, &bytes) {
                objects.push(object);
            }
        }
        Ok((objects, state.resource_version))
    }

    /// The objects of a resource as they were at `resource_version`: the
    /// current ones with every later change undone from the history, sorted
    /// as [`list`](Self::list) sorts. [`ObjectError::Gone`] if the history no
    /// longer reaches back that far. What a paged list continues with, so
    /// that its pages are one snapshot.
    pub fn list_at(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        resource_version: u64,
    ) -> Result<Vec<Value>, ObjectError> {
        let state = self.lock();
        if resource_version < state.oldest_watchable || resource_version > state.resource_version {
            return Err(ObjectError::Gone {
                requested: resource_version,
                oldest: state.oldest_watchable,
            });
        }
        let wanted = prefix(group, resource, namespace);
        let mut objects = std::collections::BTreeMap::new();
        for item in self.inner.tree.scan_prefix(wanted.as_bytes()) {
            let (key, bytes) = item?;
            let text = String::from_utf8_lossy(&key).into_owned();
            if let Some(object) = self.decode_listed(&key, &bytes) {
                objects.insert(text, object);
            }
        }
        // The first change after the version tells what the object was then.
        let mut undone = HashSet::new();
        for event in state
            .history
            .iter()
            .filter(|event| event.resource_version > resource_version)
        {
            let encoded = event.key.encode();
            if !encoded.starts_with(&wanted) || !undone.insert(encoded.clone()) {
                continue;
            }
            match &event.previous {
                Some(previous) => objects.insert(encoded, previous.as_ref().clone()),
                None => objects.remove(&encoded),
            };
        }
        Ok(objects.into_values().collect())
    }

    /// Every object of every kind, with its key; quarantined ones left out.
    pub fn list_all(&self) -> Result<Vec<(ObjectKey, Value)>, ObjectError> {
        let mut objects = Vec::new();
        for item in self.inner.tree.scan_prefix(OBJECT_PREFIX.as_bytes()) {
            let (key, bytes) = item?;
            let text = String::from_utf8_lossy(&key).into_owned();
            let Some(object_key) = ObjectKey::decode(&key) else {
                warn!(key = %text, "stored object skipped: its key is malformed");
                continue;
            };
            if let Some(object) = self.decode_listed(&key, &bytes) {
                objects.push((object_key, object));
            }
        }
        Ok(objects)
    }

    /// The object with `uid` and its key, if one is stored.
    pub fn get_by_uid(&self, uid: &str) -> Result<Option<(ObjectKey, Value)>, ObjectError> {
        let Some(key) = self.lock().owners.key_of(uid) else {
            return Ok(None);
        };
        Ok(self.get(&key)?.map(|object| (key, object)))
    }

    /// The stored objects whose `ownerReferences` name `uid`, with their
    /// keys.
    pub fn dependents_of(&self, uid: &str) -> Result<Vec<(ObjectKey, Value)>, ObjectError> {
        let keys = self.lock().owners.dependents_of(uid);
        let mut dependents = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(object) = self.get(&key)? {
                dependents.push((key, object));
            }
        }
        Ok(dependents)
    }

    /// Every change from now on. A receiver that falls far behind gets
    /// `Lagged` and should start over from a list.
    pub fn subscribe(&self) -> broadcast::Receiver<ObjectEvent> {
        self.inner.events.subscribe()
    }

    /// The last resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    /// The changes after `resource_version` that the history still holds,
    /// and a receiver for all later ones, taken atomically so none is missed
    /// or seen twice. [`ObjectError::Gone`] if the history no longer reaches
    /// back that far.
    pub fn watch(
        &self,
        resource_version: u64,
    ) -> Result<(Vec<ObjectEvent>, broadcast::Receiver<ObjectEvent>), ObjectError> {
        let state = self.lock();
        if resource_version < state.oldest_watchable {
            return Err(ObjectError::Gone {
                requested: resource_version,
                oldest: state.oldest_watchable,
            });
        }
        let events = state
            .history
            .iter()
            .filter(|event| event.resource_version > resource_version)
            .cloned()
            .collect();
        Ok((events, self.inner.events.subscribe()))
    }

    /// The changes after `resource_version`, or [`ObjectError::Gone`].
    pub fn events_since(&self, resource_version: u64) -> Result<Vec<ObjectEvent>, ObjectError> {
        self.watch(resource_version).map(|(events, _)| events)
    }

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
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.decode_stored(key, &encoded, &bytes)?;
        let mut object = old.clone();
        stamp::mark_for_deletion(&mut object, finalizers, SystemTime::now());
        if object == old {
            return Ok(old);
        }
        self.replace(&mut state, key, &encoded, object, old)
    }

    /// Deletes the object at `key` and returns its last state.
    pub fn delete(&self, key: &ObjectKey) -> Result<Value, ObjectError> {
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.decode_stored(key, &encoded, &bytes)?;
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

    fn create_inner(
        &self,
        key: &ObjectKey,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ObjectError> {
        if !object.is_object() {
            return Err(ObjectError::NotAnObject);
        }
        depth::check_value(&object)?;
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
        if !object.is_object() {
            return Err(ObjectError::NotAnObject);
        }
        depth::check_value(&object)?;
        let mut state = self.lock();
        let encoded = key.encode();
        let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
            return Err(ObjectError::NotFound(key.clone()));
        };
        let old = self.decode_stored(key, &encoded, &bytes)?;
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
    /// write of `key` changed ([`GenerationDependents`]), each one write of
    /// its own under the same lock, so no reader sees the written object
    /// with its dependents' generations still behind.
    fn move_dependents_on(
        &self,
        state: &mut State,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), ObjectError> {
        let Some(dependents) = self.inner.dependents.get() else {
            return Ok(());
        };
        let reader = StoreReader { store: self };
        for dependent in dependents.dependents(key, old, new, &reader) {
            if &dependent == key {
                continue;
            }
            let encoded = dependent.encode();
            let Some(bytes) = self.inner.tree.get(encoded.as_bytes())? else {
                continue;
            };
            let Ok(stored) = self.decode_stored(&dependent, &encoded, &bytes) else {
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
        if let Some(previous) = &previous {
            state.owners.remove(key, previous);
        }
        if event_type != WatchEventType::Deleted {
            state.owners.insert(key, &object);
        }
        let event = ObjectEvent {
            event_type,
            key: key.clone(),
            object,
            resource_version: state.resource_version,
            previous: previous.map(Arc::new),
        };
        debug!(%key, resource_version = state.resource_version, ?event_type, "object changed");
        if state.history.len() == HISTORY_LEN {
            if let Some(dropped) = state.history.pop_front() {
                state.oldest_watchable = dropped.resource_version;
            }
        }
        state.history.push_back(event.clone());
        // No subscribers is fine.
        let _ = self.inner.events.send(event);
    }

    /// A stored object, or [`ObjectError::Quarantined`] (quarantining it).
    fn decode_stored(
        &self,
        key: &ObjectKey,
        encoded: &str,
        bytes: &[u8],
    ) -> Result<Value, ObjectError> {
        decode_object(encoded, bytes).map_err(|error| ObjectError::Quarantined {
            key: key.clone(),
            reason: self.quarantine_reason(encoded, &error),
        })
    }

    /// A listed object, or `None` (quarantining it) if it cannot be
    /// decoded.
    fn decode_listed(&self, key: &[u8], bytes: &[u8]) -> Option<Value> {
        let encoded = String::from_utf8_lossy(key);
        match decode_object(&encoded, bytes) {
            Ok(object) => Some(object),
            Err(error) => {
                self.quarantine_reason(&encoded, &error);
                None
            }
        }
    }

    /// Records `encoded` as quarantined, logging it the first time; returns
    /// the reason.
    fn quarantine_reason(&self, encoded: &str, error: &ObjectError) -> String {
        let reason = match error {
            ObjectError::Corrupt { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        let mut quarantine = self.quarantine();
        if !quarantine.contains_key(encoded) {
            let key = ObjectKey::decode(encoded.as_bytes())
                .map_or_else(|| encoded.to_string(), |key| key.to_string());
            warn!(%key, %reason, "stored object quarantined: it cannot be decoded; delete it to clear it");
            quarantine.insert(encoded.to_string(), reason.clone());
        }
        reason
    }

    fn quarantine(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        // A map of keys, consistent after every statement.
        self.inner
            .quarantine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a counter and a queue, consistent after every
        // statement; a panicking writer cannot leave it half-changed.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn decode_object(key: &str, bytes: &[u8]) -> Result<Value, ObjectError> {
    serde_json::from_slice(bytes).map_err(|source| ObjectError::Corrupt {
        key: key.to_string(),
        source,
    })
}
