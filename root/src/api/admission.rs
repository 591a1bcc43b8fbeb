//! The checks a Placement passes before it is stored: its spec must read as
//! the placement code reads it (or the write is refused), and names of
//! clusters the tree does not know draw a warning (the write still goes
//! through, since a cluster may join later).

use relaymesh_apiserver::ApiError;
use relaymesh_protocol::{NodeRecord, Role};
use serde_json::Value;
use std::sync::Arc;

use crate::placement::{PlacementError, Specs};

/// The warning for a Placement whose `spec.clusters.names` name clusters
/// that `unknown_clusters` does not know: it is accepted (the cluster may
/// join later, and is selected then), but a misspelt name would otherwise
/// place nothing without a word.
pub(super) fn unknown_cluster_warning(
    placement: &Value,
    unknown_clusters: impl Fn(&[&str]) -> Vec<String>,
) -> Vec<String> {
    let names: Vec<&str> = placement
        .pointer("/spec/clusters/names")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let unknown = unknown_clusters(&names);
    if unknown.is_empty() {
        return Vec::new();
    }
    let quoted: Vec<String> = unknown.iter().map(|name| format!("{name:?}")).collect();
    vec![format!(
        "spec.clusters.names: no known cluster is named {}; the placement selects it once it joins",
        quoted.join(", ")
    )]
}

/// Which of `names` no agent in `records` has, in the order given: one
/// pass over the inventory, however many names.
pub(super) fn unknown_names(records: &[Arc<NodeRecord>], names: &[&str]) -> Vec<String> {
    let mut found = vec![false; names.len()];
    for record in records.iter().filter(|record| record.role == Role::Agent) {
        for (index, name) in names.iter().enumerate() {
            if record.name == *name {
                found[index] = true;
            }
        }
    }
    let mut unknown: Vec<String> = Vec::new();
    for (name, found) in names.iter().zip(found) {
        if !found && !unknown.iter().any(|seen| seen == name) {
            unknown.push(name.to_string());
        }
    }
    unknown
}

/// A Placement is checked by the code that will place it, and what it
/// reads is kept in `specs` for everyone who reads the stored object.
pub(super) fn validate_placement(
    specs: &Specs,
    namespace: Option<&str>,
    object: &Value,
) -> Result<(), ApiError> {
    // The namespace comes from the URL when the object names none.
    let mut placement = object.clone();
    if let (Some(namespace), Some(metadata)) = (namespace, placement.get_mut("metadata")) {
        metadata["namespace"] = Value::from(namespace);
    }
    specs
        .admit(&placement)
        .map(|_| ())
        .map_err(|PlacementError::Invalid { field, message }| ApiError::Invalid { field, message })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn placements_naming_unknown_clusters_are_warned_of() {
        let record = |name: &str, role: Role| NodeRecord {
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
            name: name.into(),
            role,
            parent: Some("root".into()),
            labels: Default::default(),
            addresses: vec![],
            version: "0.1.0".into(),
            link: None,
        };
        let records = [record("edge-1", Role::Agent), record("eu", Role::Relay)].map(Arc::new);
        let unknown = |names: &[&str]| unknown_names(&records, names);
        let placement = |names: Value| json!({"spec": {"clusters": {"names": names}}});
        assert!(unknown_cluster_warning(&placement(json!(["edge-1"])), unknown).is_empty());
        assert!(unknown_cluster_warning(&json!({"spec": {}}), unknown).is_empty());
        // A relay is not a cluster; a name given twice is named once.
        let warned =
            unknown_cluster_warning(&placement(json!(["edge-1", "eu", "edge-9", "eu"])), unknown);
        assert_eq!(
            warned,
            ["spec.clusters.names: no known cluster is named \"eu\", \"edge-9\"; the placement selects it once it joins"]
        );
    }
}
