//! Placements end to end: a three-level tree of real relay processes with
//! edge agents registered in the inventory; Placements applied at the root
//! resolve, level by level, to exactly the right clusters, and each relay's
//! sled holds only its subtree's slice.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, observe, wait_for, Mesh, RelayProcess};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(45);

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: storefront, namespace: shop, labels: {app: storefront}}
data: {greeting: hello}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: us-only, namespace: shop}
data: {region: us}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: eu, namespace: shop}
spec:
  workloads: [{kind: ConfigMap, labelSelector: {matchLabels: {app: storefront}}}]
  clusters: {labelSelector: {matchLabels: {region: eu}}}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: named, namespace: shop}
spec:
  workloads: [{kind: ConfigMap, names: [storefront]}]
  clusters: {names: [e2, u1]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: three, namespace: shop}
spec:
  workloads: [{kind: ConfigMap, names: [storefront]}]
  clusters: {labelSelector: {}}
  maxClusters: 3
  spreadBy: region
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: us-only, namespace: shop}
spec:
  workloads: [{kind: ConfigMap, names: [us-only]}]
  clusters: {names: [u2]}
"#;

/// The fleet and what keeps it running.
struct Fleet {
    mesh: Mesh,
    relays: Vec<RelayProcess>,
    agents: Vec<RelayProcess>,
    /// Each agent's simulated cluster, served from `runtime`.
    clusters: Vec<SimulatedCluster>,
    runtime: tokio::runtime::Runtime,
}

