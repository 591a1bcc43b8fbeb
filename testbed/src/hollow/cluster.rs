//! One hollow cluster: its objects, its resourceVersion counter, the record
//! of what was written to it, and the writes themselves with the Kubernetes
//! semantics the agent relies on.
//!
//! Objects are kept as their serialized JSON ([`Bytes`]): a `GET` answers
//! with the stored bytes, a watch event wraps them, and the bytes of an
//! object are shared by the store, the watch history and every stream that
//! sends them. They are parsed only to write (and to match a selector).
//!
//! An idle cluster (the initial namespaces, no watch) takes about 2 KB;
//! with a namespace, a ConfigMap and a settled Deployment about 6.5 KB
//! (resident memory over 10,000 and 2,000 clusters, debug build).
//!
//! Writes follow kube-apiserver where the agent can tell: server-side apply
//! creates or replaces the whole object (the agent is the only writer and
//! always applies whole objects, so no field merge is done), the server
//! sets `uid`, `creationTimestamp`, `resourceVersion` (one counter per
//! cluster) and `generation` (bumped when anything but metadata and status
//! changes), `status` is left as it was (it is a subresource), a namespaced
//! object needs its namespace to exist, deleting a namespace deletes what is
//! in it, and a CustomResourceDefinition is Established at once and serves
//! its kinds on this cluster only.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;
use relaymesh_apiserver::objects::{new_uid, ObjectKey};
use relaymesh_apiserver::{api_version, served, ApiError, Resource};
use serde_json::{json, Value};

use super::discovery::{to_bytes, Discovery};
use super::routes::HollowService;
use super::simulator::{self, Due};
use super::watch::{self, EventType, Watcher};
use crate::cluster::SimulatorOptions;

/// How many past events a cluster keeps for watches that resume from an
/// older resourceVersion; one asking for an older one gets `410 Expired`
/// and relists. In-process the gap between a list and its watch is short,
/// so a few dozen are plenty, and an idle cluster keeps no more than this.
const HISTORY_LEN: usize = 64;

/// A lightweight in-process Kubernetes API for one edge agent. Cheap to
/// clone: clones share the cluster.
#[derive(Clone)]
pub struct HollowCluster {
    pub(super) inner: Arc<Inner>,
}

/// What was written to a cluster, one entry per request that changed it,
/// in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRecord {
    /// How it was written.
    pub operation: Operation,
    /// The API group; empty for the core group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// The cluster's resourceVersion after the write.
    pub resource_version: u64,
    /// When the write was made (tokio's clock, so virtual time in tests):
    /// the fanout benchmark times each agent by it.
    pub at: tokio::time::Instant,
}

/// The kind of write an [`AppliedRecord`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply (`PATCH` with `application/apply-patch+yaml`).
    Apply,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// A JSON, merge or strategic merge `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

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
    pub(super) history: VecDeque<watch::Event>,
    /// Events up to this resourceVersion are no longer in `history`.
    pub(super) compacted: u64,
    pub(super) watchers: Vec<Watcher>,
    pub(super) next_watcher: u64,
    /// Workloads whose status is to be written, and when.
    pub(super) due: HashMap<ObjectKey, Due>,
    /// A status timer task runs (only while something is due).
    pub(super) timer_running: bool,
}

