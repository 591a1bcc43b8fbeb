use clap::ValueEnum as _;
use serde_json::json;

use super::*;

fn object(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
    }
}

fn refused(policy: &Policy, reference: &ObjectRef) -> Option<Category> {
    refused_body(policy, reference, &json!({}))
}

fn refused_body(policy: &Policy, reference: &ObjectRef, body: &Value) -> Option<Category> {
    match policy.check(reference, body, reference.namespace.as_deref()) {
        Ok(()) => None,
        Err(Refusal::Category { category }) => Some(category),
        Err(other) => panic!("unexpected refusal {other:?}"),
    }
}

#[test]
fn the_default_refuses_each_closed_category() {
    let policy = Policy::default();
    let rbac = "rbac.authorization.k8s.io";
    let admission = "admissionregistration.k8s.io";
    for (reference, category) in [
        (
            object(rbac, "ClusterRole", None, "r"),
            Category::ClusterRbac,
        ),
        (
            object(rbac, "ClusterRoleBinding", None, "b"),
            Category::ClusterRbac,
        ),
        (
            object(admission, "MutatingWebhookConfiguration", None, "m"),
            Category::Admission,
        ),
        (
            object(admission, "ValidatingWebhookConfiguration", None, "v"),
            Category::Admission,
        ),
        (
            object(admission, "ValidatingAdmissionPolicy", None, "p"),
            Category::Admission,
        ),
        (
            object(admission, "ValidatingAdmissionPolicyBinding", None, "p"),
            Category::Admission,
        ),
        (
            object(admission, "MutatingAdmissionPolicy", None, "p"),
            Category::Admission,
        ),
        (
            object(admission, "MutatingAdmissionPolicyBinding", None, "p"),
            Category::Admission,
        ),
        (
            object("apiregistration.k8s.io", "APIService", None, "v1.x.io"),
            Category::AggregatedApis,
        ),
        (
            object("", "ConfigMap", Some("kube-system"), "c"),
            Category::KubeSystem,
        ),
        (
            object("apps", "DaemonSet", Some("kube-public"), "d"),
            Category::KubeSystem,
        ),
        (
            object("coordination.k8s.io", "Lease", Some("kube-node-lease"), "l"),
            Category::KubeSystem,
        ),
        (
            object(rbac, "RoleBinding", Some("kube-system"), "rb"),
            Category::KubeSystem,
        ),
        (
            object("", "Namespace", None, "kube-system"),
            Category::KubeSystem,
        ),
    ] {
        assert_eq!(refused(&policy, &reference), Some(category), "{reference}");
    }
}

#[test]
fn the_default_allows_workloads_namespaced_rbac_and_definitions() {
    let policy = Policy::default();
    for reference in [
        object("apps", "Deployment", Some("shop"), "web"),
        object("", "Namespace", None, "shop"),
        object("", "ConfigMap", Some("default"), "c"),
        object("rbac.authorization.k8s.io", "Role", Some("shop"), "r"),
        object(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            Some("shop"),
            "b",
        ),
        object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        ),
        object("example.com", "Widget", Some("shop"), "w"),
        // Named like a system namespace, but not one.
        object("", "Namespace", None, "kube-systems"),
        object("", "ConfigMap", Some("kube-prometheus"), "c"),
    ] {
        assert_eq!(refused(&policy, &reference), None, "{reference}");
    }
}

#[test]
fn allow_opens_and_deny_closes() -> anyhow::Result<()> {
    let binding = object("rbac.authorization.k8s.io", "ClusterRoleBinding", None, "b");
    let webhook = object(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        None,
        "v",
    );
    let definition = object(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        None,
        "widgets.example.com",
    );
    let open = Policy::new(&[Category::ClusterRbac], &[])?;
    assert_eq!(refused(&open, &binding), None);
    assert_eq!(refused(&open, &webhook), Some(Category::Admission));
    let closed = Policy::new(&[], &[Category::Crds])?;
    assert_eq!(refused(&closed, &definition), Some(Category::Crds));
    assert_eq!(
        Policy::new(&[Category::Crds], &[Category::Crds]),
        Err(PolicyError::Contradiction(Category::Crds))
    );
    // Denying what is closed anyway changes nothing.
    assert_eq!(
        Policy::new(&[], &[Category::KubeSystem])?,
        Policy::default()
    );
    let everything = Policy::new(&Category::ALL, &[])?;
    assert_eq!(
        everything.allowed_names(),
        "cluster-rbac,admission,aggregated-apis,api-server,cluster-defaults,pod-security,\
         runtime-classes,nodes,persistent-volumes,certificates,cluster-networking,\
         kube-system,crds"
    );
    assert_eq!(Policy::default().allowed_names(), "crds");
    Ok(())
}

