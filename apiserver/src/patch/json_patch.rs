//! RFC 6902 JSON patch, through the `json-patch` crate.
//!
//! As in Kubernetes, a body that does not decode as a list of operations is
//! a bad request (400), and an operation that cannot be applied (a failed
//! `test`, a missing path) makes the patch unprocessable (422).
//!
//! Also as in Kubernetes, a patch is refused with 413 when it has more than
//! [`MAX_OPERATIONS`] operations, or when its `copy` operations would copy
//! more than [`MAX_COPIED_BYTES`] in all (kube-apiserver's
//! `AccumulatedCopySizeLimit`): every other operation adds at most what the
//! body holds, but each `copy` can double the object, so a small patch
//! could otherwise make a huge one.

use serde_json::Value;

use super::PatchError;

/// The most operations one JSON patch may have (kube-apiserver's
/// `maxJSONPatchOperations`).
pub(crate) const MAX_OPERATIONS: usize = 10_000;

/// The most bytes (as JSON) the `copy` operations of one patch may copy in
/// all: the request body limit, as kube-apiserver sets it.
pub(crate) const MAX_COPIED_BYTES: u64 = 3 * 1024 * 1024;

/// Applies the JSON patch `patch` (already parsed as JSON) to `live`.
pub(crate) fn apply(live: &Value, patch: Value) -> Result<Value, PatchError> {
    if let Value::Array(operations) = &patch {
        if operations.len() > MAX_OPERATIONS {
            return Err(PatchError::TooLarge(format!(
                "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
                operations.len()
            )));
        }
    }
    let operations: ::json_patch::Patch = serde_json::from_value(patch)
        .map_err(|err| PatchError::BadPatch(format!("invalid JSON patch: {err}")))?;
    let mut patched = live.clone();
    let mut copied: u64 = 0;
    // One operation at a time, so the size of what each `copy` copies is
    // known before it is copied.
    for (index, operation) in operations.iter().enumerate() {
        if let ::json_patch::PatchOperation::Copy(copy) = operation {
            if let Some(from) = patched.pointer(copy.from.as_str()) {
                copied = copied.saturating_add(json_size(from, MAX_COPIED_BYTES - copied));
                if copied > MAX_COPIED_BYTES {
                    return Err(PatchError::TooLarge(format!(
                        "the copy operations of this JSON patch copy more than \
                         {MAX_COPIED_BYTES} bytes (operation {index})"
                    )));
                }
            }
        }
        // Not `json_patch::patch`: on a failed operation it undoes the
        // earlier ones, and json-patch 5.0.0 panics when an undo fails (a
        // `copy` then a failing `move` from its target). A failed patch drops
        // this copy anyway, so there is nothing to undo.
        ::json_patch::patch_unsafe(&mut patched, std::slice::from_ref(operation)).map_err(
            |err| {
                PatchError::Invalid(format!(
                    "the JSON patch could not be applied: operation '/{index}' failed at path \
                     '{}': {}",
                    err.path, err.kind
                ))
            },
        )?;
    }
    Ok(patched)
}

/// The length of `value` as JSON, counted only up to just past `budget`.
fn json_size(value: &Value, budget: u64) -> u64 {
    struct Counter {
        bytes: u64,
        budget: u64,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes = self.bytes.saturating_add(buf.len() as u64);
            if self.bytes > self.budget {
                // Stops the serializer: the answer is "too much" already.
                return Err(std::io::Error::other("over budget"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { bytes: 0, budget };
    let _ = serde_json::to_writer(&mut counter, value);
    counter.bytes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn too_many_operations_are_refused_before_any_is_applied() {
        let live = json!({"a": 1});
        let operations: Vec<Value> = (0..=MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        let error = apply(&live, Value::Array(operations)).expect_err("too many");
        assert!(
            matches!(&error, PatchError::TooLarge(message) if message.contains("maximum operations in a JSON patch is 10000, got 10001")),
            "{error:?}"
        );
        let operations: Vec<Value> = (0..MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        assert_eq!(apply(&live, Value::Array(operations)), Ok(live));
    }

    #[test]
    fn copies_that_double_the_object_are_refused() {
        // Each operation copies the whole object into itself: 60 of them
        // would make 2^60 times the object.
        let live = json!({"a": "x".repeat(1000)});
        let operations: Vec<Value> = (0..60)
            .map(|n| json!({"op": "copy", "from": "", "path": format!("/c{n}")}))
            .collect();
        let error = apply(&live, Value::Array(operations)).expect_err("a copy bomb");
        assert!(
            matches!(&error, PatchError::TooLarge(message) if message.contains("copy more than")),
            "{error:?}"
        );
        // Copies that stay small are fine.
        let patched = apply(&live, json!([{"op": "copy", "from": "/a", "path": "/b"}]))
            .expect("a small copy");
        assert_eq!(patched["b"], live["a"]);
    }

    #[test]
    fn a_failed_operation_is_named_by_its_index() {
        let error = apply(
            &json!({"a": 1}),
            json!([{"op": "test", "path": "/a", "value": 1}, {"op": "remove", "path": "/b"}]),
        )
        .expect_err("/b does not exist");
        assert!(
            matches!(&error, PatchError::Invalid(message) if message.contains("operation '/1' failed at path '/b'")),
            "{error:?}"
        );
    }
}