impl std::fmt::Debug for HollowCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HollowCluster")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl HollowCluster {
    /// A cluster called `name` whose workloads behave as `options` say,
    /// serving the kinds of `discovery` (share one among all clusters).
    pub fn new(name: &str, options: SimulatorOptions, discovery: Arc<Discovery>) -> Self {
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
            inner: Arc::new(Inner {
                name: name.to_string(),
                options,
                discovery,
                state: Mutex::new(state),
            }),
        }
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A kube client for this cluster: requests go straight to it, with no
    /// socket and no TLS; its default namespace is `default`. Must be
    /// called within a tokio runtime (kube's client runs a buffer task).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// The cluster as a tower service of HTTP requests, for a client made
    /// another way.
    pub fn service(&self) -> HollowService {
        HollowService::new(self.clone())
    }

    /// Every write received, in order (the status simulator's own writes
    /// and what a namespace or CRD deletion takes with it are not requests,
    /// so not recorded). The record is never trimmed: about a hundred bytes
    /// a write, for tests and benches that read it.
    pub fn applied(&self) -> Vec<AppliedRecord> {
        self.inner.lock().applied.clone()
    }

    /// The first write of the object `name` of `kind` (in `namespace`), if
    /// any: what a benchmark polling thousands of clusters needs, found
    /// under the lock without copying the record.
    pub fn first_write(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<AppliedRecord> {
        self.inner
            .lock()
            .applied
            .iter()
            .find(|record| {
                record.kind == kind
                    && record.name == name
                    && record.namespace.as_deref() == namespace
            })
            .cloned()
    }

    /// The stored object `name` (in `namespace`) of kind or plural resource
    /// `kind` in `group` (empty for the core group), as the API returns it.
    pub fn object(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let state = self.inner.lock();
        let resource = self
            .inner
            .discovery
            .builtin_resources()
            .iter()
            .chain(state.custom.iter())
            .find(|resource| {
                resource.group() == group && (resource.kind() == kind || resource.plural() == kind)
            })?;
        let key = ObjectKey::new(group, resource.plural(), namespace, name);
        let bytes = state.objects.get(&key)?;
        serde_json::from_slice(bytes).ok()
    }

    /// Every stored object in `namespace`, with its key, in key order, as
    /// the API returns it.
    pub fn objects_in(&self, namespace: &str) -> Vec<(ObjectKey, Value)> {
        let state = self.inner.lock();
        state
            .objects
            .iter()
            .filter(|(key, _)| key.namespace.as_deref() == Some(namespace))
            .filter_map(|(key, bytes)| Some((key.clone(), serde_json::from_slice(bytes).ok()?)))
            .collect()
    }

    /// The cluster's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.lock().resource_version
    }

    /// The served kind `plural` of `group/version`: built in, or from one
    /// of this cluster's CRDs.
    pub(super) fn resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Result<Resource, ApiError> {
        if let Some(resource) = self.inner.discovery.find(group, version, plural) {
            return Ok(resource.clone());
        }
        let state = self.inner.lock();
        state
            .custom
            .iter()
            .find(|resource| {
                resource.group() == group
                    && resource.version() == version
                    && resource.plural() == plural
            })
            .cloned()
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "the server could not find the requested resource ({plural}.{group}/{version})"
                ))
            })
    }

    /// The object `name`.
    pub(super) fn get(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Bytes, ApiError> {
        let key = key_of(resource, namespace, name);
        self.inner
            .lock()
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(resource, name))
    }

    /// Server-side apply of `body` as object `name`: created, or replaced
    /// whole.
    pub(super) fn apply(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        body: &[u8],
    ) -> Result<Bytes, ApiError> {
        let object = parse_object(body)?;
        self.put(
            resource,
            namespace,
            Some(name),
            object,
            Operation::Apply,
            true,
        )
    }

    /// `POST`: creates `body`; it must not exist.
    pub(super) fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: &[u8],
    ) -> Result<Bytes, ApiError> {
        let object = parse_object(body)?;
        self.put(resource, namespace, None, object, Operation::Create, true)
    }

    /// `PUT`: replaces object `name`, which must exist, with `body`.
    pub(super) fn update(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        body: &[u8],
    ) -> Result<Bytes, ApiError> {
        let object = parse_object(body)?;
        self.put(
            resource,
            namespace,
            Some(name),
            object,
            Operation::Update,
            false,
        )
    }

    /// A JSON, merge or strategic merge patch of object `name` (the API
    /// server crate's patch engines do the patching).
    pub(super) fn patch(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        kind: &relaymesh_apiserver::patch::PatchKind,
        body: &[u8],
    ) -> Result<Bytes, ApiError> {
        let live = self.get(resource, namespace, name)?;
        let live: Value = serde_json::from_slice(&live).map_err(|error| {
            ApiError::Internal(format!("a stored object is unreadable: {error}"))
        })?;
        let type_info = relaymesh_apiserver::patch::TypeInfo {
            api_version: api_version(resource.group(), resource.version()),
            kind: resource.kind().to_string(),
            builtin: resource.is_builtin(),
        };
        let patched = relaymesh_apiserver::patch::apply_patch(kind, Some(&live), body, &type_info)
            .map_err(patch_error)?;
        self.put(
            resource,
            namespace,
            Some(name),
            patched,
            Operation::Patch,
            false,
        )
    }

    /// Deletes object `name` (a namespace with everything in it, a CRD with
    /// its objects) and returns it as it was last.
    pub(super) fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Bytes, ApiError> {
        let key = key_of(resource, namespace, name);
        let mut state = self.inner.lock();
        if !state.objects.contains_key(&key) {
            return Err(not_found(resource, name));
        }
        if key.group.is_empty() && key.resource == "namespaces" {
            let contents: Vec<ObjectKey> = state
                .objects
                .keys()
                .filter(|candidate| candidate.namespace.as_deref() == Some(name))
                .cloned()
                .collect();
            for inside in contents {
                remove(&mut state, &inside);
            }
        }
        let deleted = remove(&mut state, &key).unwrap_or_default();
        if is_definition(&key) {
            let definition: Value = serde_json::from_slice(&deleted).unwrap_or_default();
            let gone: Vec<ObjectKey> = served::definition_resources(&definition)
                .iter()
                .flat_map(|custom| {
                    state
                        .objects
                        .keys()
                        .filter(|candidate| {
                            candidate.group == custom.group()
                                && candidate.resource == custom.plural()
                        })
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .collect();
            for object in gone {
                remove(&mut state, &object);
            }
            refresh_custom(&mut state);
        }
        record(&mut state, Operation::Delete, resource, &key);
        tracing::debug!(cluster = %self.inner.name, %key, "deleted");
        Ok(deleted)
    }

    /// Writes `object` as `name` (or as the name in its body): the common
    /// part of apply, create, update and patch.
    fn put(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: Option<&str>,
        mut object: Value,
        operation: Operation,
        may_create: bool,
    ) -> Result<Bytes, ApiError> {
        check_type(resource, &object)?;
        let name = check_name(&object, name)?;
        let namespace = if resource.is_namespaced() {
            let namespace = namespace.ok_or_else(|| {
                ApiError::BadRequest(format!("{} is namespaced", resource.plural()))
            })?;
            check_namespace(&object, namespace)?;
            Some(namespace)
        } else {
            None
        };
        let key = key_of(resource, namespace, &name);
        let mut state = self.inner.lock();
        if let Some(namespace) = namespace {
            let namespace_key = ObjectKey::new("", "namespaces", None, namespace);
            if !state.objects.contains_key(&namespace_key) {
                return Err(ApiError::NotFound(format!(
                    "namespaces {namespace:?} not found"
                )));
            }
        }
        let live: Option<Value> = match state.objects.get(&key) {
            Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|error| {
                ApiError::Internal(format!("a stored object is unreadable: {error}"))
            })?),
            None => None,
        };
        match (&live, operation) {
            (None, _) if !may_create => return Err(not_found(resource, &name)),
            (Some(_), Operation::Create) => {
                return Err(ApiError::AlreadyExists(format!(
                    "{} {name:?} already exists",
                    qualified(resource)
                )))
            }
            _ => {}
        }
        state.resource_version += 1;
        let resource_version = state.resource_version;
        stamp(
            &mut object,
            live.as_ref(),
            &name,
            namespace,
            resource_version,
        );
        if is_definition(&key) {
            object["status"] = established(&object);
        } else if key.group.is_empty() && key.resource == "namespaces" {
            object["status"] = json!({"phase": "Active"});
        }
        let bytes = to_bytes(&object);
        state.objects.insert(key.clone(), bytes.clone());
        let event_type = if live.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        watch::publish(&mut state, event_type, &key, &object, bytes.clone());
        if is_definition(&key) {
            refresh_custom(&mut state);
        }
        record(&mut state, operation, resource, &key);
        simulator::schedule(self, &mut state, &key, &object);
        tracing::debug!(cluster = %self.inner.name, %key, resource_version, ?operation, "written");
        Ok(bytes)
    }
}

