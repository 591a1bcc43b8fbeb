//! The patch engines of the root's Kubernetes API, as pure functions.
//!
//! [`apply_patch`] takes the live object (or `None`), the request body and
//! the [`PatchKind`] named by the request's content type, and returns the new
//! object. [`track_update`] records which manager changed which fields for
//! writes that are not server-side apply. Neither does IO; the only input
//! from outside the arguments is the clock, for `managedFields[].time`.
//!
//! Where the work is split:
//! * `json_patch`: RFC 6902 through the `json-patch` crate.
//! * `merge`: RFC 7386 JSON merge patch.
//! * `strategic`: strategic merge patch, with `merge_keys` the table of
//!   built-in list merge strategies it (and server-side apply) follows.
//! * `managed_fields`: `fieldsV1` sets and `managedFields` entries.
//! * `apply`: server-side apply and [`track_update`].
//!
//! What it does not do: validation or defaulting of the object (the caller's
//! job), OpenAPI schemas of custom resources (their lists are atomic), and
//! `resourceVersion` preconditions (the caller owns `resourceVersion`).

use serde_json::Value;

mod apply;
mod json_patch;
mod managed_fields;
mod merge;
pub(crate) mod merge_keys;
mod strategic;
#[cfg(test)]
mod tests;

/// Which patch format a request body is in, from its `Content-Type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`: RFC 6902.
    Json,
    /// `application/merge-patch+json`: RFC 7386.
    Merge,
    /// `application/strategic-merge-patch+json`: built-in kinds only.
    StrategicMerge,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply {
        /// The `fieldManager` query parameter (required for apply).
        field_manager: String,
        /// The `force` query parameter: take ownership of conflicting fields.
        force: bool,
    },
}

/// What the caller knows of the patched object's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// `group/version` (or `v1` for the core group) of the resource.
    pub api_version: String,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
    /// Whether this is a built-in Kubernetes kind (which has strategic merge
    /// keys) rather than a custom resource.
    pub builtin: bool,
}

/// Why a patch could not be applied. Each variant maps to an HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The body is not a well-formed patch of its kind (400).
    #[error("bad patch: {0}")]
    BadPatch(String),
    /// The patch is well-formed but cannot be applied, or its result is not
    /// allowed (422).
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// The object does not exist and the patch kind cannot create it (404).
    #[error("the object does not exist")]
    NotFound,
    /// The patch kind does not apply to this type, e.g. a strategic merge
    /// patch for a custom resource (415).
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// Server-side apply would change fields other managers own (409).
    #[error("{message}")]
    Conflict {
        /// The Kubernetes-shaped message, listing every conflict.
        message: String,
        /// Each conflict as (manager, field path such as `.spec.replicas`).
        causes: Vec<(String, String)>,
    },
    /// The patch asks for more work than the API does for one request: too
    /// many JSON patch operations, or `copy` operations that would grow the
    /// object past the request body limit (413).
    #[error("{0}")]
    TooLarge(String),
    /// The patch, or the object it makes, nests deeper than the API's
    /// limit (422, naming the path).
    #[error(transparent)]
    TooDeep(#[from] crate::depth::TooDeep),
}

/// Applies a patch body (JSON; for Apply, YAML or JSON) to `live` (None when
/// the object does not exist: only Apply may create; other kinds →
/// [`PatchError::NotFound`]). Returns the new object, with
/// `metadata.managedFields` maintained. Never changes
/// `metadata.resourceVersion`/`uid`/`creationTimestamp` (the caller owns
/// those); a patch that tries to change `apiVersion`/`kind`/`metadata.name`
/// is [`PatchError::Invalid`].
///
/// For the non-apply kinds the live `managedFields` are kept unless the
/// patch itself sets them; call [`track_update`] with the request's manager
/// afterwards to record the change.
pub fn apply_patch(
    kind: &PatchKind,
    live: Option<&Value>,
    body: &[u8],
    type_info: &TypeInfo,
) -> Result<Value, PatchError> {
    match kind {
        PatchKind::Apply {
            field_manager,
            force,
        } => return apply::server_side_apply(live, body, type_info, field_manager, *force),
        PatchKind::StrategicMerge if !type_info.builtin => {
            return Err(PatchError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml (strategic merge patch is not supported for {})",
                type_info.kind
            )))
        }
        PatchKind::Json | PatchKind::Merge | PatchKind::StrategicMerge => {}
    }
    let live = live.ok_or(PatchError::NotFound)?;
    let patch: Value = crate::body::json(body).map_err(|error| match error {
        crate::body::BodyError::TooDeep(too_deep) => PatchError::TooDeep(too_deep),
        error => PatchError::BadPatch(format!("the patch is not valid JSON: {error}")),
    })?;
    let mut patched = match kind {
        PatchKind::Json => json_patch::apply(live, patch)?,
        PatchKind::Merge => merge::apply(live, &patch)?,
        _ => {
            let schema = merge_keys::Schema::root(&type_info.kind, type_info.builtin);
            strategic::apply(live, &patch, schema)?
        }
    };
    crate::depth::check_value(&patched)?;
    check_identity(live, &patched)?;
    keep_server_fields(Some(live), &mut patched);
    if patched.pointer("/metadata/managedFields").is_none() {
        if let Some(fields) = live.pointer("/metadata/managedFields") {
            set_metadata(&mut patched, "managedFields", fields.clone());
        }
    }
    Ok(patched)
}

/// For create/update/non-apply patches: records `manager` (operation
/// "Update") as owner of the fields that changed between `old` and `new`, in
/// `new.metadata.managedFields`, removing those fields from other managers'
/// sets as Kubernetes does.
pub fn track_update(old: Option<&Value>, new: &mut Value, manager: &str) {
    apply::track_update(old, new, manager);
}

/// Rejects a patched object whose `apiVersion`, `kind` or `metadata.name`
/// differs from the live one's.
fn check_identity(live: &Value, patched: &Value) -> Result<(), PatchError> {
    if !patched.is_object() {
        return Err(PatchError::Invalid(
            "the patched object is not a map".into(),
        ));
    }
    for (pointer, field) in [
        ("/apiVersion", "apiVersion"),
        ("/kind", "kind"),
        ("/metadata/name", "metadata.name"),
    ] {
        if live.pointer(pointer) != patched.pointer(pointer) {
            return Err(PatchError::Invalid(format!(
                "{field}: Invalid value: the patch may not change {field}"
            )));
        }
    }
    Ok(())
}

/// The `metadata` fields the caller owns, restored from `live` (or removed
/// when creating).
fn keep_server_fields(live: Option<&Value>, patched: &mut Value) {
    for field in ["resourceVersion", "uid", "creationTimestamp"] {
        let pointer = format!("/metadata/{field}");
        match live.and_then(|live| live.pointer(&pointer)) {
            Some(value) => set_metadata(patched, field, value.clone()),
            None => {
                if let Some(Value::Object(meta)) = patched.get_mut("metadata") {
                    meta.remove(field);
                }
            }
        }
    }
}

/// Sets `metadata.<field>` of `object`, creating `metadata` if needed.
fn set_metadata(object: &mut Value, field: &str, value: Value) {
    let Value::Object(object) = object else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if !metadata.is_object() {
        *metadata = Value::Object(Default::default());
    }
    if let Value::Object(metadata) = metadata {
        metadata.insert(field.to_owned(), value);
    }
}
