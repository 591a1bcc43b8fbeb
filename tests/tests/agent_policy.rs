//! The edge agent's apply policy end to end: real relay and edge-agent
//! processes, each agent in front of a simulated cluster of its own, driven
//! with the real kubectl at the root.
//!
//! Two clusters below a relay: `strict` runs with the default policy, `open`
//! with `--allow cluster-rbac --allow-adopt legacy`.
//!
//! - One Placement carries a Deployment and a ClusterRoleBinding to both. On
//!   `strict` the Deployment is applied and the binding is not, and the
//!   root's Placement status says why; on `open` both are applied.
//! - An operator's Placements carry the kinds that change how a whole
//!   cluster behaves: a catch-all FlowSchema, a PriorityLevelConfiguration
//!   that rejects, a `globalDefault` PriorityClass of value 1e9 and a
//!   Namespace that sets Pod Security to `privileged`. Neither cluster gets
//!   any of them, and each Placement's status names the flag that would
//!   allow it.
//! - A last Placement carries a ConfigMap and a Deployment that exist on
//!   both clusters already, made by another team: both agents leave them
//!   alone until the Placement says `adopt: true`; then `open`, whose owner
//!   allowed adoption in `legacy`, takes them over, and `strict` still
//!   refuses, naming `--allow-adopt legacy`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
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
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: legacy}
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers:
      - {name: worker, image: busybox:1.36}
      - {name: sidecar, image: example.com/relaymesh-sidecar:1}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: settings, namespace: legacy}
spec:
  workloads:
  - {kind: ConfigMap, names: [settings]}
  - {kind: Deployment, names: [worker]}
  clusters: {names: [strict, open]}
"#;

/// What another team made before relaymesh, on both clusters.
const PRE_EXISTING: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: legacy}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: legacy}
data: {owner: someone-else}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: legacy}
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: busybox:1.36}]
"#;

/// What an operator places to change how every edge cluster behaves, one
/// Placement per object so that each status names its own refusal.
const CONTROL_KINDS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: ops}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: starve}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: catch-all}
spec:
  priorityLevelConfiguration: {name: starve}
  matchingPrecedence: 2
  rules:
  - subjects:
    - {kind: Group, group: {name: "system:authenticated"}}
    - {kind: Group, group: {name: "system:unauthenticated"}}
    resourceRules:
    - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}
    nonResourceRules:
    - {verbs: ["*"], nonResourceURLs: ["*"]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: above-everyone}
value: 1000000000
globalDefault: true
---
apiVersion: v1
kind: Namespace
metadata:
  name: lax
  labels: {pod-security.kubernetes.io/enforce: privileged}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: priority-level, namespace: ops}
spec:
  workloads: [{kind: PriorityLevelConfiguration, names: [starve]}]
  clusters: {names: [strict, open]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: flow-schema, namespace: ops}
spec:
  workloads: [{kind: FlowSchema, names: [catch-all]}]
  clusters: {names: [strict, open]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: priority-class, namespace: ops}
spec:
  workloads: [{kind: PriorityClass, names: [above-everyone]}]
  clusters: {names: [strict, open]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: pod-security, namespace: ops}
spec:
  workloads: [{kind: Namespace, names: [lax]}]
  clusters: {names: [strict, open]}
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

