//! How a hollow cluster writes what it serves: objects and documents as
//! compact JSON bytes, and times as Kubernetes writes them.
//!
//! The lowest layer of the hollow cluster, so that the shared discovery
//! documents, the store and the watch streams all write alike without
//! depending on one another.

use std::time::SystemTime;

use bytes::Bytes;
use serde_json::Value;

/// `value` as compact JSON.
pub(super) fn to_bytes(value: &Value) -> Bytes {
    // Serializing a `Value` cannot fail: its keys are strings.
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// Now, as Kubernetes writes times (RFC 3339, seconds).
pub(super) fn timestamp() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