/// root ─┬─ eu ─┬─ eu-west ─┬─ e1 (eu)
///       │      │           └─ e2 (eu)
///       │      └─ e3 (eu)
///       └─ us ─┬─ u1 (us)
///              └─ u2 (us)
///
/// Every agent applies to a simulated cluster of its own, so it reports what
/// it applied and the root's Placement status says when every copy landed.
fn fleet() -> anyhow::Result<Fleet> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, root) = Mesh::init()?;
    let eu = mesh.add_relay("eu", "root")?;
    let us = mesh.add_relay("us", "root")?;
    wait_for("eu and us", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "eu", "root") && connected_under(&tree, "us", "root"))
                .then_some(()),
        )
    })?;
    let west = mesh.add_relay("eu-west", "eu")?;
    wait_for("eu-west", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu-west", "eu").then_some(()))
    })?;
    let mut agents = Vec::new();
    let mut clusters = Vec::new();
    for (name, parent, labels) in [
        ("e1", "eu-west", "region=eu,zone=eu-west-1"),
        ("e2", "eu-west", "region=eu,zone=eu-west-2"),
        ("e3", "eu", "region=eu,zone=eu-central-1"),
        ("u1", "us", "region=us,zone=us-east-1"),
        ("u2", "us", "region=us,zone=us-west-1"),
    ] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, parent, labels, cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("every cluster in the root's inventory", SETTLE, || {
        let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
        let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        let count = list["items"].as_array().map_or(0, Vec::len);
        Ok((count == 5).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    Ok(Fleet {
        mesh,
        relays: vec![root, eu, us, west],
        agents,
        clusters,
        runtime,
    })
}

fn entries(summary: &Value) -> BTreeSet<String> {
    summary["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|key| key.as_str().map(str::to_string))
        .collect()
}

/// The clusters `relayctl explain PLACEMENT -o json` names as selected.
fn explained_clusters(mesh: &Mesh, placement: &str) -> anyhow::Result<BTreeSet<String>> {
    let explained = mesh.relayctl_ok(&["explain", placement, "-n", "shop", "-o", "json"])?;
    let explained: Value = serde_json::from_str(&explained)?;
    observe(&explained);
    Ok(explained["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|cluster| cluster["name"].as_str().map(str::to_string))
        .collect())
}

#[test]
fn placements_reach_exactly_the_selected_clusters() -> anyhow::Result<()> {
    let Fleet {
        mesh,
        mut relays,
        mut agents,
        clusters,
        runtime,
    } = fleet()?;
    let file = mesh.dir.path().join("shop.yaml");
    std::fs::write(&file, MANIFESTS)?;
    let applied = mesh.relayctl(&["apply", "-f", &file.to_string_lossy()])?;
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    // explain reads what the relays decided, so it shows the clusters once
    // every relay on the way has cut the placement.
    wait_for("explain names e1, e2 and e3", SETTLE, || {
        let chosen = explained_clusters(&mesh, "eu")?;
        Ok((chosen == BTreeSet::from(["e1".to_string(), "e2".into(), "e3".into()])).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // Every selected cluster's agent applied its copy and said so: the
    // status merged on the way up counts each of them as applied or ready.
    wait_for(
        "every copy applied, by the root's placement status",
        SETTLE,
        || {
            let output = mesh.relayctl(&["get", "placements", "-n", "shop", "-o", "json"])?;
            let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
            observe(&list);
            let landed = |name: &str| {
                let clusters = list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["metadata"]["name"] == name)
                    .map(|p| p["status"]["clusters"].clone())
                    .unwrap_or_default();
                let count = |phase: &str| clusters[phase].as_u64().unwrap_or_default();
                (count("selected"), count("applied") + count("ready"))
            };
            let expected = [("eu", 3), ("named", 2), ("three", 3), ("us-only", 1)];
            Ok(expected
                .iter()
                .all(|(name, count)| landed(name) == (*count, *count))
                .then_some(()))
        },
    )
    .with_context(|| mesh.logs())?;
    // A bound of three, chosen by the relays: explain names the three
    // the relays chose, which are those whose agents hold it (below).
    let explained_three = explained_clusters(&mesh, "three")?;
    let table = mesh.relayctl(&["get", "placements", "-n", "shop"])?;
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("NAME") && table.contains("three"), "{table}");

    // An acknowledged revision is durable in the agent's store, so what the
    // stopped agents hold is what they acknowledged.
    for agent in &mut agents {
        agent.stop()?;
    }
    let has = |name: &str| -> anyhow::Result<BTreeSet<String>> {
        Ok(entries(&mesh.inspect_with("edge-agent", name)?))
    };
    let (e1, e2, e3, u1, u2) = (has("e1")?, has("e2")?, has("e3")?, has("u1")?, has("u2")?);
    for (name, got) in [("e1", &e1), ("e2", &e2), ("e3", &e3)] {
        assert!(got.contains("placement/shop/eu"), "{name}: {got:?}");
    }
    for (name, got) in [("u1", &u1), ("u2", &u2)] {
        assert!(!got.contains("placement/shop/eu"), "{name}: {got:?}");
    }
    let named: BTreeSet<&str> = [
        ("e1", &e1),
        ("e2", &e2),
        ("e3", &e3),
        ("u1", &u1),
        ("u2", &u2),
    ]
    .iter()
    .filter(|(_, got)| got.contains("placement/shop/named"))
    .map(|(name, _)| *name)
    .collect();
    assert_eq!(named, BTreeSet::from(["e2", "u1"]));
    let three: Vec<&str> = [
        ("e1", &e1),
        ("e2", &e2),
        ("e3", &e3),
        ("u1", &u1),
        ("u2", &u2),
    ]
    .iter()
    .filter(|(_, got)| got.contains("placement/shop/three"))
    .map(|(name, _)| *name)
    .collect();
    assert_eq!(
        three.len(),
        3,
        "maxClusters: 3 gives three clusters: {three:?}"
    );
    assert!(three.iter().any(|n| n.starts_with('e')) && three.iter().any(|n| n.starts_with('u')));
    assert_eq!(
        explained_three,
        three
            .iter()
            .map(|name| name.to_string())
            .collect::<BTreeSet<_>>(),
        "explain shows the clusters the relays chose"
    );
    for agent in ["e1", "e2", "e3", "u1", "u2"] {
        let summary = mesh.inspect_with("edge-agent", agent)?;
        let bundles = summary["bundles"].as_array().cloned().unwrap_or_default();
        assert!(
            bundles.iter().all(|b| b["verified"] == true),
            "{agent}: {summary}"
        );
        assert_eq!(
            bundles.is_empty(),
            entries(&summary).is_empty(),
            "{agent}: {summary}"
        );
    }

    // eu-west's store holds only what its subtree needs: nothing of us-only.
    relays[3].stop()?;
    let west = mesh.inspect("eu-west")?;
    let west_entries = entries(&west);
    assert!(west_entries.contains("placement/shop/eu"));
    assert!(west_entries.contains("placement/shop/named"));
    assert!(!west_entries.contains("placement/shop/us-only"), "{west}");
    let nodes: BTreeSet<&str> = west["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from(["e1", "e2"]),
        "eu-west knows only its subtree"
    );
    relays[2].stop()?;
    let us = mesh.inspect("us")?;
    assert!(entries(&us).contains("placement/shop/us-only"));
    assert!(!entries(&us).contains("placement/shop/eu"));
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
