use serde_json::json;

use super::*;
use crate::extension::Extension;
use crate::objects::ObjectKey;

fn store() -> (tempfile::TempDir, ObjectStore) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sled::open(dir.path()).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
    (dir, store)
}

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|group| group.to_string()).collect(),
    }
}

fn put(store: &ObjectStore, plural: &str, namespace: Option<&str>, object: Value) {
    let name = name_of(&object);
    let key = ObjectKey::new(GROUP, plural, namespace, &name);
    match store.get(&key).expect("readable") {
        Some(_) => store.update(&key, object).expect("updated"),
        None => store.create(&key, object).expect("created"),
    };
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})
}

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    role: (&str, &str),
    subjects: Value,
) -> Value {
    let mut object = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
           "metadata": {"name": name},
           "roleRef": {"apiGroup": GROUP, "kind": role.0, "name": role.1},
           "subjects": subjects});
    if let Some(namespace) = namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

fn request(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Attributes {
    Attributes::Resource {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: None,
        namespace: namespace.map(str::to_string),
        name: None,
    }
}

/// A store with a ClusterRole for team work, bound to alice in `team-a`
/// only, and everything bound to the group `admins`.
fn team_store() -> (tempfile::TempDir, ObjectStore) {
    let (dir, store) = store();
    put(
        &store,
        "clusterroles",
        None,
        cluster_role(
            "team",
            json!([{"apiGroups": ["relaymesh.dev"], "resources": ["placements"], "verbs": ["*"]},
                   {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "create"]}]),
        ),
    );
    put(
        &store,
        "clusterroles",
        None,
        cluster_role(
            "everything",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        ),
    );
    put(
        &store,
        "rolebindings",
        Some("team-a"),
        binding(
            "RoleBinding",
            "team",
            Some("team-a"),
            ("ClusterRole", "team"),
            json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
        ),
    );
    put(
        &store,
        "clusterrolebindings",
        None,
        binding(
            "ClusterRoleBinding",
            "admins",
            None,
            ("ClusterRole", "everything"),
            json!([{"kind": "Group", "apiGroup": GROUP, "name": "admins"}]),
        ),
    );
    (dir, store)
}

#[test]
fn a_role_binding_grants_only_in_its_namespace() {
    let (_dir, store) = team_store();
    let rbac = Rbac::new(store);
    let alice = user("alice", &[]);
    let create = |namespace| request("create", "relaymesh.dev", "placements", namespace);
    assert_eq!(rbac.authorize(&alice, &create(Some("team-a"))), Ok(()));
    assert_eq!(
        rbac.authorize(&alice, &create(Some("team-b"))),
        Err("placements.relaymesh.dev is forbidden: User \"alice\" cannot create resource \"placements\" in API group \"relaymesh.dev\" in the namespace \"team-b\"".into())
    );
    // Cluster-wide (`-A`) is not within a namespace.
    assert!(rbac
        .authorize(&alice, &request("list", "apps", "deployments", None))
        .is_err());
    assert!(rbac
        .authorize(
            &alice,
            &request("delete", "apps", "deployments", Some("team-a"))
        )
        .is_err());
    // Someone else with the same groups gets nothing.
    assert!(rbac
        .authorize(&user("bob", &[]), &create(Some("team-a")))
        .is_err());
    let admin = user("root", &["admins"]);
    assert!(rbac.authorize(&admin, &create(Some("team-b"))).is_ok());
    assert_eq!(
        rbac.policy()
            .expect("a policy")
            .allowed_by(&alice, &create(Some("team-a"))),
        Some("RBAC: allowed by RoleBinding \"team/team-a\" of ClusterRole \"team\" to User \"alice\"".into())
    );
}

#[test]
fn subjects_are_users_and_groups_and_service_accounts_only_on_a_cluster() {
    let (_dir, store) = team_store();
    put(
        &store,
        "rolebindings",
        Some("team-b"),
        binding(
            "RoleBinding",
            "team",
            Some("team-b"),
            ("ClusterRole", "team"),
            json!([{"kind": "Group", "apiGroup": GROUP, "name": "team-b-operators"},
                   {"kind": "ServiceAccount", "name": "deployer", "namespace": "team-b"}]),
        ),
    );
    let rbac = Rbac::new(store);
    let create = request("create", "relaymesh.dev", "placements", Some("team-b"));
    assert!(rbac
        .authorize(&user("carol", &["team-b-operators"]), &create)
        .is_ok());
    assert!(rbac
        .authorize(&user("system:serviceaccount:team-b:deployer", &[]), &create)
        .is_err());

    // A cluster's API server: the service account is its user, and only it.
    let rbac = rbac.with_service_accounts();
    assert!(rbac
        .authorize(&user("system:serviceaccount:team-b:deployer", &[]), &create)
        .is_ok());
    for other in [
        "system:serviceaccount:team-a:deployer",
        "system:serviceaccount:team-b:builder",
        "deployer",
    ] {
        assert!(
            rbac.authorize(&user(other, &[]), &create).is_err(),
            "{other}"
        );
    }
}

