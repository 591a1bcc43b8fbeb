//! The edge agent's apply policy end to end: real relay and edge-agent
//! processes, each agent in front of a simulated cluster of its own, driven
//! with the real kubectl at the root.
//!
//! One Placement carries a Deployment and a ClusterRoleBinding to two
//! clusters below a relay: `strict` runs with the default policy, `open`
//! with `--allow cluster-rbac`. On `strict` the Deployment is applied and
//! the binding is not, and the root's Placement status says why; on `open`
//! both are applied. A second Placement carries a ConfigMap that already
//! exists on `strict`, made by someone else: the agent leaves it alone
//! until the Placement says `adopt: true`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, kubectl, observe, wait_for, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: web-admin, labels: {app: web}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: shop}]
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {names: [strict, open]}
---
apiVersion: v1
kind: Namespace
metadata: {name: legacy}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: legacy}
data: {owner: relaymesh}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: settings, namespace: legacy}
spec:
  workloads: [{kind: ConfigMap, names: [settings]}]
  clusters: {names: [strict]}
"#;

/// What was there before relaymesh, on `strict`.
const PRE_EXISTING: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: legacy}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: legacy}
data: {owner: someone-else}
"#;

/// `kubectl get` of one object as JSON; `None` if it does not exist.
fn get(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Option<Value>> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let output = kubectl(kubeconfig, &all, None)?;
    if output.status.success() {
        return Ok(Some(serde_json::from_slice(&output.stdout)?));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("NotFound") || stderr.contains("not found") {
        return Ok(None);
    }
    anyhow::bail!("kubectl {}: {stderr}", all.join(" "))
}

fn apply(kubeconfig: &Path, manifests: &str) -> anyhow::Result<()> {
    let output = kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifests))?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The root's `status.clusters` of Placement `namespace/name`.
fn placement_status(root: &Path, namespace: &str, name: &str) -> anyhow::Result<Value> {
    let placement = get(root, &["placements", name, "-n", namespace])?
        .with_context(|| format!("placement {namespace}/{name} exists"))?;
    Ok(placement["status"]["clusters"].clone())
}

fn count(clusters: &Value, phase: &str) -> u64 {
    clusters[phase].as_u64().unwrap_or_default()
}

#[test]
fn an_agent_applies_only_what_its_own_policy_allows() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _site = mesh.add_relay("site", "root")?;
    wait_for("the relay", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "site", "root").then_some(()))
    })?;
    let start = |name: &str| {
        runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions {
                delay: Duration::from_millis(500),
                ..SimulatorOptions::default()
            },
        ))
    };
    let strict_cluster = start("strict")?;
    let open_cluster = start("open")?;
    let strict_kubeconfig = strict_cluster.kubeconfig().to_path_buf();
    let open_kubeconfig = open_cluster.kubeconfig().to_path_buf();
    apply(&strict_kubeconfig, PRE_EXISTING)?;
    let _strict = mesh.add_agent_for("strict", "site", "tier=edge", &strict_kubeconfig)?;
    let _open = mesh.add_agent_for_with(
        "open",
        "site",
        "tier=edge",
        &open_kubeconfig,
        &["--allow", "cluster-rbac"],
    )?;
    wait_for("both clusters in the root's inventory", SETTLE, || {
        let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
        let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        observe(&list);
        Ok((list["items"].as_array().map_or(0, Vec::len) == 2).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let root = mesh.kubeconfig();
    apply(&root, MANIFESTS)?;

    // The root's status: `open` has everything ready, `strict` failed, and
    // the message says which object its policy refused and how to allow it.
    let clusters = wait_for(
        "the web placement's status from both clusters",
        SETTLE,
        || {
            let clusters = placement_status(&root, "shop", "web")?;
            Ok((count(&clusters, "selected") == 2
                && count(&clusters, "ready") == 1
                && count(&clusters, "failed") == 1)
                .then_some(clusters))
        },
    )
    .with_context(|| mesh.logs())?;
    let message = clusters["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "strict: ClusterRoleBinding web-admin: refused by this agent's apply policy: \
             cluster-scoped RBAC is not allowed here"
        ) && message.contains("--allow cluster-rbac"),
        "{clusters}"
    );

    // What each cluster holds: the Deployment everywhere, the binding only
    // where the agent allows it.
    let deployment = ["deployment", "web", "-n", "shop"];
    let binding = ["clusterrolebinding", "web-admin"];
    assert!(get(&strict_kubeconfig, &deployment)?.is_some());
    assert!(get(&open_kubeconfig, &deployment)?.is_some());
    assert_eq!(get(&strict_kubeconfig, &binding)?, None);
    let granted = get(&open_kubeconfig, &binding)?.context("the binding on open")?;
    assert_eq!(granted["roleRef"]["name"], "cluster-admin");

    // Someone else's ConfigMap is left alone, and the status says how to
    // take it over.
    let owner = |cluster: &Path| -> anyhow::Result<Option<String>> {
        Ok(get(cluster, &["configmap", "settings", "-n", "legacy"])?
            .and_then(|map| map["data"]["owner"].as_str().map(str::to_string)))
    };
    let clusters = wait_for("the settings placement's refusal", SETTLE, || {
        let clusters = placement_status(&root, "legacy", "settings")?;
        Ok((count(&clusters, "failed") == 1).then_some(clusters))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(
        clusters["message"],
        "strict: ConfigMap legacy/settings: exists and is not managed by relaymesh; \
         set spec.adopt: true to take it over",
        "{clusters}"
    );
    assert_eq!(owner(&strict_kubeconfig)?.as_deref(), Some("someone-else"));

    // The Placement asks to adopt it: the agent takes it over.
    let output = kubectl(
        &root,
        &[
            "patch",
            "placements",
            "settings",
            "-n",
            "legacy",
            "--type",
            "merge",
            "-p",
            r#"{"spec": {"adopt": true}}"#,
        ],
        None,
    )?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    wait_for("the adopted ConfigMap", SETTLE, || {
        let clusters = placement_status(&root, "legacy", "settings")?;
        Ok((count(&clusters, "ready") == 1 && count(&clusters, "failed") == 0).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(owner(&strict_kubeconfig)?.as_deref(), Some("relaymesh"));

    runtime.block_on(strict_cluster.shutdown())?;
    runtime.block_on(open_cluster.shutdown())?;
    Ok(())
}
