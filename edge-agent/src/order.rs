//! The order objects are applied in: what an object needs must exist before
//! it. CustomResourceDefinitions first (their kinds must be served before any
//! custom resource of them), then Namespaces, then other cluster-scoped
//! objects, then namespaced configuration that workloads read (service
//! accounts, config maps, secrets, RBAC, ...), then workloads and everything
//! else. Pure: no IO, so it is unit-tested here.

use crate::manifest::Manifest;

/// The stages of one apply pass, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// CustomResourceDefinitions; the pass waits until they are Established.
    Definitions,
    /// Namespaces.
    Namespaces,
    /// Other cluster-scoped objects (ClusterRoles, StorageClasses, ...).
    ClusterScoped,
    /// Namespaced objects other objects refer to.
    Configuration,
    /// Workloads, services and everything else.
    Workloads,
}

/// Namespaced kinds that other objects refer to, applied before workloads.
const CONFIGURATION_KINDS: &[(&str, &str)] = &[
    ("", "ServiceAccount"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("", "PersistentVolumeClaim"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
];

/// The stage of an object of `group`/`kind`; `namespaced` as discovery (or,
/// for a kind not served yet, the object's own `metadata.namespace`) says.
pub fn stage(group: &str, kind: &str, namespaced: bool) -> Stage {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Stage::Definitions,
        ("", "Namespace") => Stage::Namespaces,
        _ if !namespaced => Stage::ClusterScoped,
        _ if CONFIGURATION_KINDS.contains(&(group, kind)) => Stage::Configuration,
        _ => Stage::Workloads,
    }
}

/// The stage of a manifest, judged by whether it names a namespace.
pub fn stage_of(manifest: &Manifest) -> Stage {
    let reference = &manifest.reference;
    stage(
        &reference.group,
        &reference.kind,
        reference.namespace.is_some(),
    )
}

/// Sorts manifests into apply order (stable within a stage, so the bundle's
/// canonical order decides ties).
pub fn sort(manifests: &mut [Manifest]) {
    manifests.sort_by_key(stage_of);
}

/// The reverse: the order in which objects are deleted when pruned
/// (workloads before what they use, definitions last).
pub fn prune_rank(group: &str, kind: &str, namespaced: bool) -> std::cmp::Reverse<Stage> {
    std::cmp::Reverse(stage(group, kind, namespaced))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::manifest::parse_bundle;

    #[test]
    fn stages() {
        assert_eq!(
            stage("apiextensions.k8s.io", "CustomResourceDefinition", false),
            Stage::Definitions
        );
        assert_eq!(stage("", "Namespace", false), Stage::Namespaces);
        assert_eq!(
            stage("rbac.authorization.k8s.io", "ClusterRole", false),
            Stage::ClusterScoped
        );
        assert_eq!(stage("", "ConfigMap", true), Stage::Configuration);
        assert_eq!(
            stage("rbac.authorization.k8s.io", "RoleBinding", true),
            Stage::Configuration
        );
        assert_eq!(stage("apps", "Deployment", true), Stage::Workloads);
        assert_eq!(stage("example.com", "Widget", true), Stage::Workloads);
        assert_eq!(stage("example.com", "Gadget", false), Stage::ClusterScoped);
    }

    #[test]
    fn sorts_dependencies_first() {
        let bundle = json!([
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}},
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "shop"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": "shop"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "widgets.example.com"}},
        ]);
        let mut manifests =
            parse_bundle(&serde_json::to_vec(&bundle).unwrap_or_default(), "s").unwrap_or_default();
        sort(&mut manifests);
        let kinds: Vec<&str> = manifests
            .iter()
            .map(|manifest| manifest.reference.kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "Namespace",
                "ClusterRole",
                "ConfigMap",
                "Deployment",
                "Widget"
            ]
        );
        assert!(prune_rank("apps", "Deployment", true) < prune_rank("", "Namespace", false));
    }
}
