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
    ::json_patch::patch(&mut patched, &operations).map_err(|err| {
        PatchError::Invalid(format!("the JSON patch could not be applied: {err}"))
    })?;
    Ok(patched)
}
