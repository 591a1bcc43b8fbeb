//! Tenancy at the root with RBAC, over real sockets with real kubectl: a
//! RoleBinding confines a team's user to its namespace, `kubectl auth
//! can-i` agrees with what the API does, and nobody grants more than they
//! hold (docs/security.md, "RBAC").

use std::process::Output;

use anyhow::Context as _;
use relaymesh_tests::{kubectl, Mesh};

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `kubectl auth can-i`'s first word: "yes" or "no".
fn can_i(kubeconfig: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let output = kubectl(kubeconfig, &all, None)?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Whether a SelfSubjectAccessReview says `kubeconfig`'s user may `verb`
/// relaymesh's `resource` (kubectl's can-i only asks about kinds that
/// discovery lists).
fn reviewed(kubeconfig: &std::path::Path, verb: &str, resource: &str) -> anyhow::Result<bool> {
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": "relaymesh.dev", "resource": resource}},
    })
    .to_string();
    // Reviews are answered, not stored, so discovery does not list them:
    // POST the review as it is.
    let output = kubectl(
        kubeconfig,
        &[
            "create",
            "--raw",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            "-f",
            "-",
        ],
        Some(&review),
    )?;
    anyhow::ensure!(output.status.success(), "{}", text(&output));
    let review: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    review["status"]["allowed"]
        .as_bool()
        .with_context(|| format!("no status.allowed in {review}"))
}

/// The team's ClusterRole, and alice bound to it in team-a only.
const TEAM_POLICY: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: team-deployer}
rules:
- apiGroups: [relaymesh.dev]
  resources: [placements]
  verbs: ["*"]
- apiGroups: [apps]
  resources: [deployments]
  verbs: ["*"]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a-deployers, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: team-deployer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;

fn placement(namespace: &str) -> String {
    format!(
        "apiVersion: relaymesh.dev/v1alpha1\nkind: Placement\nmetadata: {{name: web, namespace: {namespace}}}\nspec:\n  workloads: [{{apiGroup: apps, kind: Deployment, names: [web]}}]\n  clusters: {{labelSelector: {{matchLabels: {{tier: edge}}}}}}\n"
    )
}

fn binding(namespace: &str, name: &str, role: &str, user: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {namespace}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}\n"
    )
}

#[test]
fn a_role_binding_confines_a_team_to_its_namespace() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let admin = mesh.kubeconfig();
    // The three groups are default ClusterRoleBindings the root wrote.
    let output = kubectl(&admin, &["get", "clusterrolebindings", "-o", "name"], None)?;
    assert!(output.status.success(), "{}", text(&output));
    for group in ["viewers", "operators", "admins"] {
        assert!(
            text(&output).contains(&format!(
                "clusterrolebinding.rbac.authorization.k8s.io/relaymesh:{group}"
            )),
            "{}",
            text(&output)
        );
    }

    // alice's certificate names a group no binding names: what she may do
    // comes from the RoleBinding to her name alone.
    let alice = mesh.user_kubeconfig("alice", "team-a-people")?;
    assert_eq!(
        can_i(&alice, &["create", "placements", "-n", "team-a"])?,
        "no"
    );
    let output = kubectl(&admin, &["apply", "-f", "-"], Some(TEAM_POLICY))?;
    assert!(output.status.success(), "{}", text(&output));

    // can-i and the API agree, in her namespace and out of it.
    assert_eq!(
        can_i(&alice, &["create", "placements", "-n", "team-a"])?,
        "yes"
    );
    assert_eq!(
        can_i(&alice, &["create", "placements", "-n", "team-b"])?,
        "no"
    );
    assert_eq!(
        can_i(&alice, &["create", "deployments", "-n", "team-a"])?,
        "yes"
    );
    assert_eq!(can_i(&alice, &["list", "placements", "-A"])?, "no");
    assert_eq!(can_i(&alice, &["get", "secrets", "-n", "team-a"])?, "no");

    let output = kubectl(&alice, &["create", "-f", "-"], Some(&placement("team-a")))?;
    assert!(output.status.success(), "{}", text(&output));
    let output = kubectl(&alice, &["get", "placements", "web", "-n", "team-a"], None)?;
    assert!(output.status.success(), "{}", text(&output));

    let output = kubectl(&alice, &["create", "-f", "-"], Some(&placement("team-b")))?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains(
            "placements.relaymesh.dev is forbidden: User \"alice\" cannot create resource \"placements\" in API group \"relaymesh.dev\" in the namespace \"team-b\""
        ),
        "{}",
        text(&output)
    );
    // Nor may a Placement in her namespace carry team-b's objects.
    let reaching = placement("team-a")
        .replace("web, namespace: team-a", "reach, namespace: team-a")
        .replace(
            "{apiGroup: apps, kind: Deployment, names: [web]}",
            "{namespaces: [team-b], apiGroup: apps, kind: Deployment}",
        );
    let output = kubectl(&alice, &["create", "-f", "-"], Some(&reaching))?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("spec.workloads[0].namespaces names \"team-b\""),
        "{}",
        text(&output)
    );
    let output = kubectl(
        &admin,
        &["get", "placements", "-n", "team-b", "-o", "name"],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).trim().is_empty(), "{}", text(&output));

    // Row: she binds herself to the admins' role in her namespace. She may
    // create RoleBindings there, but not grant what she does not hold.
    let output = kubectl(
        &alice,
        &["create", "-f", "-"],
        Some(&binding("team-a", "mine", "relaymesh:admin", "alice")),
    )?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        text(&output)
    );
    assert_eq!(
        can_i(&alice, &["create", "placements", "-n", "team-b"])?,
        "no"
    );
    // Granting a teammate what she holds herself, in her namespace, is hers.
    let output = kubectl(
        &alice,
        &["create", "-f", "-"],
        Some(&binding("team-a", "bob", "team-deployer", "bob")),
    )?;
    assert!(output.status.success(), "{}", text(&output));

    // Row: an operator binds himself to the admins' role cluster-wide.
    let otto = mesh.user_kubeconfig("otto", "operators")?;
    let escalate = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: otto-admin}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: relaymesh:admin}\nsubjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: User, name: otto}\n";
    let output = kubectl(&otto, &["create", "-f", "-"], Some(escalate))?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        text(&output)
    );
    // ... nor widens his own role.
    let output = kubectl(
        &otto,
        &[
            "patch",
            "clusterrole",
            "relaymesh:operator",
            "--type=json",
            "-p",
            r#"[{"op": "add", "path": "/rules/0/verbs/-", "value": "issue"}]"#,
        ],
        None,
    )?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(!reviewed(&otto, "issue", "jointokens")?);
    // The admin may, and the next request sees it.
    let output = kubectl(&admin, &["create", "-f", "-"], Some(escalate))?;
    assert!(output.status.success(), "{}", text(&output));
    assert!(reviewed(&otto, "issue", "jointokens")?);
    Ok(())
}
