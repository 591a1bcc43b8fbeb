//! The categories of the apply policy: which objects reach beyond a
//! workload's own namespace into how the whole cluster behaves, and so are
//! the cluster owner's to allow.
//!
//! [`Category::of`] sorts one object, judged by its kind and, for the kinds
//! where only some objects matter (a PriorityClass that is the default, a
//! Namespace that sets Pod Security), by its body as the agent would apply
//! it. It is pure: an object in, categories out.

use std::fmt;

use serde_json::Value;

use crate::manifest::ObjectRef;

/// The namespaces the `kube-system` category covers: those Kubernetes
/// itself creates and runs the cluster from.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The label prefix of Pod Security admission's namespace labels
/// (`enforce`, `audit`, `warn` and their `-version`s).
pub const POD_SECURITY_LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// The annotations that make a class the cluster's default, by group and
/// kind; Kubernetes treats the value `"true"` as set.
const DEFAULT_CLASS_ANNOTATIONS: [(&str, &str, &str); 4] = [
    (
        "storage.k8s.io",
        "StorageClass",
        "storageclass.kubernetes.io/is-default-class",
    ),
    (
        "storage.k8s.io",
        "StorageClass",
        "storageclass.beta.kubernetes.io/is-default-class",
    ),
    (
        "networking.k8s.io",
        "IngressClass",
        "ingressclass.kubernetes.io/is-default-class",
    ),
    (
        "snapshot.storage.k8s.io",
        "VolumeSnapshotClass",
        "snapshot.storage.kubernetes.io/is-default-class",
    ),
];

/// A category of objects the policy allows or refuses as a whole.
///
/// The doc comment of each variant is what `edge-agent run --help` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Category {
    /// ClusterRoles and ClusterRoleBindings (rbac.authorization.k8s.io):
    /// permissions across the whole cluster. Refused unless allowed.
    /// Namespaced Roles and RoleBindings are always allowed.
    ClusterRbac,
    /// Everything in admissionregistration.k8s.io: mutating and validating
    /// webhook configurations and admission policies with their bindings,
    /// which see or change every request to the cluster. Refused unless
    /// allowed. Also accepted as `webhooks`.
    #[value(alias = "webhooks")]
    Admission,
    /// APIServices (apiregistration.k8s.io), which route a whole API group
    /// to a service of their choosing. Refused unless allowed.
    AggregatedApis,
    /// The API server's own configuration: API Priority and Fairness
    /// (FlowSchemas and PriorityLevelConfigurations,
    /// flowcontrol.apiserver.k8s.io), which decides whose requests wait or
    /// are rejected, and its storage records (internal.apiserver.k8s.io,
    /// storagemigration.k8s.io). Refused unless allowed. Also accepted as
    /// `flow-control`.
    #[value(alias = "flow-control")]
    ApiServer,
    /// Defaults that apply to everyone's objects: a PriorityClass with
    /// `globalDefault: true`, and a StorageClass, IngressClass or
    /// VolumeSnapshotClass annotated as the default (`…/is-default-class:
    /// "true"`). Refused unless allowed. Other classes apply only where
    /// they are named and are always allowed.
    ClusterDefaults,
    /// Namespaces that carry a `pod-security.kubernetes.io/` label, which
    /// sets what Pod Security admits there. Refused unless allowed.
    /// Namespaces without one are always allowed.
    PodSecurity,
    /// RuntimeClasses (node.k8s.io): which container runtime handler, with
    /// what overhead and tolerations, runs the pods that name them.
    /// Refused unless allowed.
    RuntimeClasses,
    /// What the nodes, kubelets and drivers act on: Nodes; CSIDrivers,
    /// CSINodes, VolumeAttachments and CSIStorageCapacities
    /// (storage.k8s.io); ResourceSlices and DeviceTaintRules
    /// (resource.k8s.io). Refused unless allowed.
    Nodes,
    /// PersistentVolumes: storage any namespace's claim can bind (a claimRef
    /// binds one), and a hostPath or local volume reaches a node's files
    /// whatever Pod Security says. Refused unless allowed.
    /// PersistentVolumeClaims are always allowed.
    PersistentVolumes,
    /// Everything in certificates.k8s.io: CertificateSigningRequests (a
    /// signer may issue them without a person approving) and
    /// ClusterTrustBundles (trust anchors every pod can mount). Refused
    /// unless allowed.
    Certificates,
    /// ServiceCIDRs and IPAddresses (networking.k8s.io): the ranges and
    /// addresses of every Service in the cluster. Refused unless allowed.
    ClusterNetworking,
    /// Any object in the kube-system, kube-public or kube-node-lease
    /// namespaces, those Namespaces themselves, and the `kubernetes`
    /// Service of `default` with its Endpoints and EndpointSlices (where
    /// every pod reaches the API server). Refused unless allowed.
    KubeSystem,
    /// CustomResourceDefinitions (apiextensions.k8s.io). Allowed unless
    /// `--deny crds`.
    Crds,
}

