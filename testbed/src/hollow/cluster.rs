//! The handle of one hollow cluster ([`HollowCluster`]): what tests and
//! benchmarks read of it, and the writes with the Kubernetes semantics the
//! agent relies on. Its data lives in `state.rs`; the requests that
//! reach these writes come through `routes.rs`.
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

use std::sync::Arc;

use bytes::Bytes;
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_apiserver::{api_version, served, ApiError, Resource};
use serde_json::{json, Value};

use super::discovery::Discovery;
use super::encoding::to_bytes;
use super::events::EventType;
use super::object::{check_name, check_namespace, check_type, established, parse_object, stamp};
use super::record::{AppliedRecord, Operation};
use super::simulator;
use super::state::{publish, write_status, Inner, State};
use crate::cluster::SimulatorOptions;

/// A lightweight in-process Kubernetes API for one edge agent. Cheap to
/// clone: clones share the cluster.
#[derive(Clone)]
pub struct HollowCluster {
    pub(super) inner: Arc<Inner>,
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
        Self {
            inner: Arc::new(Inner::new(name, options, discovery)),
        }
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.inner.name
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

    /// Overwrites the status of workload `name` (of `plural` in `group`) as
    /// its controller would, e.g. a Deployment whose pods all crashed;
    /// watchers see a MODIFIED event. Returns whether the object exists.
    /// The simulator writes its own status again only when the object is
    /// next written.
    pub fn set_status(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
        status: Value,
    ) -> bool {
        let key = ObjectKey::new(group, plural, namespace, name);
        let mut state = self.inner.lock();
        let Some(object) = state
            .objects
            .get(&key)
            .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        else {
            return false;
        };
        state.due.remove(&key);
        write_status(&mut state, &key, object, status);
        true
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
        publish(&mut state, event_type, &key, &object, bytes.clone());
        if is_definition(&key) {
            refresh_custom(&mut state);
        }
        record(&mut state, operation, resource, &key);
        simulator::schedule(&self.inner, &mut state, &key, &object);
        tracing::debug!(cluster = %self.inner.name, %key, resource_version, ?operation, "written");
        Ok(bytes)
    }
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
    publish(state, EventType::Deleted, key, &object, announced.clone());
    Some(announced)
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

fn key_of(resource: &Resource, namespace: Option<&str>, name: &str) -> ObjectKey {
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

#[cfg(test)]
mod tests;
