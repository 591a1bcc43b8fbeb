//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, and the
//! `APIResourceList` of each group-version, in the legacy (unaggregated)
//! format.
//!
//! kubectl 1.32 asks for the aggregated `apidiscovery.k8s.io/v2` format first
//! but lists `application/json` as an alternative; answering with the legacy
//! documents and a plain `application/json` content type makes it fall back
//! to per-group-version requests, as it does against older servers.

use serde_json::{json, Value};

use super::resources::{api_version, Registry};
use super::scale;

/// `/api`: the core group's versions.
pub(super) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    })
}

/// `/apis`: every named group.
pub(super) fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(group, versions)| group_document(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is served.
pub(super) fn group(registry: &Registry, name: &str) -> Option<Value> {
    registry
        .groups()
        .iter()
        .find(|(group, _)| group == name)
        .map(|(group, versions)| {
            let mut document = group_document(group, versions);
            document["kind"] = json!("APIGroup");
            document["apiVersion"] = json!("v1");
            document
        })
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub(super) fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = registry.of(group, version);
    if resources.is_empty() {
        return None;
    }
    let entries: Vec<Value> = resources
        .iter()
        .flat_map(|resource| {
            let mut entries = vec![resource.discovery()];
            if resource.is_writable() && resource.status {
                // The status subresource, which kubectl and controllers use.
                entries.push(json!({
                    "name": format!("{}/status", resource.plural),
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if scale::is_scalable(resource) {
                // kubectl scale finds the Scale kind's group and version here.
                entries.push(json!({
                    "name": format!("{}/scale", resource.plural),
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "group": scale::SCALE_GROUP,
                    "version": scale::SCALE_VERSION,
                    "kind": scale::SCALE_KIND,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            entries
        })
        .collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version(group, version),
        "resources": entries,
    }))
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| json!({"groupVersion": api_version(group, version), "version": version}))
        .collect();
    json!({
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ObjectStore;

    fn registry() -> (tempfile::TempDir, Registry) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let registry = Registry::load(&store).expect("loads");
        (dir, registry)
    }

    #[test]
    fn group_list_has_kubernetes_shape() {
        let (_dir, registry) = registry();
        let list = groups(&registry);
        assert_eq!(list["kind"], "APIGroupList");
        let apps = list["groups"]
            .as_array()
            .and_then(|groups| groups.iter().find(|g| g["name"] == "apps"))
            .expect("apps is served");
        assert_eq!(
            apps["preferredVersion"],
            json!({"groupVersion": "apps/v1", "version": "v1"})
        );
        assert_eq!(
            group(&registry, "relaymesh.dev").expect("served")["kind"],
            "APIGroup"
        );
        assert!(group(&registry, "nope").is_none());
    }

    #[test]
    fn resource_lists_name_scope_and_verbs() {
        let (_dir, registry) = registry();
        let core = resources(&registry, "", "v1").expect("core is served");
        assert_eq!(core["groupVersion"], "v1");
        let entries = core["resources"].as_array().expect("a list");
        let namespaces = entries
            .iter()
            .find(|entry| entry["name"] == "namespaces")
            .expect("namespaces");
        assert_eq!(namespaces["namespaced"], false);
        assert_eq!(namespaces["shortNames"], json!(["ns"]));
        assert!(entries.iter().any(|entry| entry["name"] == "pods/status"));
        assert!(!entries
            .iter()
            .any(|entry| entry["name"] == "configmaps/status"));
        let own = resources(&registry, "relaymesh.dev", "v1alpha1").expect("served");
        let clusters = own["resources"]
            .as_array()
            .and_then(|entries| entries.iter().find(|entry| entry["name"] == "clusters"))
            .expect("clusters");
        assert_eq!(clusters["verbs"], json!(["get", "list", "watch"]));
        assert!(resources(&registry, "apps", "v2").is_none());
    }
}