impl Inner {
    /// The state; a panic elsewhere while it was held leaves it usable
    /// (every write finishes its changes before anything can panic).
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes a status (the simulator's): a new resourceVersion and a MODIFIED
/// event, no record.
pub(super) fn write_status(state: &mut State, key: &ObjectKey, mut object: Value, status: Value) {
    state.resource_version += 1;
    object["status"] = status;
    object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
    let bytes = to_bytes(&object);
    state.objects.insert(key.clone(), bytes.clone());
    watch::publish(state, EventType::Modified, key, &object, bytes);
}

/// Removes `key` and announces it; returns what it was.
fn remove(state: &mut State, key: &ObjectKey) -> Option<Bytes> {
    let bytes = state.objects.remove(key)?;
    state.due.remove(key);
    state.resource_version += 1;
    // The DELETED event carries the object at the deletion's version.
    let mut object: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if object.is_object() {
        object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
    }
    let announced = to_bytes(&object);
    watch::publish(state, EventType::Deleted, key, &object, announced.clone());
    Some(announced)
}

/// Appends an event to the history, dropping the oldest beyond
/// [`HISTORY_LEN`].
pub(super) fn remember(state: &mut State, event: watch::Event) {
    if state.history.len() == HISTORY_LEN {
        if let Some(oldest) = state.history.pop_front() {
            state.compacted = oldest.resource_version;
        }
    }
    state.history.push_back(event);
}

fn record(state: &mut State, operation: Operation, resource: &Resource, key: &ObjectKey) {
    let record = AppliedRecord {
        operation,
        group: key.group.clone(),
        kind: resource.kind().to_string(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        resource_version: state.resource_version,
        at: tokio::time::Instant::now(),
    };
    state.applied.push(record);
}

/// Sets what the server owns: name and namespace, `uid` and
/// `creationTimestamp` (kept from `live`), `resourceVersion`, `generation`
/// (bumped when anything but metadata and status changed), and `status`
/// (kept from `live`: it is written through its own subresource).
fn stamp(
    object: &mut Value,
    live: Option<&Value>,
    name: &str,
    namespace: Option<&str>,
    resource_version: u64,
) {
    let kept = |field: &str| live.and_then(|live| live["metadata"].get(field)).cloned();
    let generation = match live {
        None => 1,
        Some(live) => {
            let previous = live["metadata"]["generation"].as_i64().unwrap_or(1);
            if content(live) == content(object) {
                previous
            } else {
                previous + 1
            }
        }
    };
    if let Some(live) = live {
        match live.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                if let Some(fields) = object.as_object_mut() {
                    fields.remove("status");
                }
            }
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let metadata = &mut object["metadata"];
    metadata["name"] = json!(name);
    match namespace {
        Some(namespace) => metadata["namespace"] = json!(namespace),
        None => {
            if let Some(fields) = metadata.as_object_mut() {
                fields.remove("namespace");
            }
        }
    }
    metadata["uid"] = kept("uid").unwrap_or_else(|| json!(new_uid()));
    metadata["creationTimestamp"] = kept("creationTimestamp").unwrap_or_else(|| json!(timestamp()));
    metadata["resourceVersion"] = json!(resource_version.to_string());
    metadata["generation"] = json!(generation);
}

/// What a change of bumps the generation: everything but the type,
/// metadata and status.
fn content(object: &Value) -> BTreeMap<&str, &Value> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, _)| {
            !matches!(
                field.as_str(),
                "apiVersion" | "kind" | "metadata" | "status"
            )
        })
        .map(|(field, value)| (field.as_str(), value))
        .collect()
}