#[test]
fn an_object_must_be_allowed_in_every_category_it_falls_into() -> anyhow::Result<()> {
    let webhook = object(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        Some("kube-system"),
        "v",
    );
    let policy = Policy::new(&[Category::Admission], &[])?;
    assert_eq!(refused(&policy, &webhook), Some(Category::KubeSystem));
    let policy = Policy::new(&[Category::Admission, Category::KubeSystem], &[])?;
    assert_eq!(refused(&policy, &webhook), None);
    Ok(())
}

#[test]
fn the_target_namespace_counts_not_only_the_written_one() {
    // A namespaced object without metadata.namespace lands in the client's
    // default namespace, which may be kube-system (an agent run there).
    let config = object("", "ConfigMap", None, "c");
    let policy = Policy::default();
    assert_eq!(
        policy.check(&config, &json!({}), Some("kube-system")),
        Err(Refusal::Category {
            category: Category::KubeSystem
        })
    );
    assert_eq!(policy.check(&config, &json!({}), Some("default")), Ok(()));
}

#[test]
fn categories_parse_as_the_command_line_writes_them() {
    for category in Category::ALL {
        let parsed = Category::from_str(category.name(), false);
        assert_eq!(parsed, Ok(category));
        assert_eq!(category.to_string(), category.name());
    }
    assert_eq!(
        Category::from_str("webhooks", false),
        Ok(Category::Admission)
    );
    assert_eq!(
        Category::from_str("flow-control", false),
        Ok(Category::ApiServer)
    );
    assert!(Category::from_str("everything", false).is_err());
}

#[test]
fn refusals_say_why_and_what_to_do() {
    let text = Refusal::Category {
        category: Category::ClusterRbac,
    }
    .to_string();
    assert!(text.contains("cluster-scoped RBAC"), "{text}");
    assert!(text.contains("--allow cluster-rbac"), "{text}");
    let text = Refusal::Category {
        category: Category::Crds,
    }
    .to_string();
    assert!(text.contains("the agent runs with --deny crds"), "{text}");
    assert_eq!(
        Refusal::NotManaged.to_string(),
        "exists and is not managed by relaymesh; set spec.adopt: true to take it over"
    );
}

#[test]
fn ownership_needs_one_of_our_marks() {
    let ours = BTreeSet::from(["applyset-ours-v1".to_string()]);
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    };
    assert_eq!(ownership(None, &ours), Ownership::Foreign);
    assert_eq!(
        ownership(Some(&labels(&[("app", "web")])), &ours),
        Ownership::Foreign
    );
    assert_eq!(
        ownership(Some(&labels(&[(PART_OF_LABEL, "applyset-ours-v1")])), &ours),
        Ownership::Relaymesh
    );
    // Someone else's ApplySet (kubectl's, another tool's) is not ours.
    assert_eq!(
        ownership(
            Some(&labels(&[(PART_OF_LABEL, "applyset-kubectl-v1")])),
            &ours
        ),
        Ownership::Foreign
    );
    assert_eq!(
        ownership(Some(&labels(&[(CREATED_BY_LABEL, FIELD_MANAGER)])), &ours),
        Ownership::Relaymesh
    );
    assert_eq!(
        ownership(Some(&labels(&[(CREATED_BY_LABEL, "someone")])), &ours),
        Ownership::Foreign
    );
}

#[test]
fn adoption_only_when_asked() {
    assert_eq!(takeover(None, false), Ok(Takeover::Create));
    assert_eq!(takeover(None, true), Ok(Takeover::Create));
    assert_eq!(
        takeover(Some(Ownership::Relaymesh), false),
        Ok(Takeover::Update)
    );
    assert_eq!(
        takeover(Some(Ownership::Foreign), false),
        Err(Refusal::NotManaged)
    );
    assert_eq!(
        takeover(Some(Ownership::Foreign), true),
        Ok(Takeover::Adopt)
    );
}

