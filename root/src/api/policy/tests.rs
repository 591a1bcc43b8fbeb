use relaymesh_apiserver::rbac::Rbac;
use relaymesh_apiserver::{Attributes, Denied, User};

use super::*;

fn store() -> (tempfile::TempDir, ObjectStore) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sled::open(dir.path()).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
    (dir, store)
}

fn user(groups: &[&str]) -> User {
    User {
        name: "someone".into(),
        groups: groups.iter().map(|group| group.to_string()).collect(),
    }
}

fn request(verb: &str, group: &str, resource: &str) -> Attributes {
    Attributes::Resource {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: None,
        namespace: Some("default".into()),
        name: None,
    }
}

#[test]
fn the_default_policy_gives_each_group_exactly_its_rights() {
    let (_dir, objects) = store();
    assert_eq!(bootstrap(&objects).expect("written").len(), 6);
    let rbac = Rbac::new(objects);
    let rows = [
        // (verb, group, resource, viewers, operators, admins)
        ("get", "apps", "deployments", true, true, true),
        ("watch", "", "pods", true, true, true),
        ("create", "apps", "deployments", false, true, true),
        ("patch", "relaymesh.dev", "placements", false, true, true),
        ("delete", "", "namespaces", false, true, true),
        // Secrets, as kube-apiserver's `view` role: not for viewers.
        ("get", "", "secrets", false, true, true),
        ("list", "", "secrets", false, true, true),
        ("watch", "", "secrets", false, true, true),
        ("get", "", "configmaps", true, true, true),
        ("list", "", "serviceaccounts", true, true, true),
        ("list", "relaymesh.dev", "clusters", true, true, true),
        (
            "list",
            "multicluster.x-k8s.io",
            "clusterprofiles",
            true,
            true,
            true,
        ),
        (
            "list",
            "rbac.authorization.k8s.io",
            "rolebindings",
            true,
            true,
            true,
        ),
        // relaymesh's own verbs: only admins.
        ("issue", "relaymesh.dev", "jointokens", false, false, true),
        ("revoke", "relaymesh.dev", "jointokens", false, false, true),
        (
            "issue",
            "relaymesh.dev",
            "usercertificates",
            false,
            false,
            true,
        ),
        (
            "revoke",
            "relaymesh.dev",
            "usercertificates",
            false,
            false,
            true,
        ),
        ("revoke", "relaymesh.dev", "revocations", false, false, true),
        ("move", "relaymesh.dev", "moves", false, false, true),
        ("list", "relaymesh.dev", "jointokens", true, true, true),
        // The operators' relayctl writes.
        ("create", "relaymesh.dev", "cordons", false, true, true),
        (
            "create",
            "relaymesh.dev",
            "clusterlabels",
            false,
            true,
            true,
        ),
        ("create", "relaymesh.dev", "bundles", false, true, true),
        // Handing out RBAC beyond one's own: only admins hold the verbs.
        (
            "bind",
            "rbac.authorization.k8s.io",
            "clusterroles",
            false,
            false,
            true,
        ),
        (
            "escalate",
            "rbac.authorization.k8s.io",
            "roles",
            false,
            false,
            true,
        ),
    ];
    for (verb, group, resource, viewers, operators, admins) in rows {
        let attributes = request(verb, group, resource);
        for (groups, expected) in [
            (&[VIEWERS][..], viewers),
            (&[OPERATORS][..], operators),
            (&[ADMINS][..], admins),
        ] {
            assert_eq!(
                rbac.authorize(&user(groups), &attributes).is_ok(),
                expected,
                "{groups:?} {verb} {resource}"
            );
        }
        // No known group: nothing (kube-apiserver's system:masters is not
        // special here).
        assert!(rbac
            .authorize(&user(&["system:masters"]), &attributes)
            .is_err());
    }
    // The widest group counts.
    assert!(rbac
        .authorize(
            &user(&[VIEWERS, ADMINS]),
            &request(ISSUE, "relaymesh.dev", "jointokens")
        )
        .is_ok());
    let reason = rbac
        .authorize(&user(&[VIEWERS]), &request("create", "apps", "deployments"))
        .expect_err("a viewer may not create");
    assert_eq!(
        reason,
        Denied::Forbidden("deployments.apps is forbidden: User \"someone\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"default\"".into())
    );
}

