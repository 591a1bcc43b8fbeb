//! The objects of a bundle as the agent handles them: each with a reference
//! (group, version, kind, namespace, name) that keys the inventory, the
//! drift index and status, and the body to apply.
//!
//! Parsing is pure: a bundle's bytes in, manifests or a [`ManifestError`]
//! out. Labelling an object as part of an ApplySet happens here too, so the
//! applier and the drift check compare the same body.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The label that puts an object into an ApplySet (KEP-3659).
pub const PART_OF_LABEL: &str = "applyset.kubernetes.io/part-of";

/// The annotation asking the agent to create an object and then leave it
/// alone.
pub const CREATE_ONLY_ANNOTATION: &str = "relaymesh.dev/create-only";

/// Why a bundle could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The bundle is compressed and does not decompress.
    #[error(transparent)]
    Encoding(#[from] relaymesh_protocol::bundle_encoding::BundleEncodingError),
    /// The bundle is not a JSON array.
    #[error("bundle is not a JSON array of objects: {0}")]
    NotJson(#[from] serde_json::Error),
    /// An object lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("object {index} of the bundle lacks {field}")]
    Missing {
        /// Its position in the bundle.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
}

/// Which object: the key of the inventory and of the drift index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version, as `v1`.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// The reference of a JSON object, if it has type and name.
    pub fn of(object: &Value) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        Some(Self {
            group: group.to_string(),
            version: version.to_string(),
            kind: object.get("kind")?.as_str()?.to_string(),
            namespace: object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_string),
            name: object.pointer("/metadata/name")?.as_str()?.to_string(),
        })
    }

    /// `apiVersion` as Kubernetes writes it.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-version-kind, for discovery.
    pub fn gvk(&self) -> kube::core::GroupVersionKind {
        kube::core::GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

impl fmt::Display for ObjectRef {
    /// `Kind ns/name` or `Kind name`, as status messages show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One object of a bundle, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Which object.
    pub reference: ObjectRef,
    /// The body to apply (labelled with the placement's ApplySet).
    pub body: Value,
    /// Created once, then left alone.
    pub create_only: bool,
}

/// Reads a bundle and labels each object as part of `applyset_id`.
pub fn parse_bundle(bytes: &[u8], applyset_id: &str) -> Result<Vec<Manifest>, ManifestError> {
    let json = relaymesh_protocol::bundle_encoding::objects_json(bytes)?;
    let objects: Vec<Value> = serde_json::from_slice(&json)?;
    objects
        .into_iter()
        .enumerate()
        .map(|(index, mut body)| {
            for (pointer, field) in [
                ("/apiVersion", "apiVersion"),
                ("/kind", "kind"),
                ("/metadata/name", "metadata.name"),
            ] {
                if body.pointer(pointer).and_then(Value::as_str).is_none() {
                    return Err(ManifestError::Missing { index, field });
                }
            }
            let reference = ObjectRef::of(&body).ok_or(ManifestError::Missing {
                index,
                field: "metadata.name",
            })?;
            let create_only = body
                .pointer("/metadata/annotations")
                .and_then(|annotations| annotations.get(CREATE_ONLY_ANNOTATION))
                .and_then(Value::as_str)
                == Some("true");
            label(&mut body, PART_OF_LABEL, applyset_id);
            Ok(Manifest {
                reference,
                body,
                create_only,
            })
        })
        .collect()
}

/// Sets `metadata.labels[key] = value` on a JSON object.
pub fn label(object: &mut Value, key: &str, value: &str) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Whether `live` holds everything `desired` sets: maps are compared key by
/// key (the server may add fields), everything else must be equal. This is
/// how drift is told apart from the server's own additions.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired
            .iter()
            .all(|(key, want)| live.get(key).is_some_and(|have| contains(have, want))),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len()
                && live
                    .iter()
                    .zip(desired)
                    .all(|(have, want)| contains(have, want))
        }
        (live, desired) => live == desired,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_labels_and_refuses() {
        let bundle = json!([
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop",
              "annotations": {CREATE_ONLY_ANNOTATION: "true"}}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        ]);
        let manifests =
            parse_bundle(&serde_json::to_vec(&bundle).unwrap_or_default(), "set-1").ok();
        let manifests = manifests.unwrap_or_default();
        assert_eq!(manifests.len(), 2);
        assert_eq!(manifests[0].reference.to_string(), "Deployment shop/web");
        assert_eq!(manifests[0].reference.api_version(), "apps/v1");
        assert!(manifests[0].create_only && !manifests[1].create_only);
        assert_eq!(
            manifests[1].body["metadata"]["labels"][PART_OF_LABEL],
            "set-1"
        );
        assert!(matches!(
            parse_bundle(br#"[{"kind": "X"}]"#, "s"),
            Err(ManifestError::Missing {
                index: 0,
                field: "apiVersion"
            })
        ));
        assert!(matches!(
            parse_bundle(b"{}", "s"),
            Err(ManifestError::NotJson(_))
        ));
    }

    #[test]
    fn reads_compressed_bundles_and_refuses_corrupt_ones() {
        use relaymesh_protocol::bundle_encoding::compress;
        let bundle = json!([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}]);
        let json = serde_json::to_vec(&bundle).unwrap_or_default();
        let packed = compress(&json);
        assert_ne!(packed, json);
        let read = parse_bundle(&packed, "set-1").ok().unwrap_or_default();
        assert_eq!(read, parse_bundle(&json, "set-1").ok().unwrap_or_default());
        assert_eq!(read.len(), 1);
        assert!(matches!(
            parse_bundle(&packed[..packed.len() - 2], "s"),
            Err(ManifestError::Encoding(_))
        ));
    }

    #[test]
    fn containment_ignores_server_additions_only() {
        let desired =
            json!({"spec": {"replicas": 2, "template": {"containers": [{"image": "a"}]}}});
        let live = json!({"spec": {"replicas": 2, "paused": false,
            "template": {"containers": [{"image": "a", "imagePullPolicy": "Always"}]}}, "status": {}});
        assert!(contains(&live, &desired));
        let edited = json!({"spec": {"replicas": 3, "template": {"containers": [{"image": "a"}]}}});
        assert!(!contains(&edited, &desired));
        assert!(!contains(&json!({}), &desired));
    }
}
