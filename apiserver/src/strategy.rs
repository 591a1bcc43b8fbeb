//! The few fields kube-apiserver's registry strategies set on every write
//! that clients rely on: a Secret's `type` (`Opaque` when empty, which
//! `--field-selector type=Opaque` finds) and a new Pod's `status.phase`
//! (`Pending`, which `kubectl describe` and `--field-selector status.phase`
//! read). The rest of per-kind defaulting is the edge clusters' API servers'
//! (docs/api.md, "Built-in kinds"). No IO.

use serde_json::{json, Value};

use super::resources::Resource;

/// Sets what the strategy of `resource` sets on `object` before it is
/// stored; `creating` for a create.
pub(super) fn prepare(resource: &Resource, object: &mut Value, creating: bool) {
    if !resource.builtin || !resource.group.is_empty() {
        return;
    }
    match resource.plural.as_str() {
        "secrets" => {
            let empty = object
                .get("type")
                .is_none_or(|kind| kind.as_str().is_some_and(str::is_empty) || kind.is_null());
            if empty {
                object["type"] = json!("Opaque");
            }
        }
        "pods" if creating => {
            let phase = object.pointer("/status/phase").and_then(Value::as_str);
            if phase.is_none_or(str::is_empty) {
                if !object.get("status").is_some_and(Value::is_object) {
                    object["status"] = json!({});
                }
                object["status"]["phase"] = json!("Pending");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn secrets_are_opaque_and_new_pods_pending() {
        let registry = Registry::without_definitions(&crate::resources::example_extension());
        let secrets = registry.find("", "v1", "secrets").expect("served");
        let mut secret = json!({"metadata": {"name": "s"}, "type": ""});
        prepare(secrets, &mut secret, true);
        assert_eq!(secret["type"], "Opaque");
        let mut typed = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls"});
        prepare(secrets, &mut typed, false);
        assert_eq!(typed["type"], "kubernetes.io/tls");
        let pods = registry.find("", "v1", "pods").expect("served");
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {}});
        prepare(pods, &mut pod, true);
        assert_eq!(pod["status"]["phase"], "Pending");
        let mut running = json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}});
        prepare(pods, &mut running, true);
        assert_eq!(running["status"]["phase"], "Running");
    }
}
