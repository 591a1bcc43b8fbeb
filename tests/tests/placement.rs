//! Placements end to end: a three-level tree of real relay processes with
//! edge agents registered in the inventory; Placements applied at the root
//! resolve, level by level, to exactly the right clusters, and each relay's
//! sled holds only its subtree's slice.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_tests::{all_nodes, connected_under, wait_for, Mesh, RelayProcess};
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

/// root ─┬─ eu ─┬─ eu-west ─┬─ e1 (eu)
///       │      │           └─ e2 (eu)
///       │      └─ e3 (eu)
///       └─ us ─┬─ u1 (us)
///              └─ u2 (us)
fn fleet() -> anyhow::Result<(Mesh, Vec<RelayProcess>, Vec<RelayProcess>)> {
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
    let agents = vec![
        mesh.add_agent("e1", "eu-west", "region=eu,zone=eu-west-1")?,
        mesh.add_agent("e2", "eu-west", "region=eu,zone=eu-west-2")?,
        mesh.add_agent("e3", "eu", "region=eu,zone=eu-central-1")?,
        mesh.add_agent("u1", "us", "region=us,zone=us-east-1")?,
        mesh.add_agent("u2", "us", "region=us,zone=us-west-1")?,
    ];
    wait_for("every cluster in the root's inventory", SETTLE, || {
        let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
        let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        let count = list["items"].as_array().map_or(0, Vec::len);
        Ok((count == 5).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    Ok((mesh, vec![root, eu, us, west], agents))
}

fn entries(summary: &Value) -> BTreeSet<String> {
    summary["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|key| key.as_str().map(str::to_string))
        .collect()
}

#[test]
fn placements_reach_exactly_the_selected_clusters() -> anyhow::Result<()> {
    let (mesh, mut relays, mut agents) = fleet()?;
    let file = mesh.dir.path().join("shop.yaml");
    std::fs::write(&file, MANIFESTS)?;
    let applied = mesh.relayctl(&["apply", "-f", &file.to_string_lossy()])?;
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let explained = mesh.relayctl(&["explain", "eu", "-n", "shop", "-o", "json"])?;
    assert!(
        explained.status.success(),
        "{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    let explained: Value = serde_json::from_slice(&explained.stdout)?;
    let chosen: BTreeSet<&str> = explained["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(chosen, BTreeSet::from(["e1", "e2", "e3"]));

    wait_for("placement status at the root", SETTLE, || {
        let output = mesh.relayctl(&["get", "placements", "-n", "shop", "-o", "json"])?;
        let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        let selected = |name: &str| {
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["metadata"]["name"] == name)
                .and_then(|p| p["status"]["clusters"]["selected"].as_u64())
        };
        let expected = [("eu", 3), ("named", 2), ("three", 3), ("us-only", 1)];
        Ok(expected
            .iter()
            .all(|(name, count)| selected(name) == Some(*count))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let table = mesh.relayctl(&["get", "placements", "-n", "shop"])?;
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("NAME") && table.contains("three"), "{table}");

    // Every link caught up: no relay or agent lags its parent.
    wait_for("the tree to settle", SETTLE, || {
        let tree = mesh.tree()?;
        let nodes = all_nodes(&tree);
        let settled = nodes.len() == 9
            && nodes
                .iter()
                .skip(1)
                .all(|n| n["revisionLag"] == 0 && n["ackedRevision"].as_u64() > Some(0));
        Ok(settled.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    std::thread::sleep(Duration::from_secs(2));

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
    Ok(())
}