/// A CRD's status as kube-apiserver writes it once the names are accepted
/// and the kind is served: Established at once.
fn established(definition: &Value) -> Value {
    let now = timestamp();
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "message": message,
               "lastTransitionTime": now})
    };
    let versions: Vec<Value> = definition["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["storage"].as_bool().unwrap_or(false))
        .filter_map(|version| version.get("name").cloned())
        .collect();
    json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": definition["spec"]["names"].clone(),
        "storedVersions": versions,
    })
}

/// Rebuilds the custom kinds from the stored CRDs.
fn refresh_custom(state: &mut State) {
    state.custom = state
        .objects
        .iter()
        .filter(|(key, _)| is_definition(key))
        .filter_map(|(_, bytes)| serde_json::from_slice::<Value>(bytes).ok())
        .flat_map(|definition| served::definition_resources(&definition))
        .collect();
}

fn is_definition(key: &ObjectKey) -> bool {
    key.group == "apiextensions.k8s.io" && key.resource == "customresourcedefinitions"
}

pub(super) fn key_of(resource: &Resource, namespace: Option<&str>, name: &str) -> ObjectKey {
    let namespace = namespace.filter(|_| resource.is_namespaced());
    ObjectKey::new(resource.group(), resource.plural(), namespace, name)
}

fn qualified(resource: &Resource) -> String {
    if resource.group().is_empty() {
        resource.plural().to_string()
    } else {
        format!("{}.{}", resource.plural(), resource.group())
    }
}