#[test]
fn bootstrap_writes_only_what_is_missing() {
    let (_dir, objects) = store();
    bootstrap(&objects).expect("written");
    // An operator narrows the viewers' role and deletes the operators'
    // binding.
    let viewer = ObjectKey::new(RBAC_GROUP, "clusterroles", None, "relaymesh:viewer");
    let mut edited = objects.get(&viewer).expect("readable").expect("stored");
    edited["rules"] =
        json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]);
    objects.update(&viewer, edited).expect("updated");
    let operators = ObjectKey::new(
        RBAC_GROUP,
        "clusterrolebindings",
        None,
        "relaymesh:operators",
    );
    objects.delete(&operators).expect("deleted");

    assert_eq!(
        bootstrap(&objects).expect("written"),
        vec!["relaymesh:operators".to_string()]
    );
    let kept = objects.get(&viewer).expect("readable").expect("stored");
    assert_eq!(kept["rules"][0]["resources"], json!(["deployments"]));
    assert_eq!(
        kept["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    assert!(bootstrap(&objects).expect("written").is_empty());
}

#[test]
fn a_team_places_only_what_its_namespaces_hold() {
    let (_dir, objects) = store();
    bootstrap(&objects).expect("written");
    let put = |plural: &str, namespace: Option<&str>, object: Value| {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        objects
            .create(
                &ObjectKey::new(RBAC_GROUP, plural, namespace, &name),
                object,
            )
            .expect("created");
    };
    put(
        "clusterroles",
        None,
        json!({"metadata": {"name": "placer"},
               "rules": [{"apiGroups": ["relaymesh.dev"], "resources": ["placements"], "verbs": ["create"]}]}),
    );
    for namespace in ["team-a", "team-c"] {
        put(
            "rolebindings",
            Some(namespace),
            json!({"metadata": {"name": "placer", "namespace": namespace},
                   "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "placer"},
                   "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": "alice"}]}),
        );
    }
    let rbac = Rbac::new(objects.clone());
    let alice = User {
        name: "alice".into(),
        groups: vec![],
    };
    let placement = |terms: Value| {
        json!({"metadata": {"name": "web", "namespace": "team-a"},
               "spec": {"workloads": terms, "clusters": {"names": ["edge-1"]}}})
    };
    let admit = |who: &User, terms: Value| {
        admit_placement(&rbac, &objects, who, Some("team-a"), &placement(terms))
    };
    let rows = [
        // Namespaced kinds of her own namespace.
        (json!([{"apiGroup": "apps", "kind": "Deployment"}]), true),
        (json!([{"kind": "ConfigMap", "names": ["settings"]}]), true),
        (
            json!([{"namespaces": ["team-a"], "labelSelector": {"matchLabels": {"app": "web"}}}]),
            true,
        ),
        // Other namespaces she may place in, or not.
        (json!([{"namespaces": ["team-a", "team-c"]}]), true),
        (json!([{"namespaces": ["team-b"], "kind": "Secret"}]), false),
        // Terms that may select cluster-scoped objects.
        (
            json!([{"labelSelector": {"matchLabels": {"app": "web"}}}]),
            false,
        ),
        (
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding"}]),
            false,
        ),
        (json!([{"kind": "NoSuchKind"}]), false),
        // Her namespaces, by name.
        (
            json!([{"kind": "Namespace", "names": ["team-a", "team-c"]}]),
            true,
        ),
        (
            json!([{"kind": "Namespace", "names": ["team-a", "team-b"]}]),
            false,
        ),
        (json!([{"kind": "Namespace"}]), false),
    ];
    for (terms, expected) in rows {
        assert_eq!(admit(&alice, terms.clone()).is_ok(), expected, "{terms}");
        // An operator places cluster-wide, as before.
        assert!(admit(&user(&[OPERATORS]), terms).is_ok());
    }
    let refused = admit(&alice, json!([{"namespaces": ["team-b"]}])).expect_err("not hers");
    assert_eq!(
        refused,
        "placements.relaymesh.dev \"web\" is forbidden: User \"alice\" cannot create resource \"placements\" in API group \"relaymesh.dev\" in the namespace \"team-b\": spec.workloads[0].namespaces names \"team-b\", whose objects the Placement would carry"
    );
    // A CRD's scope comes from its definition.
    objects
        .create(
            &ObjectKey::new(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                "widgets.example.com",
            ),
            json!({"metadata": {"name": "widgets.example.com"},
                   "spec": {"group": "example.com", "scope": "Namespaced",
                            "names": {"plural": "widgets", "kind": "Widget"}}}),
        )
        .expect("created");
    assert!(admit(
        &alice,
        json!([{"apiGroup": "example.com", "kind": "Widget"}])
    )
    .is_ok());
}
