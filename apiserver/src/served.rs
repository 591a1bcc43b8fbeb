//! The served kinds and their discovery documents, for a server that serves
//! Kubernetes' kinds without this crate's router and store: the testbed's
//! hollow clusters, thousands in one process, which build the built-in
//! documents once and share them.
//!
//! Everything here is made by the same code as the API's own discovery, so
//! a hollow cluster and a simulated one advertise the same kinds, scopes and
//! verbs, and report the same version. Only the legacy documents are offered (`/api`, `/apis`,
//! `/apis/{group}` and each group-version's `APIResourceList`): kube-rs'
//! `Discovery::run` and `pinned_kind` ask for those.

use serde_json::Value;

use super::discovery;
use super::resources::{self, Registry, Resource};

/// Every built-in kind of the Kubernetes version the API reports, core
/// group first.
pub fn builtin_resources() -> Vec<Resource> {
    Registry::without_definitions(&[]).all().to_vec()
}

/// The kinds a CustomResourceDefinition serves: one per served version;
/// nothing for a definition without group, plural or kind.
pub fn definition_resources(definition: &Value) -> Vec<Resource> {
    resources::from_definition(definition)
}

/// `/version`: the Kubernetes version the API reports (`version.Info`).
pub fn version_document() -> Value {
    super::routes::version_info()
}

/// `/api`: the core group's versions.
pub fn core_versions_document() -> Value {
    discovery::core_versions()
}

/// `/apis`: the named groups of `served`, as an `APIGroupList`.
pub fn group_list_document(served: &[Resource]) -> Value {
    discovery::groups(&Registry::from_resources(served.to_vec()))
}

/// `/apis/{group}`, if `served` has kinds in `group`.
pub fn group_document(served: &[Resource], group: &str) -> Option<Value> {
    discovery::group(&Registry::from_resources(served.to_vec()), group)
}

/// `/api/v1` or `/apis/{group}/{version}`: the `APIResourceList` of the
/// kinds of `served` in that group-version, if it has any.
pub fn resource_list_document(served: &[Resource], group: &str, version: &str) -> Option<Value> {
    discovery::resources(&Registry::from_resources(served.to_vec()), group, version)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn builtins_and_definitions_make_documents() {
        let builtins = builtin_resources();
        let deployments = builtins
            .iter()
            .find(|resource| resource.group() == "apps" && resource.plural() == "deployments")
            .expect("deployments are built in");
        assert_eq!(
            (deployments.version(), deployments.kind()),
            ("v1", "Deployment")
        );
        assert!(deployments.is_namespaced() && deployments.is_builtin());
        let apps = resource_list_document(&builtins, "apps", "v1").expect("apps/v1 is served");
        assert_eq!(apps["groupVersion"], "apps/v1");
        assert!(group_document(&builtins, "example.com").is_none());

        let definition = json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}]}});
        let widgets = definition_resources(&definition);
        assert_eq!(widgets.len(), 1);
        assert!(!widgets[0].is_namespaced() && !widgets[0].is_builtin());
        let mut all = builtins;
        all.extend(widgets);
        let groups = group_list_document(&all);
        assert!(groups["groups"]
            .as_array()
            .is_some_and(|groups| groups.iter().any(|group| group["name"] == "example.com")));
        assert_eq!(core_versions_document()["versions"], json!(["v1"]));
        assert_eq!(version_document()["major"], "1");
    }
}
