//! The `Cordon` object: a cluster cordoned, drained or made schedulable
//! again at the root (`relayctl cordon|drain|uncordon`).
//!
//! `POST .../cordons` with `{"apiVersion":"relaymesh.dev/v1alpha1",
//! "kind":"Cordon","spec":{"cluster":"edge-1","state":"Draining"}}`. The
//! state travels as two labels only the root sets, with the cluster's
//! other labels (see [`relaymesh_protocol::cluster_labels`]):
//! `relaymesh.dev/cordoned=true` (count-bounded placements keep what they
//! have there and add nothing) and `relaymesh.dev/draining=true`, later
//! `done` (they are placed elsewhere, and the cluster keeps its copies
//! until the replacements are ready). This module checks requests and
//! shapes replies; it does no IO.

use std::collections::BTreeMap;

use relaymesh_protocol::ClusterLabels;
use relaymesh_topology::placement::{CORDONED_LABEL, DRAINING_LABEL};
use relaymesh_topology::selector::LabelLookup;
use serde_json::{json, Value};

use super::nodes::{invalid, API_VERSION};
use super::ApiError;

const KIND: &str = "Cordon";

/// What a `Cordon` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CordonState {
    /// No new count-bounded placements; the ones there stay.
    Cordoned,
    /// Cordoned, and its count-bounded placements placed elsewhere.
    Draining,
    /// Back to normal.
    Schedulable,
}

impl CordonState {
    /// The label change that says it.
    pub fn change(self, cluster: &str) -> ClusterLabels {
        let mut set = BTreeMap::new();
        let mut remove = Vec::new();
        match self {
            Self::Cordoned => {
                set.insert(CORDONED_LABEL.to_string(), "true".to_string());
                remove.push(DRAINING_LABEL.to_string());
            }
            Self::Draining => {
                set.insert(CORDONED_LABEL.to_string(), "true".to_string());
                set.insert(DRAINING_LABEL.to_string(), "true".to_string());
            }
            Self::Schedulable => {
                remove.push(CORDONED_LABEL.to_string());
                remove.push(DRAINING_LABEL.to_string());
            }
        }
        ClusterLabels {
            node: cluster.to_string(),
            set,
            remove,
            annotations: Default::default(),
        }
    }
}

/// The cluster and state a `Cordon` request asks for.
pub(super) fn parse_request(body: &[u8]) -> Result<(String, CordonState), ApiError> {
    let (object, cluster) = super::cluster_labels::cluster_request(body, KIND)?;
    super::schemas::refuse_unknown_fields(KIND, &super::schemas::cordon_request(), &object)?;
    let state = match object
        .get("spec")
        .and_then(|spec| spec.get("state"))
        .and_then(Value::as_str)
    {
        Some("Cordoned") => CordonState::Cordoned,
        Some("Draining") => CordonState::Draining,
        Some("Schedulable") => CordonState::Schedulable,
        Some(other) => {
            return Err(invalid(
                "spec.state",
                format!("Unsupported value: {other:?}: supported values: \"Cordoned\", \"Draining\", \"Schedulable\""),
            ))
        }
        None => return Err(invalid("spec.state", "Required value")),
    };
    Ok((cluster, state))
}

/// The reply: the request with what the root changed on the cluster.
pub(super) fn object(state: CordonState, labels: &ClusterLabels) -> Value {
    let state = match state {
        CordonState::Cordoned => "Cordoned",
        CordonState::Draining => "Draining",
        CordonState::Schedulable => "Schedulable",
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": labels.node},
        "spec": {"cluster": labels.node, "state": state},
        "status": {"set": labels.set, "remove": labels.remove},
    })
}

/// A cluster's cordon state as its labels say, for `Cluster.status`:
/// `cordoned`, and `drain` (`Draining` or `Drained`) if it is drained.
pub fn status_fields(labels: &impl LabelLookup) -> (bool, Option<&'static str>) {
    let drain = match labels.label(DRAINING_LABEL) {
        Some("true") => Some("Draining"),
        Some(_) => Some("Drained"),
        None => None,
    };
    (labels.has_label(CORDONED_LABEL) || drain.is_some(), drain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_the_field_at_fault() {
        let request = |spec: Value| {
            let body = json!({"apiVersion": API_VERSION, "kind": KIND, "spec": spec});
            parse_request(body.to_string().as_bytes())
        };
        assert!(matches!(
            request(json!({"cluster": "edge-1", "state": "Draining"})),
            Ok((cluster, CordonState::Draining)) if cluster == "edge-1"
        ));
        for (spec, field) in [
            (json!({"state": "Cordoned"}), "spec.cluster"),
            (json!({"cluster": "edge-1"}), "spec.state"),
            (
                json!({"cluster": "edge-1", "state": "Evicted"}),
                "spec.state",
            ),
        ] {
            let error = request(spec).expect_err("refused").to_string();
            assert!(error.contains(field), "{error}");
        }
    }

    #[test]
    fn the_state_is_two_labels() {
        let draining = CordonState::Draining.change("edge-1");
        assert_eq!(draining.set.len(), 2);
        let (cordoned, drain) = status_fields(&draining.set);
        assert!(cordoned);
        assert_eq!(drain, Some("Draining"));
        let back = CordonState::Schedulable.change("edge-1");
        assert!(back.set.is_empty());
        assert_eq!(back.remove.len(), 2);
        assert_eq!(status_fields(&BTreeMap::new()), (false, None));
    }
}