#[test]
fn adopted_objects_and_namespaces_are_released_not_deleted() {
    assert_eq!(prune_action(false), PruneAction::Delete);
    assert_eq!(prune_action(true), PruneAction::Release);
}

/// Objects that change how the whole cluster behaves, each with its body
/// and the category it falls into.
fn cluster_controls() -> Vec<(ObjectRef, Value, Category)> {
    let default_annotation = |key: &str| json!({"metadata": {"annotations": {key: "true"}}});
    vec![
        (
            object(
                "flowcontrol.apiserver.k8s.io",
                "FlowSchema",
                None,
                "catch-all",
            ),
            json!({"spec": {"priorityLevelConfiguration": {"name": "starve"}}}),
            Category::ApiServer,
        ),
        (
            object(
                "flowcontrol.apiserver.k8s.io",
                "PriorityLevelConfiguration",
                None,
                "starve",
            ),
            json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}}),
            Category::ApiServer,
        ),
        (
            object("internal.apiserver.k8s.io", "StorageVersion", None, "s"),
            json!({}),
            Category::ApiServer,
        ),
        (
            object(
                "storagemigration.k8s.io",
                "StorageVersionMigration",
                None,
                "m",
            ),
            json!({}),
            Category::ApiServer,
        ),
        (
            object("scheduling.k8s.io", "PriorityClass", None, "above-everyone"),
            json!({"value": 1_000_000_000, "globalDefault": true}),
            Category::ClusterDefaults,
        ),
        (
            object("storage.k8s.io", "StorageClass", None, "fast"),
            default_annotation("storageclass.kubernetes.io/is-default-class"),
            Category::ClusterDefaults,
        ),
        (
            object("storage.k8s.io", "StorageClass", None, "old"),
            default_annotation("storageclass.beta.kubernetes.io/is-default-class"),
            Category::ClusterDefaults,
        ),
        (
            object("networking.k8s.io", "IngressClass", None, "nginx"),
            default_annotation("ingressclass.kubernetes.io/is-default-class"),
            Category::ClusterDefaults,
        ),
        (
            object(
                "snapshot.storage.k8s.io",
                "VolumeSnapshotClass",
                None,
                "snap",
            ),
            default_annotation("snapshot.storage.kubernetes.io/is-default-class"),
            Category::ClusterDefaults,
        ),
        (
            object("", "Namespace", None, "lax"),
            json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
            Category::PodSecurity,
        ),
        (
            object("", "Namespace", None, "strict"),
            json!({"metadata": {"labels": {"pod-security.kubernetes.io/warn-version": "v1.25"}}}),
            Category::PodSecurity,
        ),
        (
            object("node.k8s.io", "RuntimeClass", None, "gvisor"),
            json!({"handler": "runc"}),
            Category::RuntimeClasses,
        ),
        (
            object("", "Node", None, "ghost"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("storage.k8s.io", "CSIDriver", None, "d.example.com"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("storage.k8s.io", "CSINode", None, "n"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("storage.k8s.io", "VolumeAttachment", None, "a"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("storage.k8s.io", "CSIStorageCapacity", Some("shop"), "c"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("resource.k8s.io", "ResourceSlice", None, "s"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("resource.k8s.io", "DeviceTaintRule", None, "t"),
            json!({}),
            Category::Nodes,
        ),
        (
            object("", "PersistentVolume", None, "host"),
            json!({"spec": {"hostPath": {"path": "/"}}}),
            Category::PersistentVolumes,
        ),
        (
            object(
                "certificates.k8s.io",
                "CertificateSigningRequest",
                None,
                "c",
            ),
            json!({}),
            Category::Certificates,
        ),
        (
            object("certificates.k8s.io", "ClusterTrustBundle", None, "b"),
            json!({}),
            Category::Certificates,
        ),
        (
            object("networking.k8s.io", "ServiceCIDR", None, "more"),
            json!({}),
            Category::ClusterNetworking,
        ),
        (
            object("networking.k8s.io", "IPAddress", None, "10.96.0.10"),
            json!({}),
            Category::ClusterNetworking,
        ),
        (
            object("", "Service", Some("default"), "kubernetes"),
            json!({}),
            Category::KubeSystem,
        ),
        (
            object("", "Endpoints", Some("default"), "kubernetes"),
            json!({}),
            Category::KubeSystem,
        ),
        (
            object(
                "discovery.k8s.io",
                "EndpointSlice",
                Some("default"),
                "extra",
            ),
            json!({"metadata": {"labels": {"kubernetes.io/service-name": "kubernetes"}}}),
            Category::KubeSystem,
        ),
    ]
}

#[test]
fn the_default_refuses_what_changes_the_whole_cluster() -> anyhow::Result<()> {
    for (reference, body, category) in cluster_controls() {
        assert_eq!(
            refused_body(&Policy::default(), &reference, &body),
            Some(category),
            "{reference}"
        );
        let open = Policy::new(&[category], &[])?;
        assert_eq!(refused_body(&open, &reference, &body), None, "{reference}");
        assert!(!Category::ALLOWED_BY_DEFAULT.contains(&category));
    }
    Ok(())
}

#[test]
fn classes_and_namespaces_that_change_nobody_else_are_allowed() {
    let policy = Policy::default();
    for (reference, body) in [
        // Used only by the pods that name it; what a pod names is not the
        // policy's to judge.
        (
            object("scheduling.k8s.io", "PriorityClass", None, "batch"),
            json!({"value": 1_000_000_000, "globalDefault": false}),
        ),
        (
            object("scheduling.k8s.io", "PriorityClass", None, "batch"),
            json!({"value": 100}),
        ),
        (
            object("storage.k8s.io", "StorageClass", None, "fast"),
            json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "false"}}}),
        ),
        (
            object("networking.k8s.io", "IngressClass", None, "nginx"),
            json!({"spec": {"controller": "k8s.io/ingress-nginx"}}),
        ),
        // The annotation of another kind means nothing on this one.
        (
            object("networking.k8s.io", "IngressClass", None, "nginx"),
            json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
        ),
        (
            object("", "Namespace", None, "shop"),
            json!({"metadata": {"labels": {"team": "shop", "security.example.com/enforce": "x"}}}),
        ),
        (
            object("", "PersistentVolumeClaim", Some("shop"), "data"),
            json!({"spec": {"storageClassName": "fast"}}),
        ),
        (
            object("storage.k8s.io", "VolumeAttributesClass", None, "gold"),
            json!({}),
        ),
        (
            object("resource.k8s.io", "DeviceClass", None, "gpu"),
            json!({}),
        ),
        (
            object("coordination.k8s.io", "Lease", Some("shop"), "leader"),
            json!({}),
        ),
        (object("", "ResourceQuota", Some("shop"), "q"), json!({})),
        (
            object("networking.k8s.io", "NetworkPolicy", Some("shop"), "deny"),
            json!({}),
        ),
        // A Service called kubernetes elsewhere, and another Service's
        // slices in default, are ordinary.
        (object("", "Service", Some("shop"), "kubernetes"), json!({})),
        (
            object("discovery.k8s.io", "EndpointSlice", Some("default"), "web"),
            json!({"metadata": {"labels": {"kubernetes.io/service-name": "web"}}}),
        ),
    ] {
        assert_eq!(
            refused_body(&policy, &reference, &body),
            None,
            "{reference} {body}"
        );
    }
}

