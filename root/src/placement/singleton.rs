//! Singleton status: while a placement has exactly one destination, the
//! root's own copy of each of its objects shows that cluster's `.status`
//! (KubeStellar's `wantSingletonReportedState`, here without asking), so
//! `kubectl get deploy -o yaml` and `kubectl rollout status` at the root
//! follow the real rollout.
//!
//! The edge cluster counts generations of its own, so its
//! `observedGeneration` means nothing at the root. The root writes its own
//! object's generation there when the cluster's controllers have seen the
//! spec the agent applied *and* the agent applied the bundle the root holds
//! now; otherwise one less, which tells kubectl the new spec is not
//! observed yet.
//!
//! Pure: the placement writer hands in the root's object and what the tree
//! reported, and stores what comes out if it differs.

use relaymesh_protocol::{BundleId, ObjectStatus};
use serde_json::Value;

/// The reported status among `reported` that belongs to `object` (same
/// group, kind, namespace and name), if any.
pub fn reported_for<'a>(object: &Value, reported: &'a [ObjectStatus]) -> Option<&'a ObjectStatus> {
    let api_version = object.get("apiVersion").and_then(Value::as_str)?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = object.get("kind").and_then(Value::as_str)?;
    let metadata = object.get("metadata")?;
    let name = metadata.get("name").and_then(Value::as_str)?;
    let namespace = metadata.get("namespace").and_then(Value::as_str);
    reported.iter().find(|status| {
        status.group == group
            && status.kind == kind
            && status.name == name
            && status.namespace.as_deref() == namespace
    })
}

/// The status to write onto the root's `object` from `reported`, the status
/// of the one cluster that holds it, when the root's placement carries
/// `bundles` now. `None` if the reported status is not a JSON object.
pub fn copied_status(
    object: &Value,
    reported: &ObjectStatus,
    bundles: &[BundleId],
) -> Option<Value> {
    let mut status: Value = serde_json::from_slice(&reported.status).ok()?;
    let fields = status.as_object_mut()?;
    if let Some(generation) = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
    {
        let current = reported.observed && bundles.contains(&reported.bundle);
        let observed = if current {
            generation
        } else {
            generation.saturating_sub(1)
        };
        fields.insert("observedGeneration".into(), Value::from(observed));
    } else {
        fields.remove("observedGeneration");
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reported(observed: bool, bundle: BundleId) -> ObjectStatus {
        ObjectStatus {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
            bundle,
            observed,
            status: serde_json::to_vec(&json!({"observedGeneration": 7, "readyReplicas": 2}))
                .expect("JSON"),
        }
    }

    fn web(generation: i64) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "generation": generation},
            "spec": {"replicas": 2},
        })
    }

    #[test]
    fn the_root_generation_is_observed_only_for_its_own_bundle() {
        let now = BundleId::of(b"now");
        let before = BundleId::of(b"before");
        let status = copied_status(&web(3), &reported(true, now), &[now]).expect("object");
        assert_eq!(status, json!({"observedGeneration": 3, "readyReplicas": 2}));
        let stale = copied_status(&web(3), &reported(true, before), &[now]).expect("object");
        assert_eq!(stale["observedGeneration"], 2);
        let unseen = copied_status(&web(3), &reported(false, now), &[now]).expect("object");
        assert_eq!(unseen["observedGeneration"], 2);
    }

    #[test]
    fn only_the_same_object_matches() {
        let now = BundleId::of(b"now");
        let list = [reported(true, now)];
        assert!(reported_for(&web(1), &list).is_some());
        let mut other = web(1);
        other["metadata"]["namespace"] = json!("elsewhere");
        assert!(reported_for(&other, &list).is_none());
        let mut service = web(1);
        service["apiVersion"] = json!("v1");
        service["kind"] = json!("Service");
        assert!(reported_for(&service, &list).is_none());
        let mut broken = reported(true, now);
        broken.status = b"[1]".to_vec();
        assert!(copied_status(&web(1), &broken, &[now]).is_none());
    }
}
