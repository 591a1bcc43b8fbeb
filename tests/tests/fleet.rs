//! `testbed up` end to end: a fleet of real relay and edge-agent processes,
//! each agent with its own simulated cluster; a Placement applied at the root
//! with kubectl lands its objects on exactly the selected clusters, read back
//! through each cluster's own API with kubectl.
//!
//! The second half needs edge agents that apply their assignments to a
//! cluster (`edge-agent join --kubeconfig`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_tests::{kubectl, wait_for, Testbed};
use serde_json::Value;

const UP: Duration = Duration::from_secs(240);
const SETTLE: Duration = Duration::from_secs(90);

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {app: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop, labels: {app: web}}
data: {GREETING: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:IMAGE_TAG"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {labelSelector: {matchLabels: {region: eu}}}
"#;

fn manifests(tag: &str) -> String {
    MANIFESTS.replace("IMAGE_TAG", tag)
}

/// The `app=web` objects of namespace shop on one cluster, as `Kind/name`,
/// and the Deployment's image if there is one.
fn shop_objects(testbed: &Testbed, cluster: &str) -> anyhow::Result<(BTreeSet<String>, String)> {
    let output = kubectl(
        &testbed.cluster_kubeconfig(cluster),
        &[
            "get",
            "deployments,services,configmaps",
            "-n",
            "shop",
            "-l",
            "app=web",
            "-o",
            "json",
        ],
        None,
    )?;
    if !output.status.success() {
        bail!(
            "kubectl get on {cluster}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let list: Value = serde_json::from_slice(&output.stdout)?;
    let mut objects = BTreeSet::new();
    let mut image = String::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let kind = item["kind"].as_str().unwrap_or_default();
        objects.insert(format!(
            "{kind}/{}",
            item["metadata"]["name"].as_str().unwrap_or_default()
        ));
        if kind == "Deployment" {
            image = item["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
    }
    Ok((objects, image))
}

fn apply(testbed: &Testbed, text: &str) -> anyhow::Result<()> {
    let output = kubectl(
        &testbed.root_kubeconfig(),
        &["apply", "-f", "-"],
        Some(text),
    )?;
    if !output.status.success() {
        bail!(
            "kubectl apply at the root: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

#[test]
fn a_testbed_fleet_places_workloads_on_exactly_the_selected_simulated_clusters(
) -> anyhow::Result<()> {
    let mut testbed = Testbed::up(
        &[
            "--relays-per-level",
            "2,1",
            "--agents",
            "4",
            "--base-port",
            "0",
        ],
        UP,
    )?;
    let ready = testbed.ready()?;
    let labels: BTreeMap<String, String> = ready["clusters"]
        .as_object()
        .context("the ready file lists the clusters")?
        .iter()
        .map(|(name, cluster)| {
            let region = cluster["labels"]["region"].as_str().unwrap_or_default();
            (name.clone(), region.to_string())
        })
        .collect();
    assert_eq!(labels.len(), 4, "{ready}");

    // The layout: the root's kubeconfig and one per cluster, each answering.
    assert!(testbed.root_kubeconfig().is_file());
    let mut kubeconfigs: Vec<String> = std::fs::read_dir(testbed.fleet_dir().join("clusters"))?
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".kubeconfig"))
        .collect();
    kubeconfigs.sort();
    let expected: Vec<String> = labels.keys().map(|n| format!("{n}.kubeconfig")).collect();
    assert_eq!(kubeconfigs, expected);
    for cluster in labels.keys() {
        let output = kubectl(&testbed.cluster_kubeconfig(cluster), &["get", "ns"], None)?;
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && text.contains("default"),
            "{cluster}: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The tree: root → 2 relays → 1 relay each → the agents.
    let output = testbed.relayctl(&["tree", "-o", "json"])?;
    assert!(output.status.success(), "{}", testbed.logs());
    let tree: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(tree["name"], "root");
    let top = tree["children"].as_array().context("root has children")?;
    assert_eq!(top.len(), 2, "{tree:#}");
    let mut agents_seen = BTreeSet::new();
    for relay in top {
        assert_eq!(relay["role"], "relay", "{relay:#}");
        let below = relay["children"].as_array().context("a relay level")?;
        assert_eq!(below.len(), 1, "{relay:#}");
        assert_eq!(below[0]["role"], "relay");
        for agent in below[0]["children"].as_array().into_iter().flatten() {
            assert_eq!(agent["role"], "agent", "{agent:#}");
            assert_eq!(agent["connected"], true, "{agent:#}");
            agents_seen.insert(agent["name"].as_str().unwrap_or_default().to_string());
        }
    }
    assert_eq!(agents_seen, labels.keys().cloned().collect());
    let eu: BTreeSet<&String> = labels
        .iter()
        .filter(|(_, r)| *r == "eu")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(eu.len(), 2, "{labels:?}");

    // A Placement for region=eu, applied at the root: exactly the eu
    // clusters get the Deployment, Service and ConfigMap.
    apply(&testbed, &manifests("1.27"))?;
    let all_three: BTreeSet<String> = ["ConfigMap/web", "Deployment/web", "Service/web"]
        .map(String::from)
        .into();
    wait_for("the workload on every eu cluster", SETTLE, || {
        for cluster in &eu {
            let (objects, image) = shop_objects(&testbed, cluster)?;
            if objects != all_three || image != "nginx:1.27" {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| testbed.logs())?;
    for (cluster, region) in &labels {
        if region != "eu" {
            let (objects, _) = shop_objects(&testbed, cluster)?;
            assert!(objects.is_empty(), "{cluster} ({region}) got {objects:?}");
        }
    }

    // A new image at the root reaches every eu cluster.
    apply(&testbed, &manifests("1.28"))?;
    wait_for("the new image on every eu cluster", SETTLE, || {
        for cluster in &eu {
            if shop_objects(&testbed, cluster)?.1 != "nginx:1.28" {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| testbed.logs())?;

    // Deleting the Placement removes the objects from every cluster.
    let output = kubectl(
        &testbed.root_kubeconfig(),
        &["delete", "placement", "web", "-n", "shop"],
        None,
    )?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    wait_for("the workload gone from every cluster", SETTLE, || {
        for cluster in labels.keys() {
            if !shop_objects(&testbed, cluster)?.0.is_empty() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| testbed.logs())?;

    testbed.stop()
}
