//! The columns a CRD (or an extension's kind) adds with
//! `additionalPrinterColumns`, and the JSON paths their cells read.

use serde_json::Value;

use crate::resources::Resource;

/// One of a CRD's additionalPrinterColumns.
pub(super) struct CustomColumn {
    pub(super) name: String,
    pub(super) kind: String,
    pub(super) priority: u8,
    pub(super) path: String,
}

/// A CRD's additionalPrinterColumns, skipping the Age column every table
/// has anyway.
pub(super) fn custom_columns(resource: &Resource) -> Vec<CustomColumn> {
    resource
        .printer_columns
        .iter()
        .filter_map(|column| {
            let name = column["name"].as_str()?;
            let path = column["jsonPath"].as_str()?;
            (path != ".metadata.creationTimestamp").then(|| CustomColumn {
                name: name.to_string(),
                kind: column["type"].as_str().unwrap_or("string").to_string(),
                priority: column["priority"]
                    .as_u64()
                    .and_then(|priority| u8::try_from(priority).ok())
                    .unwrap_or(0),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A simple `.a.b.c` JSON path; anything fancier renders empty.
pub(super) fn json_path(object: &Value, path: &str) -> Value {
    let pointer = path.trim_start_matches('.').replace('.', "/");
    object
        .pointer(&format!("/{pointer}"))
        .cloned()
        .unwrap_or(Value::Null)
}
