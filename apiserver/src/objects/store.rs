//! The object store itself: what its clones share, opening it on a backend,
//! and the reads (gets, lists, watches). The write path adds its methods in
//! `write.rs`; both take the one lock here, which is what makes a list and
//! its resourceVersion, or a watch's replay and its receiver, consistent.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::{json, Value};
use tokio::sync::broadcast;
use tracing::info;

use super::backend::ObjectBackend;
use super::dependents::GenerationDependents;
use super::error::ObjectError;
use super::history::{History, ObjectEvent};
use super::key::{prefix, ObjectKey, RESOURCE_VERSION_KEY};
use super::owners::OwnerIndex;
use super::quarantine::Quarantine;
use super::scan::Scan;

/// How many events a slow subscriber may fall behind before it is told it
/// lagged.
const BROADCAST_CAPACITY: usize = 4096;

/// Namespaces that exist from the start, as in every Kubernetes cluster.
pub const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The object store. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ObjectStore {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) tree: Box<dyn ObjectBackend>,
    pub(super) state: Mutex<State>,
    pub(super) events: broadcast::Sender<ObjectEvent>,
    /// Stored objects that cannot be decoded.
    pub(super) quarantine: Quarantine,
    /// Whose generation a write moves on besides the written object's.
    pub(super) dependents: OnceLock<Arc<dyn GenerationDependents>>,
    /// Signalled whenever a replicated backend's feed moves
    /// `State::resource_version` on.
    pub(super) caught_up: Condvar,
    /// How many times the history started over because changes were lost
    /// (a replicated backend compacted them while the feed was broken).
    pub(super) restarts: tokio::sync::watch::Sender<u64>,
}

pub(super) struct State {
    /// The last resourceVersion handed out (on a replicated backend: the
    /// revision up to which the feed has handed every change over).
    pub(super) resource_version: u64,
    /// The latest events, from which watches resume.
    pub(super) history: History,
    /// Uids and owner references, in step with the stored objects.
    pub(super) owners: OwnerIndex,
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
        let resource_version = match (tree.replicated(), tree.get(RESOURCE_VERSION_KEY)?) {
            // A replicated backend numbers its writes: the store starts at
            // a fence, its latest revision and a change of its own, which a
            // replay of the history can wait for (`Replicated::changes`).
            (Some(replicated), _) => replicated.fence()?,
            (None, Some(stored)) => {
                serde_json::from_slice(&stored.value).map_err(|source| ObjectError::Corrupt {
                    key: "resourceVersion".into(),
                    source,
                })?
            }
            (None, None) => 0,
        };
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let store = Self {
            inner: Arc::new(Inner {
                tree,
                state: Mutex::new(State {
                    resource_version,
                    history: History::starting_at(resource_version),
                    owners: OwnerIndex::default(),
                }),
                events,
                quarantine: Quarantine::default(),
                dependents: OnceLock::new(),
                caught_up: Condvar::new(),
                restarts: tokio::sync::watch::Sender::new(0),
            }),
        };
        if let Some(replicated) = store.replicated() {
            // The index and the feed start at one revision, so that no
            // change is missed or counted twice.
            let owners = store.owners_at(resource_version)?;
            store.lock().owners = owners;
            store.follow_feed(replicated, resource_version)?;
        } else {
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
                match store.create(&key, namespace) {
                    // Another replica, starting too, came first.
                    Ok(_) | Err(ObjectError::AlreadyExists(_)) => {}
                    Err(error) => return Err(error),
                }
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
            Some(bytes) => Ok(Some(
                self.inner.quarantine.decode_stored(key, &encoded, &bytes)?,
            )),
            None => Ok(None),
        }
    }

    /// The quarantined objects (stored, but not decodable), with why.
    pub fn quarantined(&self) -> Vec<(ObjectKey, String)> {
        self.inner.quarantine.list()
    }

    /// The objects of a resource, in one namespace or all, sorted by
    /// namespace and name, and the resourceVersion they are current at.
    pub fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(Vec<Value>, u64), ObjectError> {
        let wanted = prefix(group, resource, namespace);
        if let Some(replicated) = self.replicated() {
            return self.list_replicated(replicated, &wanted);
        }
        // Holding the lock makes the list and its version consistent.
        let state = self.lock();
        let objects = self.scan().objects(&wanted)?;
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
        let wanted = prefix(group, resource, namespace);
        if let Some(replicated) = self.replicated() {
            // The backend keeps every version until it compacts them.
            return self.list_at_replicated(replicated, &wanted, resource_version);
        }
        let state = self.lock();
        state
            .history
            .reaches(resource_version, state.resource_version)?;
        let mut objects = self.scan().by_encoded_key(&wanted)?;
        state
            .history
            .undo_after(resource_version, &wanted, &mut objects);
        Ok(objects.into_values().collect())
    }

    /// Every object of every kind, with its key; quarantined ones left out.
    pub fn list_all(&self) -> Result<Vec<(ObjectKey, Value)>, ObjectError> {
        self.scan().all()
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

    /// Changes whenever the store's history starts over because changes
    /// were lost (on a replicated backend, compacted while its feed was
    /// broken): a watch must end with 410 Gone, a controller must read
    /// everything again. Never changes on a local backend.
    pub fn restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.restarts.subscribe()
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
        if let Some(replicated) = self.replicated() {
            return self.watch_replicated(replicated, resource_version);
        }
        let state = self.lock();
        let events = state.history.since(resource_version)?;
        Ok((events, self.inner.events.subscribe()))
    }

    /// The changes after `resource_version`, or [`ObjectError::Gone`].
    pub fn events_since(&self, resource_version: u64) -> Result<Vec<ObjectEvent>, ObjectError> {
        self.watch(resource_version).map(|(events, _)| events)
    }

    /// The stored objects, for a scan.
    pub(super) fn scan(&self) -> Scan<'_> {
        Scan::new(&*self.inner.tree, &self.inner.quarantine)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a counter and a queue, consistent after every
        // statement; a panicking writer cannot leave it half-changed.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
