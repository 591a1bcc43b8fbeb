//! Bundles: the objects a placement carries, in one canonical encoding, so
//! that the same objects always hash to the same `BundleId` and a bundle is
//! shared by every placement and destination that carries exactly them.

use serde_json::{Map, Value};

/// Metadata fields the server owns; they differ between copies of the same
/// object and never travel.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Annotations that describe the root's copy, not the workload.
const SERVER_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// A copy of `object` without status and server-owned metadata.
pub fn strip_server_fields(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SERVER_METADATA {
                metadata.remove(*field);
            }
            let empty = match metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                Some(annotations) => {
                    for annotation in SERVER_ANNOTATIONS {
                        annotations.remove(*annotation);
                    }
                    annotations.is_empty()
                }
                None => false,
            };
            if empty {
                metadata.remove("annotations");
            }
        }
    }
    object
}

/// How the root stores and sends the bundles it packs (`relay run
/// --bundle-encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleEncoding {
    /// The objects' canonical JSON, which every release reads.
    Json,
    /// That JSON compressed with zstd, which nodes of protocol version 13
    /// and later read (`relaymesh_protocol::bundle_encoding`).
    Zstd,
}

impl BundleEncoding {
    /// The bytes of a bundle whose objects' JSON is `json`.
    pub fn encode(self, json: Vec<u8>) -> Vec<u8> {
        match self {
            Self::Json => json,
            Self::Zstd => relaymesh_protocol::bundle_encoding::compress(&json),
        }
    }
}

/// Packs objects into a bundle: a JSON array in a fixed order (group, kind,
/// namespace, name), each object stripped and with its keys sorted.
pub fn pack(objects: &[&Value]) -> Vec<u8> {
    let mut stripped: Vec<Value> = objects.iter().map(|o| strip_server_fields(o)).collect();
    stripped.sort_by_key(sort_key);
    canonical_json(&Value::Array(stripped))
}

/// JSON with object keys sorted at every level and no whitespace, whatever
/// map order serde_json was built with.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    out.insert(key.clone(), sorted(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Serializing a Value cannot fail: its keys are strings.
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

fn sort_key(object: &Value) -> (String, String, String, String) {
    let text = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let api_version = text(object.get("apiVersion"));
    let group = api_version
        .rsplit_once('/')
        .map(|(group, _)| group.to_string())
        .unwrap_or_default();
    let metadata = object.get("metadata");
    (
        group,
        text(object.get("kind")),
        text(metadata.and_then(|m| m.get("namespace"))),
        text(metadata.and_then(|m| m.get("name"))),
    )
}
