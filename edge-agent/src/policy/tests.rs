use clap::ValueEnum as _;

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
    match policy.check(reference, reference.namespace.as_deref()) {
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
        "cluster-rbac,admission,aggregated-apis,kube-system,crds,adoption"
    );
    assert_eq!(Policy::default().allowed_names(), "crds,adoption");
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
        policy.check(&config, Some("kube-system")),
        Err(Refusal::Category {
            category: Category::KubeSystem
        })
    );
    assert_eq!(policy.check(&config, Some("default")), Ok(()));
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
fn the_agent_may_refuse_adoption_whatever_the_placement_says() -> anyhow::Result<()> {
    let open = Policy::default();
    assert_eq!(
        open.check_takeover(Some(Ownership::Foreign), true),
        Ok(Takeover::Adopt)
    );
    let closed = Policy::new(&[], &[Category::Adoption])?;
    assert_eq!(
        closed.check_takeover(Some(Ownership::Foreign), true),
        Err(Refusal::Category {
            category: Category::Adoption
        })
    );
    // Its own objects and new ones are unaffected.
    assert_eq!(
        closed.check_takeover(Some(Ownership::Relaymesh), true),
        Ok(Takeover::Update)
    );
    assert_eq!(closed.check_takeover(None, true), Ok(Takeover::Create));
    Ok(())
}

#[test]
fn adopted_objects_and_namespaces_are_released_not_deleted() {
    assert_eq!(prune_action(false), PruneAction::Delete);
    assert_eq!(prune_action(true), PruneAction::Release);
}

#[test]
fn only_a_literal_true_asks_for_adoption() {
    assert!(adopt_requested(
        br#"{"metadata": {}, "spec": {"adopt": true}}"#
    ));
    for body in [
        &br#"{"spec": {"adopt": false}}"#[..],
        br#"{"spec": {"adopt": "true"}}"#,
        br#"{"spec": {}}"#,
        br#"{"adopt": true}"#,
        b"{}",
        b"not json",
        b"",
    ] {
        assert!(!adopt_requested(body), "{}", String::from_utf8_lossy(body));
    }
}
