//! Per-cluster customization expanded at the edge: one Deployment with
//! `{{ cluster.labels.region }}` in an env var and an override setting
//! replicas to 5 on `tier=large` clusters gives each simulated cluster its
//! own values, while every link of the tree carried the one bundle once. A
//! cluster without the label the template needs fails, says why, and gets
//! nothing half-customized. The root compresses its bundles (`relay run
//! --bundle-encoding zstd`): every store holds the compressed bytes.

use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    all_nodes, connected_under, kubectl, observe, wait_for, web_deployment, Mesh,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// Each cluster, its relay and its labels.
const CLUSTERS: [(&str, &str, &str); 5] = [
    ("edge-1", "eu", "region=eu,tier=large"),
    ("edge-2", "eu", "region=eu,tier=small"),
    ("edge-3", "us", "region=us,tier=large"),
    ("edge-4", "us", "region=us,tier=small"),
    // No region: the template cannot be expanded here.
    ("edge-5", "us", "tier=small"),
];

const WORKLOAD: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - {name: REGION, value: "{{ cluster.labels.region }}"}
        - {name: CLUSTER, value: "{{ cluster.name }}"}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {labelSelector: {matchExpressions: [{key: tier, operator: Exists}]}}
  customization:
    overrides:
    - clusterSelector: {matchLabels: {tier: large}}
      objects: {kind: Deployment}
      mergePatch: {spec: {replicas: 5}}
"#;

fn env(deployment: &Value, name: &str) -> Option<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|var| var["name"] == name)
        .and_then(|var| var["value"].as_str())
        .map(str::to_string)
}

#[test]
fn one_bundle_becomes_each_clusters_own_copy_at_the_edge() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    // Bundles compressed at the root: relays forward them as they are.
    let (mesh, mut root) = Mesh::init_with(&["--bundle-encoding", "zstd"])?;
    let mut eu = mesh.add_relay("eu", "root")?;
    let mut us = mesh.add_relay("us", "root")?;
    wait_for("both relays in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "eu", "root") && connected_under(&tree, "us", "root"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, relay, labels) in CLUSTERS {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, relay, labels, cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("every agent in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(CLUSTERS
            .iter()
            .all(|(name, relay, _)| connected_under(&tree, name, relay))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let output = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(WORKLOAD))?;
    if !output.status.success() {
        bail!("kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
    }

    for (cluster, (name, _, labels)) in clusters.iter().zip(CLUSTERS).take(4) {
        let deployment = wait_for(&format!("web on {name}"), SETTLE, || {
            web_deployment(cluster.kubeconfig())
        })
        .with_context(|| mesh.logs())?;
        let region = labels
            .split(',')
            .find_map(|label| label.strip_prefix("region="))
            .context("a region")?;
        let replicas = if labels.contains("tier=large") { 5 } else { 2 };
        assert_eq!(
            env(&deployment, "REGION").as_deref(),
            Some(region),
            "{name}"
        );
        assert_eq!(env(&deployment, "CLUSTER").as_deref(), Some(name));
        assert_eq!(deployment["spec"]["replicas"], replicas, "{name}");
    }

    // edge-5 has no region: it fails, naming the label, and applies nothing.
    let status = wait_for("the root's status of all five", SETTLE, || {
        let output = mesh.relayctl(&["status", "web", "-n", "shop", "-o", "json"])?;
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        observe(&status);
        let settled = status["selected"] == 5
            && status["failed"] == 1
            && status["applied"].as_u64().unwrap_or_default()
                + status["ready"].as_u64().unwrap_or_default()
                == 4;
        Ok(settled.then_some(status))
    })
    .with_context(|| mesh.logs())?;
    let failing = status["failing"].to_string();
    assert!(
        failing.contains("edge-5") && failing.contains("no label \\\"region\\\""),
        "{status}"
    );
    assert!(web_deployment(clusters[4].kubeconfig())?.is_none());

    // One bundle: every link of the tree carried it exactly once, the
    // root's two as each relay's own.
    let tree = mesh.tree()?;
    for node in all_nodes(&tree) {
        if node["name"] == "root" {
            continue;
        }
        assert_eq!(node["bundlesServed"], 1, "{}: {tree}", node["name"]);
    }

    // And every store holds that one bundle: the root's, each relay's and
    // each agent's (customized at the edge, never packed per cluster).
    for mut agent in agents {
        agent.stop()?;
    }
    for relay in [&mut eu, &mut us, &mut root] {
        relay.stop()?;
    }
    let mut ids = std::collections::BTreeSet::new();
    for (name, binary) in [("root", "relay"), ("eu", "relay"), ("us", "relay")]
        .into_iter()
        .chain(CLUSTERS.iter().map(|(name, _, _)| (*name, "edge-agent")))
    {
        let stored = mesh.inspect_with(binary, name)?;
        let bundles = stored["bundles"].as_array().context("bundles")?;
        assert_eq!(bundles.len(), 1, "{name} stores one bundle: {stored}");
        assert_eq!(bundles[0]["encoding"], "zstd", "{name}: {stored}");
        assert_eq!(bundles[0]["verified"], true, "{name}: {stored}");
        ids.insert(bundles[0]["id"].to_string());
    }
    assert_eq!(ids.len(), 1, "the same bundle everywhere: {ids:?}");
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
