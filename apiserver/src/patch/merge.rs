//! RFC 7386 JSON merge patch: maps merge recursively, `null` deletes a key,
//! anything else (lists included) replaces.

use serde_json::Value;

use super::PatchError;

/// Applies the merge patch `patch` to `live`.
///
/// A merge patch that is not a map replaces the whole document, which for a
/// Kubernetes object is never valid: it is rejected here as `Invalid`
/// rather than left to fail the identity check.
pub(crate) fn apply(live: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Invalid(
            "a merge patch of an object must be a JSON object".into(),
        ));
    }
    let mut patched = live.clone();
    merge(&mut patched, patch);
    Ok(patched)
}

/// RFC 7386 section 2, `MergePatch(Target, Patch)`, in place.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
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