#[test]
fn refusals_of_the_new_categories_name_their_flag() {
    for (category, flag) in [
        (Category::ApiServer, "--allow api-server"),
        (Category::ClusterDefaults, "--allow cluster-defaults"),
        (Category::PodSecurity, "--allow pod-security"),
        (Category::RuntimeClasses, "--allow runtime-classes"),
        (Category::Nodes, "--allow nodes"),
        (Category::PersistentVolumes, "--allow persistent-volumes"),
        (Category::Certificates, "--allow certificates"),
        (Category::ClusterNetworking, "--allow cluster-networking"),
    ] {
        let text = Refusal::Category { category }.to_string();
        assert!(
            text.starts_with("refused by this agent's apply policy: ")
                && text.ends_with(&format!("is not allowed here (edge-agent run {flag})")),
            "{text}"
        );
    }
}

#[test]
fn adoption_needs_the_owners_consent_for_the_namespace() {
    let settings = object("", "ConfigMap", Some("legacy"), "settings");
    let foreign = Some(Ownership::Foreign);
    // Nowhere by default, whatever the placement says.
    assert_eq!(
        Policy::default().check_takeover(&settings, Some("legacy"), foreign, true),
        Err(Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::Namespace("legacy".into())
        })
    );
    let policy = Policy::default().allowing_adoption([AdoptionScope::Namespace("legacy".into())]);
    assert_eq!(
        policy.check_takeover(&settings, Some("legacy"), foreign, true),
        Ok(Takeover::Adopt)
    );
    // The placement must still ask.
    assert_eq!(
        policy.check_takeover(&settings, Some("legacy"), foreign, false),
        Err(Refusal::NotManaged)
    );
    // The Namespace itself counts as its namespace.
    let legacy = object("", "Namespace", None, "legacy");
    assert_eq!(
        policy.check_takeover(&legacy, None, foreign, true),
        Ok(Takeover::Adopt)
    );
    // Not another namespace, nor a cluster-scoped object.
    let other = object("apps", "Deployment", Some("billing"), "worker");
    assert_eq!(
        policy.check_takeover(&other, Some("billing"), foreign, true),
        Err(Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::Namespace("billing".into())
        })
    );
    let definition = object(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        None,
        "widgets.example.com",
    );
    assert_eq!(
        policy.check_takeover(&definition, None, foreign, true),
        Err(Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::ClusterScoped
        })
    );
    // Its own objects and new ones need no consent.
    assert_eq!(
        Policy::default().check_takeover(&other, Some("billing"), Some(Ownership::Relaymesh), true),
        Ok(Takeover::Update)
    );
    assert_eq!(
        Policy::default().check_takeover(&other, Some("billing"), None, true),
        Ok(Takeover::Create)
    );
}