/// The two clusters and the mesh above them.
struct Fleet {
    mesh: Mesh,
    /// The root's admin kubeconfig.
    root: PathBuf,
    /// The kubeconfig of the cluster of the agent run with the default policy.
    strict: PathBuf,
    /// The kubeconfig of the cluster of the agent run with `--allow
    /// cluster-rbac --allow-adopt legacy`.
    open: PathBuf,
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
    let strict = strict_cluster.kubeconfig().to_path_buf();
    let open = open_cluster.kubeconfig().to_path_buf();
    apply(&strict, PRE_EXISTING)?;
    apply(&open, PRE_EXISTING)?;
    let _strict = mesh.add_agent_for("strict", "site", "tier=edge", &strict)?;
    let _open = mesh.add_agent_for_with(
        "open",
        "site",
        "tier=edge",
        &open,
        &["--allow", "cluster-rbac", "--allow-adopt", "legacy"],
    )?;
    wait_for("both clusters in the root's inventory", SETTLE, || {
        let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
        let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        observe(&list);
        Ok((list["items"].as_array().map_or(0, Vec::len) == 2).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let root = mesh.kubeconfig();
    let fleet = Fleet {
        mesh,
        root,
        strict,
        open,
    };
    apply(&fleet.root, MANIFESTS)?;

    cluster_rbac_only_where_allowed(&fleet)?;
    control_kinds_reach_no_cluster(&fleet)?;
    adoption_only_where_the_owner_allows_it(&fleet)?;

    runtime.block_on(strict_cluster.shutdown())?;
    runtime.block_on(open_cluster.shutdown())?;
    Ok(())
}

/// The web Placement: the binding is refused on `strict` (the status says
/// why), applied on `open`.
fn cluster_rbac_only_where_allowed(fleet: &Fleet) -> anyhow::Result<()> {
    let Fleet {
        mesh,
        root,
        strict,
        open,
    } = fleet;
    // The root's status: `open` has everything ready, `strict` failed, and
    // the message says which object its policy refused and how to allow it.
    let clusters = wait_for(
        "the web placement's status from both clusters",
        SETTLE,
        || {
            let clusters = placement_status(root, "shop", "web")?;
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
    assert!(get(strict, &deployment)?.is_some());
    assert!(get(open, &deployment)?.is_some());
    assert_eq!(get(strict, &binding)?, None);
    let granted = get(open, &binding)?.context("the binding on open")?;
    assert_eq!(granted["roleRef"]["name"], "cluster-admin");
    Ok(())
}

/// An operator's Placements of cluster-wide control kinds fail on both
/// clusters (neither agent allows them), each naming its flag, and no
/// cluster holds any of the objects.
fn control_kinds_reach_no_cluster(fleet: &Fleet) -> anyhow::Result<()> {
    let Fleet {
        mesh,
        root: _,
        strict,
        open,
    } = fleet;
    let opal = mesh.dir.path().join("opal.kubeconfig");
    let output = mesh.relayctl(&[
        "user",
        "create",
        "opal",
        "--group",
        "operators",
        "-o",
        opal.to_str().context("a UTF-8 path")?,
    ])?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl user create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    apply(&opal, CONTROL_KINDS)?;
    for (placement, object, flag, get_args) in [
        (
            "priority-level",
            "PriorityLevelConfiguration starve",
            "--allow api-server",
            ["prioritylevelconfiguration", "starve"],
        ),
        (
            "flow-schema",
            "FlowSchema catch-all",
            "--allow api-server",
            ["flowschema", "catch-all"],
        ),
        (
            "priority-class",
            "PriorityClass above-everyone",
            "--allow cluster-defaults",
            ["priorityclass", "above-everyone"],
        ),
        (
            "pod-security",
            "Namespace lax",
            "--allow pod-security",
            ["namespace", "lax"],
        ),
    ] {
        let clusters = wait_for(&format!("{placement} failed on both"), SETTLE, || {
            let clusters = placement_status(&opal, "ops", placement)?;
            observe(&clusters);
            Ok((count(&clusters, "failed") == 2).then_some(clusters))
        })
        .with_context(|| mesh.logs())?;
        assert_eq!(count(&clusters, "ready"), 0, "{clusters}");
        let message = clusters["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("{object}: refused by this agent's apply policy: "))
                && message.ends_with(&format!("(edge-agent run {flag})")),
            "{placement}: {clusters}"
        );
        for cluster in [strict, open] {
            assert_eq!(
                get(cluster, &get_args)?,
                None,
                "{object} on {}",
                cluster.display()
            );
        }
    }
    Ok(())
}

/// The settings Placement over another team's ConfigMap and Deployment:
/// refused everywhere until it asks to adopt; then adopted on `open` alone,
/// whose owner allowed adoption in `legacy`.
fn adoption_only_where_the_owner_allows_it(fleet: &Fleet) -> anyhow::Result<()> {
    let Fleet {
        mesh,
        root,
        strict,
        open,
    } = fleet;
    let owner = |cluster: &Path| -> anyhow::Result<Option<String>> {
        Ok(get(cluster, &["configmap", "settings", "-n", "legacy"])?
            .and_then(|map| map["data"]["owner"].as_str().map(str::to_string)))
    };
    // The container names of the worker Deployment, sorted.
    let containers = |cluster: &Path| -> anyhow::Result<Vec<String>> {
        let worker = get(cluster, &["deployment", "worker", "-n", "legacy"])?
            .context("the worker Deployment")?;
        Ok(worker["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|container| container["name"].as_str().map(str::to_string))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect())
    };
    // Someone else's objects are left alone, and the status says how to
    // take them over.
    let clusters = wait_for("the settings placement's refusals", SETTLE, || {
        let clusters = placement_status(root, "legacy", "settings")?;
        Ok((count(&clusters, "failed") == 2).then_some(clusters))
    })
    .with_context(|| mesh.logs())?;
    let message = clusters["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with(
            ": ConfigMap legacy/settings: exists and is not managed by relaymesh; \
             set spec.adopt: true to take it over"
        ),
        "{clusters}"
    );
    for cluster in [strict, open] {
        assert_eq!(owner(cluster)?.as_deref(), Some("someone-else"));
        assert_eq!(containers(cluster)?, ["worker"]);
    }

    // The Placement asks to adopt them: only the agent whose owner allowed
    // adoption in `legacy` takes them over.
    let output = kubectl(
        root,
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
    let clusters = wait_for("the objects adopted on open alone", SETTLE, || {
        let clusters = placement_status(root, "legacy", "settings")?;
        Ok((count(&clusters, "ready") == 1 && count(&clusters, "failed") == 1).then_some(clusters))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(owner(open)?.as_deref(), Some("relaymesh"));
    assert_eq!(containers(open)?, ["sidecar", "worker"]);
    assert_eq!(
        clusters["message"],
        "strict: ConfigMap legacy/settings: exists and is not managed by relaymesh, \
         and this agent does not allow adoption in namespace legacy \
         (edge-agent run --allow-adopt legacy)",
        "{clusters}"
    );
    assert_eq!(owner(strict)?.as_deref(), Some("someone-else"));
    assert_eq!(containers(strict)?, ["worker"]);
    Ok(())
}
