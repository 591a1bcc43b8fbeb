//! The built-in kinds the root serves: every GA kind of the Kubernetes
//! version it reports (1.33), taken from `k8s-openapi`'s types, so that the
//! group, version, kind, plural, scope and schema of each come from the
//! generated definitions rather than from a table kept by hand.
//!
//! The list names the types; everything else about a kind is read off the
//! type through `k8s_openapi::Resource` and `schemars::JsonSchema`. What
//! upstream keeps outside the types (kubectl's short names) is written next
//! to each entry, as kube-apiserver's registry strategies hold it.
//!
//! Left out, on purpose (docs/api.md says why): alpha and beta versions
//! (off by default in kube-apiserver 1.33), `autoscaling/v1`
//! HorizontalPodAutoscalers (the same objects as `autoscaling/v2`, which
//! would need version conversion), and the kinds that are not stored objects:
//! the access and token reviews (answered, not stored; the two kubectl uses
//! have their own handlers), `Binding`, `ComponentStatus`, and the
//! subresource kinds `Scale`, `Eviction` and `TokenRequest`.

use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration, apps::v1 as apps, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
    discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
    networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// One built-in kind, as its `k8s-openapi` type describes it.
#[derive(Clone, Copy)]
pub(super) struct BuiltinKind {
    /// The API group; empty for the core group.
    pub(super) group: &'static str,
    /// The version, as `v1`.
    pub(super) version: &'static str,
    /// The kind.
    pub(super) kind: &'static str,
    /// The plural resource name.
    pub(super) plural: &'static str,
    /// Namespaced or cluster-scoped.
    pub(super) namespaced: bool,
    /// kubectl's abbreviations, as upstream defines them.
    pub(super) short_names: &'static [&'static str],
    /// Adds the kind's schema (and those it refers to) to a generator and
    /// returns the reference to it.
    pub(super) schema: fn(&mut SchemaGenerator) -> Schema,
    /// The schema's name, as `io.k8s.api.apps.v1.Deployment`.
    pub(super) schema_name: fn() -> std::borrow::Cow<'static, str>,
}

impl std::fmt::Debug for BuiltinKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinKind")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Whether a `k8s-openapi` scope is namespaced. Subresource kinds have no
/// impl, so they cannot be listed by mistake.
trait Scope {
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The entry of the type `T`.
const fn kind<T>(short_names: &'static [&'static str]) -> BuiltinKind
where
    T: k8s_openapi::Resource + JsonSchema,
    T::Scope: Scope,
{
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        short_names,
        schema: subschema::<T>,
        schema_name: T::schema_name,
    }
}

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// Every built-in kind served, core group first, then by group.
pub(super) static BUILTIN_KINDS: &[BuiltinKind] = &[
    kind::<core::ConfigMap>(&["cm"]),
    kind::<core::Endpoints>(&["ep"]),
    kind::<core::Event>(&["ev"]),
    kind::<core::LimitRange>(&["limits"]),
    kind::<core::Namespace>(&["ns"]),
    kind::<core::Node>(&["no"]),
    kind::<core::PersistentVolumeClaim>(&["pvc"]),
    kind::<core::PersistentVolume>(&["pv"]),
    kind::<core::Pod>(&["po"]),
    kind::<core::PodTemplate>(&[]),
    kind::<core::ReplicationController>(&["rc"]),
    kind::<core::ResourceQuota>(&["quota"]),
    kind::<core::Secret>(&[]),
    kind::<core::ServiceAccount>(&["sa"]),
    kind::<core::Service>(&["svc"]),
    kind::<admissionregistration::MutatingWebhookConfiguration>(&[]),
    kind::<admissionregistration::ValidatingAdmissionPolicy>(&[]),
    kind::<admissionregistration::ValidatingAdmissionPolicyBinding>(&[]),
    kind::<admissionregistration::ValidatingWebhookConfiguration>(&[]),
    kind::<apiextensions::CustomResourceDefinition>(&["crd", "crds"]),
    kind::<apiregistration::APIService>(&[]),
    kind::<apps::ControllerRevision>(&[]),
    kind::<apps::DaemonSet>(&["ds"]),
    kind::<apps::Deployment>(&["deploy"]),
    kind::<apps::ReplicaSet>(&["rs"]),
    kind::<apps::StatefulSet>(&["sts"]),
    kind::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(&["hpa"]),
    kind::<batch::CronJob>(&["cj"]),
    kind::<batch::Job>(&[]),
    kind::<certificates::CertificateSigningRequest>(&["csr"]),
    kind::<coordination::Lease>(&[]),
    kind::<discovery::EndpointSlice>(&[]),
    kind::<events::Event>(&["ev"]),
    kind::<flowcontrol::FlowSchema>(&[]),
    kind::<flowcontrol::PriorityLevelConfiguration>(&[]),
    kind::<networking::IngressClass>(&[]),
    kind::<networking::Ingress>(&["ing"]),
    kind::<networking::IPAddress>(&["ip"]),
    kind::<networking::NetworkPolicy>(&["netpol"]),
    kind::<networking::ServiceCIDR>(&[]),
    kind::<node::RuntimeClass>(&[]),
    kind::<policy::PodDisruptionBudget>(&["pdb"]),
    kind::<rbac::ClusterRoleBinding>(&[]),
    kind::<rbac::ClusterRole>(&[]),
    kind::<rbac::RoleBinding>(&[]),
    kind::<rbac::Role>(&[]),
    kind::<scheduling::PriorityClass>(&["pc"]),
    kind::<storage::CSIDriver>(&[]),
    kind::<storage::CSINode>(&[]),
    kind::<storage::CSIStorageCapacity>(&[]),
    kind::<storage::StorageClass>(&["sc"]),
    kind::<storage::VolumeAttachment>(&[]),
];

/// The entry of `kind` in `group/version`, if built in.
pub(super) fn find(group: &str, version: &str, kind: &str) -> Option<&'static BuiltinKind> {
    BUILTIN_KINDS
        .iter()
        .find(|entry| entry.group == group && entry.version == version && entry.kind == kind)
}

impl BuiltinKind {
    /// Whether the kind has a `status` (and so a `status` subresource), as
    /// its type says.
    pub(super) fn has_status(&self) -> bool {
        let mut generator = SchemaGenerator::default();
        (self.schema)(&mut generator);
        generator
            .definitions()
            .get(&*(self.schema_name)())
            .and_then(|schema| schema.get("properties"))
            .and_then(|properties| properties.get("status"))
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn each_kind_once_and_read_off_its_type() {
        let mut seen = HashSet::new();
        for entry in BUILTIN_KINDS {
            assert!(
                seen.insert((entry.group, entry.plural)),
                "{} listed twice",
                entry.kind
            );
            assert!(!entry.version.contains("alpha") && !entry.version.contains("beta"));
        }
        let deployment = find("apps", "v1", "Deployment").expect("listed");
        assert_eq!(deployment.plural, "deployments");
        assert!(deployment.namespaced);
        assert_eq!((deployment.schema_name)(), "io.k8s.api.apps.v1.Deployment");
        assert!(deployment.has_status());
        let class = find("storage.k8s.io", "v1", "StorageClass").expect("listed");
        assert!(!class.namespaced);
        assert!(!class.has_status());
        assert!(!find("", "v1", "ConfigMap").expect("listed").has_status());
        assert!(find("", "v1", "Binding").is_none());
    }
}
