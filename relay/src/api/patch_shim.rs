//! TEMPORARY SHIM — DELETE WHEN `api/patch.rs` LANDS.
//!
//! A stand-in with the interface of the patch module another engineer is
//! writing, so the object API compiles and mostly works meanwhile: merge
//! patch (RFC 7386) is real; strategic merge patch and server-side apply are
//! approximated by a merge patch; JSON patch is refused; managedFields are
//! not maintained.

use serde_json::Value;

/// How a PATCH body is to be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply {
        /// The `fieldManager` query parameter.
        field_manager: String,
        /// The `force` query parameter.
        force: bool,
    },
}

/// The type of the patched object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// `group/version`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Whether it is a built-in kind.
    pub builtin: bool,
}

/// Why a patch failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
#[allow(dead_code)] // The shim never fails this way; the real module will.
pub enum PatchError {
    /// The patch is malformed (400).
    #[error("{0}")]
    BadPatch(String),
    /// The result is invalid (422).
    #[error("{0}")]
    Invalid(String),
    /// Apply conflicts with other managers (409).
    #[error("{message}")]
    Conflict {
        /// A sentence for humans.
        message: String,
        /// (manager, field path) pairs.
        causes: Vec<(String, String)>,
    },
}

/// Applies a patch body to `live`.
pub fn apply_patch(
    kind: &PatchKind,
    live: Option<&Value>,
    body: &[u8],
    type_info: &TypeInfo,
) -> Result<Value, PatchError> {
    let patch: Value = match kind {
        PatchKind::Apply { .. } => serde_yaml::from_slice(body).map_err(|error| {
            PatchError::BadPatch(format!("cannot decode the apply body: {error}"))
        })?,
        _ => serde_json::from_slice(body)
            .map_err(|error| PatchError::BadPatch(format!("cannot decode the patch: {error}")))?,
    };
    match (kind, live) {
        (PatchKind::Json, _) => Err(PatchError::BadPatch(
            "JSON patch is not supported yet".into(),
        )),
        (PatchKind::Apply { .. }, None) => Ok(patch),
        (_, None) => Err(PatchError::BadPatch("the object does not exist".into())),
        (_, Some(live)) => {
            let mut merged = live.clone();
            merge(&mut merged, &patch);
            if merged.get("apiVersion").is_none() {
                merged["apiVersion"] = Value::String(type_info.api_version.clone());
            }
            Ok(merged)
        }
    }
}

/// Records `manager` in managedFields (the shim does nothing).
pub fn track_update(_old: Option<&Value>, _new: &mut Value, _manager: &str) {}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}
