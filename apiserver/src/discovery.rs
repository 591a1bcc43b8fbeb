//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, and the
//! `APIResourceList` of each group-version, in the legacy format; and `/api`
//! and `/apis` in the aggregated `apidiscovery.k8s.io/v2` format, which
//! kubectl 1.30+ asks for first: one request then tells it every resource of
//! every group, where the legacy format needs one request per group-version.

use serde_json::{json, Value};

use super::resources::{api_version, Registry, Resource};
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

/// The media type of aggregated discovery, as the reply's `Content-Type`.
pub(super) const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header prefers aggregated discovery (v2) to the
/// legacy documents: the first media range the server can answer decides,
/// as kube-apiserver's negotiation does (v2beta1 is not served).
pub(super) fn wants_aggregated(accept: &str) -> bool {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let parameters: Vec<(&str, &str)> = parts
            .filter_map(|parameter| parameter.split_once('='))
            .filter(|(name, _)| *name != "q")
            .collect();
        let json = matches!(media, "application/json" | "application/*" | "*/*");
        if !json {
            continue;
        }
        if parameters.is_empty() {
            return false;
        }
        let has = |name: &str, value: &str| parameters.contains(&(name, value));
        if has("g", "apidiscovery.k8s.io") && has("v", "v2") && has("as", "APIGroupDiscoveryList") {
            return true;
        }
    }
    false
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList`.
pub(super) fn aggregated(registry: &Registry, core: bool) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        registry.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    let resources: Vec<Value> = registry
                        .of(group, version)
                        .iter()
                        .map(|resource| aggregated_resource(resource))
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// One resource of aggregated discovery, with its subresources.
fn aggregated_resource(resource: &Resource) -> Value {
    let kind = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let mut subresources = Vec::new();
    if resource.is_writable() && resource.status {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if scale::is_scalable(resource) {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": scale::SCALE_GROUP, "version": scale::SCALE_VERSION, "kind": scale::SCALE_KIND},
            "verbs": ["get", "patch", "update"],
        }));
    }
    let mut entry = json!({
        "resource": resource.plural,
        "responseKind": kind,
        "scope": if resource.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": resource.singular,
        "verbs": resource.verbs(),
    });
    if !resource.short_names.is_empty() {
        entry["shortNames"] = json!(resource.short_names);
    }
    let categories = resource.categories();
    if !categories.is_empty() {
        entry["categories"] = json!(categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
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
        let registry =
            Registry::load(&store, &crate::resources::example_extension()).expect("loads");
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

    #[test]
    fn aggregated_discovery_is_negotiated_and_complete() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(wants_aggregated(kubectl));
        assert!(!wants_aggregated("application/json"));
        assert!(!wants_aggregated("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"));
        assert!(!wants_aggregated("*/*"));
        assert!(!wants_aggregated(""));

        let registry = Registry::without_definitions(&crate::resources::example_extension());
        let core = aggregated(&registry, true);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        let v1 = &core["items"][0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        let pods = v1["resources"]
            .as_array()
            .and_then(|all| all.iter().find(|entry| entry["resource"] == "pods"))
            .expect("pods");
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["subresources"][0]["subresource"], "status");
        let groups = aggregated(&registry, false);
        let apps = groups["items"]
            .as_array()
            .and_then(|all| all.iter().find(|item| item["metadata"]["name"] == "apps"))
            .expect("apps");
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .and_then(|all| all.iter().find(|entry| entry["resource"] == "deployments"))
            .expect("deployments");
        let scale = deployments["subresources"]
            .as_array()
            .and_then(|all| all.iter().find(|entry| entry["subresource"] == "scale"))
            .expect("scale");
        assert_eq!(scale["responseKind"]["kind"], "Scale");
        assert_eq!(deployments["categories"], json!(["all"]));
    }
}