#[test]
fn the_kept_policy_follows_every_write_and_delete() {
    let (_dir, store) = team_store();
    let rbac = Rbac::new(store.clone());
    let alice = user("alice", &[]);
    let create_b = request("create", "relaymesh.dev", "placements", Some("team-b"));
    assert!(rbac.authorize(&alice, &create_b).is_err());
    let first = rbac.policy().expect("a policy");
    // Unrelated writes keep the copy.
    store
        .create(
            &ObjectKey::new("", "configmaps", Some("default"), "x"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}),
        )
        .expect("created");
    assert!(Arc::ptr_eq(&first, &rbac.policy().expect("a policy")));
    // A binding is seen by the very next decision.
    put(
        &store,
        "rolebindings",
        Some("team-b"),
        binding(
            "RoleBinding",
            "team",
            Some("team-b"),
            ("ClusterRole", "team"),
            json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
        ),
    );
    assert!(rbac.authorize(&alice, &create_b).is_ok());
    // So is a role's change, and a deletion.
    put(
        &store,
        "clusterroles",
        None,
        cluster_role(
            "team",
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]),
        ),
    );
    assert!(rbac.authorize(&alice, &create_b).is_err());
    assert!(rbac
        .authorize(
            &alice,
            &request("get", "apps", "deployments", Some("team-b"))
        )
        .is_ok());
    store
        .delete(&ObjectKey::new(
            GROUP,
            "rolebindings",
            Some("team-b"),
            "team",
        ))
        .expect("deleted");
    assert!(rbac
        .authorize(
            &alice,
            &request("get", "apps", "deployments", Some("team-b"))
        )
        .is_err());
}

/// An extension that decides with the RBAC of the test's store.
struct Decider {
    rbac: Rbac,
}

impl Extension for Decider {
    fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
        self.rbac.authorize(user, attributes)
    }
}

#[test]
fn nobody_grants_what_they_do_not_hold() {
    let (_dir, store) = team_store();
    let decider = Decider {
        rbac: Rbac::new(store.clone()),
    };
    let check = |who: &User, plural: &str, namespace: Option<&str>, object: Value| {
        decider
            .rbac
            .check_escalation(&decider, who, plural, namespace, &object)
    };
    let alice = user("alice", &[]);
    let team_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "placer", "namespace": "team-a"},
        "rules": [{"apiGroups": ["relaymesh.dev"], "resources": ["placements"], "verbs": ["create", "delete"]}]});
    // A Role within what alice holds in team-a: fine; in team-b: refused.
    assert_eq!(
        check(&alice, "roles", Some("team-a"), team_role.clone()),
        Ok(())
    );
    let refused = check(&alice, "roles", Some("team-b"), team_role).expect_err("not held there");
    assert!(
        refused.starts_with("roles.rbac.authorization.k8s.io \"placer\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"),
        "{refused}"
    );
    assert!(
        refused.contains(
            r#"{APIGroups:["relaymesh.dev"], Resources:["placements"], Verbs:["create"]}"#
        ),
        "{refused}"
    );
    // A wider role, or a binding to one: refused.
    let wider = cluster_role(
        "wider",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]),
    );
    assert!(check(&alice, "clusterroles", None, wider).is_err());
    let to_everything = binding(
        "RoleBinding",
        "mine",
        Some("team-a"),
        ("ClusterRole", "everything"),
        json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
    );
    let refused = check(
        &alice,
        "rolebindings",
        Some("team-a"),
        to_everything.clone(),
    )
    .expect_err("alice does not hold everything");
    assert!(refused.contains("Verbs:[\"*\"]"), "{refused}");
    // A binding to a role she holds all of, in her namespace: fine.
    let to_team = binding(
        "RoleBinding",
        "bob",
        Some("team-a"),
        ("ClusterRole", "team"),
        json!([{"kind": "User", "apiGroup": GROUP, "name": "bob"}]),
    );
    assert_eq!(
        check(&alice, "rolebindings", Some("team-a"), to_team.clone()),
        Ok(())
    );
    assert!(check(&alice, "rolebindings", Some("team-b"), to_team).is_err());
    // A binding to a role that does not exist grants nothing she can show.
    let to_nothing = binding(
        "RoleBinding",
        "ghost",
        Some("team-a"),
        ("ClusterRole", "missing"),
        json!([]),
    );
    assert_eq!(
        check(&alice, "rolebindings", Some("team-a"), to_nothing),
        Err("clusterrole.rbac.authorization.k8s.io \"missing\" not found".into())
    );
    // The admins hold everything.
    let admin = user("root", &["admins"]);
    assert_eq!(
        check(
            &admin,
            "rolebindings",
            Some("team-a"),
            to_everything.clone()
        ),
        Ok(())
    );

    // `bind` on the role, or `escalate` on roles, lets her past.
    put(
        &store,
        "clusterroles",
        None,
        cluster_role(
            "binder",
            json!([{"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["everything"]},
                   {"apiGroups": [GROUP], "resources": ["roles"], "verbs": ["escalate"]}]),
        ),
    );
    put(
        &store,
        "rolebindings",
        Some("team-a"),
        binding(
            "RoleBinding",
            "binder",
            Some("team-a"),
            ("ClusterRole", "binder"),
            json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
        ),
    );
    assert_eq!(
        check(&alice, "rolebindings", Some("team-a"), to_everything),
        Ok(())
    );
    let any_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "big", "namespace": "team-a"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    assert_eq!(
        check(&alice, "roles", Some("team-a"), any_role.clone()),
        Ok(())
    );
    assert!(check(&alice, "roles", Some("team-b"), any_role).is_err());
    // Other kinds are not this check's business.
    assert_eq!(
        check(&alice, "configmaps", Some("team-b"), json!({})),
        Ok(())
    );
}