fn not_found(resource: &Resource, name: &str) -> ApiError {
    ApiError::NotFound(format!("{} {name:?} not found", qualified(resource)))
}

/// The body as a JSON object. kube sends apply bodies as JSON (which is
/// YAML too); YAML proper is not accepted here.
fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(object) if object.is_object() => Ok(object),
        Ok(_) => Err(ApiError::BadRequest("the body is not an object".into())),
        Err(error) => Err(ApiError::BadRequest(format!(
            "the body is not JSON (a hollow cluster takes no YAML): {error}"
        ))),
    }
}

/// The body's `apiVersion` and `kind`, if given, must be the resource's.
fn check_type(resource: &Resource, object: &Value) -> Result<(), ApiError> {
    let expected = api_version(resource.group(), resource.version());
    if let Some(found) = object.get("apiVersion").and_then(Value::as_str) {
        if found != expected {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({found}) does not match the expected API version ({expected})"
            )));
        }
    }
    if let Some(found) = object.get("kind").and_then(Value::as_str) {
        if found != resource.kind() {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({found}) does not match the expected kind ({})",
                resource.kind()
            )));
        }
    }
    Ok(())
}

/// The object's name: the path's, which the body must not contradict, or
/// the body's for a create.
fn check_name(object: &Value, path: Option<&str>) -> Result<String, ApiError> {
    let body = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty());
    match (path, body) {
        (Some(path), Some(body)) if path != body => Err(ApiError::BadRequest(format!(
            "the name of the object ({body}) does not match the name on the URL ({path})"
        ))),
        (Some(path), _) => Ok(path.to_string()),
        (None, Some(body)) => Ok(body.to_string()),
        (None, None) => Err(ApiError::Invalid {
            field: "metadata.name".into(),
            message: "name is required (a hollow cluster has no generateName)".into(),
        }),
    }
}

fn check_namespace(object: &Value, namespace: &str) -> Result<(), ApiError> {
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(found) if !found.is_empty() && found != namespace => Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        _ => Ok(()),
    }
}

fn patch_error(error: relaymesh_apiserver::patch::PatchError) -> ApiError {
    use relaymesh_apiserver::patch::PatchError;
    match error {
        PatchError::BadPatch(message) => ApiError::BadRequest(message),
        PatchError::NotFound => ApiError::NotFound("the object does not exist".into()),
        PatchError::UnsupportedMediaType(message) => ApiError::UnsupportedMediaType(message),
        PatchError::Conflict { message, causes } => ApiError::FieldConflicts { message, causes },
        PatchError::TooLarge(message) => ApiError::PayloadTooLarge(message),
        PatchError::Invalid(message) => ApiError::Invalid {
            field: String::new(),
            message,
        },
        other => ApiError::Invalid {
            field: String::new(),
            message: other.to_string(),
        },
    }
}

/// Now, as Kubernetes writes times (RFC 3339, seconds).
pub(super) fn timestamp() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests;
