//! RFC 6902 JSON patch, through the `json-patch` crate.
//!
//! As in Kubernetes, a body that does not decode as a list of operations is
//! a bad request (400), and an operation that cannot be applied (a failed
//! `test`, a missing path) makes the patch unprocessable (422).

use serde_json::Value;

use super::PatchError;

/// Applies the JSON patch `patch` (already parsed as JSON) to `live`.
pub(crate) fn apply(live: &Value, patch: Value) -> Result<Value, PatchError> {
    let operations: ::json_patch::Patch = serde_json::from_value(patch)
        .map_err(|err| PatchError::BadPatch(format!("invalid JSON patch: {err}")))?;
    let mut patched = live.clone();
    // Not `json_patch::patch`: on a failed operation it undoes the earlier
    // ones, and json-patch 5.0.0 panics when an undo fails (a `copy` then a
    // failing `move` from its target). A failed patch drops this copy
    // anyway, so there is nothing to undo.
    ::json_patch::patch_unsafe(&mut patched, &operations).map_err(|err| {
        PatchError::Invalid(format!("the JSON patch could not be applied: {err}"))
    })?;
    Ok(patched)
}