#[test]
fn every_namespace_and_the_cluster_are_separate_consents() {
    let foreign = Some(Ownership::Foreign);
    let worker = object("apps", "Deployment", Some("billing"), "worker");
    let billing = object("", "Namespace", None, "billing");
    let class = object("storage.k8s.io", "StorageClass", None, "fast");
    let everywhere = Policy::default().allowing_adoption([AdoptionScope::AllNamespaces]);
    assert_eq!(
        everywhere.check_takeover(&worker, Some("billing"), foreign, true),
        Ok(Takeover::Adopt)
    );
    assert_eq!(
        everywhere.check_takeover(&billing, None, foreign, true),
        Ok(Takeover::Adopt)
    );
    assert_eq!(
        everywhere.check_takeover(&class, None, foreign, true),
        Err(Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::ClusterScoped
        })
    );
    let cluster = Policy::default().allowing_adoption([AdoptionScope::ClusterScoped]);
    assert_eq!(
        cluster.check_takeover(&class, None, foreign, true),
        Ok(Takeover::Adopt)
    );
    assert_eq!(
        cluster.check_takeover(&billing, None, foreign, true),
        Err(Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::Namespace("billing".into())
        })
    );
}

#[test]
fn adoption_refusals_name_the_flag() {
    assert_eq!(
        Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::Namespace("legacy".into())
        }
        .to_string(),
        "exists and is not managed by relaymesh, and this agent does not allow adoption \
         in namespace legacy (edge-agent run --allow-adopt legacy)"
    );
    assert_eq!(
        Refusal::AdoptionNotAllowed {
            scope: AdoptionScope::ClusterScoped
        }
        .to_string(),
        "exists and is not managed by relaymesh, and this agent does not allow adopting \
         cluster-scoped objects (edge-agent run --allow-adopt :cluster)"
    );
}

#[test]
fn adoption_scopes_parse_as_the_command_line_writes_them() {
    for (text, scope) in [
        ("legacy", AdoptionScope::Namespace("legacy".into())),
        ("*", AdoptionScope::AllNamespaces),
        (":cluster", AdoptionScope::ClusterScoped),
    ] {
        assert_eq!(text.parse::<AdoptionScope>(), Ok(scope.clone()));
        assert_eq!(scope.to_string(), text);
    }
    for bad in ["", "Legacy", "a/b", "-x", ":all", "**"] {
        assert!(bad.parse::<AdoptionScope>().is_err(), "{bad:?}");
    }
    let text = "Legacy"
        .parse::<AdoptionScope>()
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        text.starts_with(
            "\"Legacy\" is neither a namespace name, \"*\" (every namespace) nor \":cluster\""
        ),
        "{text}"
    );
}

#[test]
fn adoption_is_no_longer_a_category() {
    assert!(Category::from_str("adoption", false).is_err());
    assert!(ADOPTION_IS_NOT_A_CATEGORY.contains("--allow-adopt NAMESPACE"));
}
