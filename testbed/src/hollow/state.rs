//! The shared data of one hollow cluster: its objects, its resourceVersion
//! counter, its CRDs' kinds, the record of what was written, the watch
//! history and watchers, and the statuses due; all behind one lock.
//!
//! It sits below everything that reads or changes a cluster (the writes,
//! the status simulator, the watch streams), so that each of them takes
//! the state alone and none needs the others. What every change does to
//! the state itself — a new resourceVersion, an event for the watchers and
//! the history — is here too, so that the writes and the simulator change
//! it alike.
//!
//! Objects are kept as their serialized JSON ([`Bytes`]): a `GET` answers
//! with the stored bytes, a watch event wraps them, and the bytes of an
//! object are shared by the store, the watch history and every stream that
//! sends them. They are parsed only to write (and to match a selector).
//!
//! An idle cluster (the initial namespaces, no watch) takes about 2 KB;
//! with a namespace, a ConfigMap and a settled Deployment about 6.5 KB
//! (resident memory over 10,000 and 2,000 clusters, debug build).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_apiserver::Resource;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::discovery::Discovery;
use super::encoding::to_bytes;
use super::events::{Event, EventType, Watcher};
use super::record::AppliedRecord;
use crate::cluster::SimulatorOptions;

/// How many past events a cluster keeps for watches that resume from an
/// older resourceVersion; one asking for an older one gets `410 Expired`
/// and relists. In-process the gap between a list and its watch is short,
/// so a few dozen are plenty, and an idle cluster keeps no more than this.
pub(super) const HISTORY_LEN: usize = 64;

/// What a cluster is and holds; shared by its handles, and held weakly by
/// its status timer and its watch streams so that they do not keep a
/// dropped cluster alive.
pub(super) struct Inner {
    pub(super) name: String,
    pub(super) options: SimulatorOptions,
    pub(super) discovery: Arc<Discovery>,
    state: Mutex<State>,
}

/// Everything that changes, behind the cluster's one lock (never held
/// across an `.await`).
pub(super) struct State {
    /// The resourceVersion of the newest write.
    pub(super) resource_version: u64,
    pub(super) objects: BTreeMap<ObjectKey, Bytes>,
    /// The kinds this cluster's CRDs serve.
    pub(super) custom: Vec<Resource>,
    pub(super) applied: Vec<AppliedRecord>,
    /// The newest events, oldest first.
    pub(super) history: VecDeque<Event>,
    /// Events up to this resourceVersion are no longer in `history`.
    pub(super) compacted: u64,
    pub(super) watchers: Vec<Watcher>,
    pub(super) next_watcher: u64,
    /// Workloads whose status is to be written, and when.
    pub(super) due: HashMap<ObjectKey, Due>,
    /// A status timer task runs (only while something is due).
    pub(super) timer_running: bool,
}

/// When a workload's status is due (the status simulator's schedule).
#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    pub(super) at: Instant,
    /// The generation the delay started for; a newer one restarts it.
    pub(super) generation: i64,
}

impl Inner {
    /// A cluster called `name` whose workloads behave as `options` say,
    /// holding the namespaces every cluster starts with.
    pub(super) fn new(name: &str, options: SimulatorOptions, discovery: Arc<Discovery>) -> Self {
        let objects: BTreeMap<ObjectKey, Bytes> =
            discovery.initial_namespaces().iter().cloned().collect();
        let state = State {
            resource_version: objects.len() as u64,
            objects,
            custom: Vec::new(),
            applied: Vec::new(),
            history: VecDeque::new(),
            compacted: 0,
            watchers: Vec::new(),
            next_watcher: 0,
            due: HashMap::new(),
            timer_running: false,
        };
        Self {
            name: name.to_string(),
            options,
            discovery,
            state: Mutex::new(state),
        }
    }

    /// The state; a panic elsewhere while it was held leaves it usable
    /// (every write finishes its changes before anything can panic).
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Announces a write to the matching watchers and keeps it in the history.
/// `object` is the written object, `bytes` its serialization.
pub(super) fn publish(
    state: &mut State,
    event_type: EventType,
    key: &ObjectKey,
    object: &Value,
    bytes: Bytes,
) {
    let event = Event {
        resource_version: state.resource_version,
        event_type,
        key: key.clone(),
        object: bytes,
    };
    event.announce(&mut state.watchers, object);
    remember(state, event);
}

/// Writes a status (the simulator's): a new resourceVersion and a MODIFIED
/// event, no record.
pub(super) fn write_status(state: &mut State, key: &ObjectKey, mut object: Value, status: Value) {
    state.resource_version += 1;
    object["status"] = status;
    object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
    let bytes = to_bytes(&object);
    state.objects.insert(key.clone(), bytes.clone());
    publish(state, EventType::Modified, key, &object, bytes);
}

/// Appends an event to the history, dropping the oldest beyond
/// [`HISTORY_LEN`].
fn remember(state: &mut State, event: Event) {
    if state.history.len() == HISTORY_LEN {
        if let Some(oldest) = state.history.pop_front() {
            state.compacted = oldest.resource_version;
        }
    }
    state.history.push_back(event);
}
