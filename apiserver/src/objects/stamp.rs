//! The metadata fields the server owns: `uid`, `creationTimestamp`,
//! `generation`, `resourceVersion`, and the namespace and name a key implies.
//! Pure functions on JSON; no IO.
//!
//! `generation` is kept only where kube-apiserver keeps it: custom
//! resources and an extension's kinds (as for CRDs), and the built-in kinds
//! whose registry strategy sets it ([`tracks_generation`]).

use std::time::SystemTime;

use rand::Rng;
use serde_json::{Map, Value};

use super::key::ObjectKey;

/// A random RFC 4122 version 4 UUID, as Kubernetes uids are.
pub fn new_uid() -> String {
    let mut bytes: [u8; 16] = rand::thread_rng().gen();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The API groups kube-apiserver itself serves (Kubernetes 1.33, every
/// version). A resource in any other group is a custom resource or one of
/// an extension's kinds. CRD groups must contain a dot, so every group
/// without one is built in too.
const KUBERNETES_GROUPS: &[&str] = &[
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// The built-in (group, resource)s whose registry strategy sets
/// `metadata.generation` to 1 in `PrepareForCreate` and moves it on in
/// `PrepareForUpdate`, in kubernetes/kubernetes `pkg/registry/<group>/<kind>/
/// strategy.go` (and the apiextensions-apiserver's for CRDs). Every other
/// built-in kind (ConfigMap, Secret, Service, Namespace, ServiceAccount,
/// HorizontalPodAutoscaler, ResourceClaim, CSIDriver, ...) has a strategy
/// that leaves it alone. Pods have it since 1.33: KEP-5067 sets it outside
/// any feature gate.
const BUILTIN_WITH_GENERATION: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("discovery.k8s.io", "endpointslices"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    ),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "networkpolicies"),
    ("policy", "poddisruptionbudgets"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceslices"),
];

/// Whether kube-apiserver sets and moves on `metadata.generation` for
/// objects of `group`/`resource`: every custom resource does (the CRD
/// strategy sets it), and the built-in kinds [`BUILTIN_WITH_GENERATION`]
/// lists.
pub(super) fn tracks_generation(group: &str, resource: &str) -> bool {
    let builtin = !group.contains('.') || KUBERNETES_GROUPS.contains(&group);
    !builtin || BUILTIN_WITH_GENERATION.contains(&(group, resource))
}

/// Sets the fields of a new object: uid, creation time, generation 1 where
/// the kind tracks it, and the key's name and namespace. Drops any
/// `deletionTimestamp` a client sent.
pub(super) fn new_object(object: &mut Value, key: &ObjectKey, now: SystemTime) {
    let metadata = metadata_mut(object);
    metadata.insert("uid".into(), Value::String(new_uid()));
    metadata.insert(
        "creationTimestamp".into(),
        Value::String(humantime::format_rfc3339_seconds(now).to_string()),
    );
    if tracks_generation(&key.group, &key.resource) {
        metadata.insert("generation".into(), Value::from(1));
    } else if metadata
        .get("generation")
        .is_some_and(|generation| generation.as_i64().is_none_or(|value| value == 0))
    {
        // Elsewhere kube-apiserver stores what the client sent, but reads
        // it into an int64 that JSON leaves out when zero.
        metadata.remove("generation");
    }
    metadata.remove("deletionTimestamp");
    metadata.remove("deletionGracePeriodSeconds");
    set_identity(metadata, key);
}

/// Marks an object as being deleted at `now`: `deletionTimestamp`, a grace
/// period of 0, and `finalizers` added to those it has.
pub(super) fn mark_for_deletion(object: &mut Value, finalizers: &[&str], now: SystemTime) {
    let metadata = metadata_mut(object);
    if !metadata.contains_key("deletionTimestamp") {
        metadata.insert(
            "deletionTimestamp".into(),
            Value::String(humantime::format_rfc3339_seconds(now).to_string()),
        );
        metadata.insert("deletionGracePeriodSeconds".into(), Value::from(0));
    }
    let list = metadata
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        for finalizer in finalizers {
            if !list.iter().any(|present| present == finalizer) {
                list.push(Value::String(finalizer.to_string()));
            }
        }
    }
}

/// Carries the server-owned fields of `old` over to its replacement `new`:
/// its generation, moved on if the kind tracks it and anything but
/// metadata and status changed (no client can set it on an update, as
/// kube-apiserver's `BeforeUpdate` keeps the old one).
pub(super) fn carry_over(old: &Value, new: &mut Value, key: &ObjectKey) {
    let old_generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
    let generation = match old_generation {
        // An object stored without one (before its kind tracked it) gets
        // one with its first change, as kube-apiserver's 0 + 1.
        stored if tracks_generation(&key.group, &key.resource) && spec_changed(old, new) => {
            Some(stored.unwrap_or(0) + 1)
        }
        stored => stored.filter(|generation| *generation != 0),
    };
    let metadata = metadata_mut(new);
    // The deletion fields are the server's: set by a DELETE of an object
    // with finalizers (`ObjectStore::mark_for_deletion`), never by a write.
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
    match generation {
        Some(generation) => metadata.insert("generation".into(), Value::from(generation)),
        None => metadata.remove("generation"),
    };
    set_identity(metadata, key);
}

/// The stored resourceVersion of an object (0 if it has none).
pub(super) fn resource_version(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

/// Sets `metadata.resourceVersion` (a string, as in Kubernetes).
pub(super) fn set_resource_version(object: &mut Value, resource_version: u64) {
    metadata_mut(object).insert(
        "resourceVersion".into(),
        Value::String(resource_version.to_string()),
    );
}

/// Whether anything outside `metadata` and `status` differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let rest = |object: &Value| -> Map<String, Value> {
        object
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .filter(|(name, _)| !matches!(name.as_str(), "metadata" | "status"))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    rest(old) != rest(new)
}

fn set_identity(metadata: &mut Map<String, Value>, key: &ObjectKey) {
    metadata.insert("name".into(), Value::String(key.name.clone()));
    match &key.namespace {
        Some(namespace) => metadata.insert("namespace".into(), Value::String(namespace.clone())),
        None => metadata.remove("namespace"),
    };
}

/// `object.metadata`, made an object if it is missing or not one. `object`
/// itself must be a JSON object (callers check); anything else is replaced
/// by one.
fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let Value::Object(fields) = object else {
        unreachable!("made an object above")
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    match metadata {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}