impl Category {
    /// Every category, in the order `--help` lists them.
    pub const ALL: [Self; 13] = [
        Self::ClusterRbac,
        Self::Admission,
        Self::AggregatedApis,
        Self::ApiServer,
        Self::ClusterDefaults,
        Self::PodSecurity,
        Self::RuntimeClasses,
        Self::Nodes,
        Self::PersistentVolumes,
        Self::Certificates,
        Self::ClusterNetworking,
        Self::KubeSystem,
        Self::Crds,
    ];

    /// The categories a policy allows when the command line says nothing.
    pub const ALLOWED_BY_DEFAULT: [Self; 1] = [Self::Crds];

    /// The name `--allow` and `--deny` take.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClusterRbac => "cluster-rbac",
            Self::Admission => "admission",
            Self::AggregatedApis => "aggregated-apis",
            Self::ApiServer => "api-server",
            Self::ClusterDefaults => "cluster-defaults",
            Self::PodSecurity => "pod-security",
            Self::RuntimeClasses => "runtime-classes",
            Self::Nodes => "nodes",
            Self::PersistentVolumes => "persistent-volumes",
            Self::Certificates => "certificates",
            Self::ClusterNetworking => "cluster-networking",
            Self::KubeSystem => "kube-system",
            Self::Crds => "crds",
        }
    }

    /// What the category holds, for refusal messages.
    pub fn description(self) -> &'static str {
        match self {
            Self::ClusterRbac => "cluster-scoped RBAC",
            Self::Admission => "admission control (webhooks and admission policies)",
            Self::AggregatedApis => "aggregated API registration",
            Self::ApiServer => {
                "the API server's own configuration (API Priority and Fairness, storage versions)"
            }
            Self::ClusterDefaults => {
                "a cluster-wide default (a globalDefault PriorityClass, a default StorageClass, IngressClass or VolumeSnapshotClass)"
            }
            Self::PodSecurity => "setting a namespace's Pod Security labels",
            Self::RuntimeClasses => "RuntimeClasses",
            Self::Nodes => "node, kubelet and driver objects",
            Self::PersistentVolumes => "PersistentVolumes",
            Self::Certificates => "certificate signing requests and trust bundles",
            Self::ClusterNetworking => "the cluster's Service address ranges",
            Self::KubeSystem => {
                "writing in the kube-system, kube-public and kube-node-lease namespaces or to the API server's Service"
            }
            Self::Crds => "CustomResourceDefinitions",
        }
    }

    /// What the cluster's operator would change to allow the category.
    pub fn remedy(self) -> String {
        if Self::ALLOWED_BY_DEFAULT.contains(&self) {
            format!("the agent runs with --deny {self}")
        } else {
            format!("edge-agent run --allow {self}")
        }
    }

    /// The categories an object falls into: `reference` with `body` (as the
    /// agent would apply it), landing in `namespace` (`None` for a
    /// cluster-scoped object). Most objects fall into none; an object must
    /// be allowed in every category it falls into.
    pub fn of(reference: &ObjectRef, body: &Value, namespace: Option<&str>) -> Vec<Self> {
        let mut categories = Vec::new();
        if let Some(category) = Self::of_kind(reference, body) {
            categories.push(category);
        }
        let system_namespace = reference.group.is_empty()
            && reference.kind == "Namespace"
            && SYSTEM_NAMESPACES.contains(&reference.name.as_str());
        if system_namespace
            || namespace.is_some_and(|name| SYSTEM_NAMESPACES.contains(&name))
            || (namespace == Some("default") && is_api_server_service(reference, body))
        {
            categories.push(Self::KubeSystem);
        }
        categories
    }

    /// The category of the object's kind (and, for some kinds, body),
    /// wherever it lands.
    fn of_kind(reference: &ObjectRef, body: &Value) -> Option<Self> {
        let category = match (reference.group.as_str(), reference.kind.as_str()) {
            ("rbac.authorization.k8s.io", "ClusterRole" | "ClusterRoleBinding") => {
                Self::ClusterRbac
            }
            ("admissionregistration.k8s.io", _) => Self::Admission,
            ("apiregistration.k8s.io", _) => Self::AggregatedApis,
            (
                "flowcontrol.apiserver.k8s.io"
                | "internal.apiserver.k8s.io"
                | "storagemigration.k8s.io",
                _,
            ) => Self::ApiServer,
            ("scheduling.k8s.io", "PriorityClass")
                if body.get("globalDefault").and_then(Value::as_bool) == Some(true) =>
            {
                Self::ClusterDefaults
            }
            (group, kind) if marked_default(group, kind, body) => Self::ClusterDefaults,
            ("", "Namespace") if sets_pod_security(body) => Self::PodSecurity,
            ("node.k8s.io", "RuntimeClass") => Self::RuntimeClasses,
            ("", "Node")
            | (
                "storage.k8s.io",
                "CSIDriver" | "CSINode" | "VolumeAttachment" | "CSIStorageCapacity",
            )
            | ("resource.k8s.io", "ResourceSlice" | "DeviceTaintRule") => Self::Nodes,
            ("", "PersistentVolume") => Self::PersistentVolumes,
            ("certificates.k8s.io", _) => Self::Certificates,
            ("networking.k8s.io", "ServiceCIDR" | "IPAddress") => Self::ClusterNetworking,
            ("apiextensions.k8s.io", "CustomResourceDefinition") => Self::Crds,
            _ => return None,
        };
        Some(category)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a class of `group`/`kind` is annotated as the cluster's default.
fn marked_default(group: &str, kind: &str, body: &Value) -> bool {
    DEFAULT_CLASS_ANNOTATIONS
        .iter()
        .filter(|(class_group, class_kind, _)| *class_group == group && *class_kind == kind)
        .any(|(_, _, annotation)| {
            body.pointer("/metadata/annotations")
                .and_then(|annotations| annotations.get(annotation))
                .and_then(Value::as_str)
                .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
        })
}

/// Whether a Namespace's body carries any Pod Security label, whatever its
/// value (even a stricter one: what a namespace admits is the cluster
/// owner's to decide).
fn sets_pod_security(body: &Value) -> bool {
    body.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|labels| {
            labels
                .keys()
                .any(|key| key.starts_with(POD_SECURITY_LABEL_PREFIX))
        })
}

/// Whether the object, landing in `default`, is the `kubernetes` Service,
/// its Endpoints, or an EndpointSlice of it: where every pod reaches the
/// API server.
fn is_api_server_service(reference: &ObjectRef, body: &Value) -> bool {
    match (reference.group.as_str(), reference.kind.as_str()) {
        ("", "Service" | "Endpoints") => reference.name == "kubernetes",
        ("discovery.k8s.io", "EndpointSlice") => {
            body.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some("kubernetes")
        }
        _ => false,
    }
}
