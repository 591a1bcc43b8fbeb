//! The relay mesh end to end: real `relay` processes on loopback, each with
//! its own sled directory, joined with tokens and inspected with `relayctl`.

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_tests::{connected_under, find_node, kubectl, wait_for, Mesh, RelayProcess};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(30);

/// root ─┬─ eu ── eu-west
///       └─ us
fn three_levels() -> anyhow::Result<(Mesh, Vec<RelayProcess>)> {
    let (mesh, root) = Mesh::init()?;
    let eu = mesh.add_relay("eu", "root")?;
    let us = mesh.add_relay("us", "root")?;
    // eu-west's token names eu's address, which the root learns from eu's
    // inventory report.
    wait_for("eu in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu", "root").then_some(()))
    })?;
    let west = mesh.add_relay("eu-west", "eu")?;
    let whole = |tree: &serde_json::Value| {
        connected_under(tree, "eu", "root")
            && connected_under(tree, "us", "root")
            && connected_under(tree, "eu-west", "eu")
    };
    wait_for("the whole tree", SETTLE, || {
        Ok(whole(&mesh.tree()?).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    Ok((mesh, vec![root, eu, us, west]))
}

/// `node`'s link as kubectl reads it from the root: the `link` subresource,
/// which the root asks of the node's parent through the tree.
fn link(mesh: &Mesh, plural: &str, node: &str) -> anyhow::Result<Result<Value, String>> {
    let path = format!("/apis/relaymesh.dev/v1alpha1/{plural}/{node}/link");
    let output = kubectl(&mesh.kubeconfig(), &["get", "--raw", &path], None)?;
    if !output.status.success() {
        return Ok(Err(String::from_utf8_lossy(&output.stderr).to_string()));
    }
    Ok(Ok(serde_json::from_slice(&output.stdout)?))
}

#[test]
fn a_deep_link_is_asked_of_its_parent_and_a_killed_mid_relay_rejoins() -> anyhow::Result<()> {
    let (mesh, mut relays) = three_levels()?;
    // eu measures eu-west's link; the root's inventory does not carry it.
    let measured = wait_for("eu's measurements of eu-west's link", SETTLE, || {
        let link = link(&mesh, "relays", "eu-west")?.map_err(anyhow::Error::msg)?;
        let measured = link["rttMicros"].as_u64() > Some(0) && link["bytesSent"].as_u64() > Some(0);
        Ok(measured.then_some(link))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(measured["kind"], "Link");
    assert_eq!(measured["metadata"]["name"], "eu-west");
    assert_eq!(measured["parent"], "eu");
    assert_eq!(measured["connected"], true);
    let tree = mesh.tree()?;
    let (west, _) = find_node(&tree, "eu-west").context("eu-west")?;
    assert!(
        west.get("rttMicros").is_none(),
        "not in the inventory: {west}"
    );
    // relayctl asks the same; the root's own child is measured at the root.
    let text = mesh.relayctl(&["link", "eu-west"])?;
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains("measured by     eu\n"), "{text}");
    let json = mesh.relayctl(&["link", "us", "-o", "json"])?;
    let us: Value = serde_json::from_slice(&json.stdout)?;
    assert_eq!(
        (&us["parent"], &us["connected"]),
        (&"root".into(), &true.into()),
        "{us}"
    );
    // What cannot be answered says why.
    let error = link(&mesh, "relays", "root")?.expect_err("the root has no link");
    assert!(error.contains("the root: it has no parent link"), "{error}");
    let error = link(&mesh, "agents", "eu-west")?.expect_err("eu-west is a relay");
    assert!(error.contains("not found"), "{error}");

    let tree = mesh.tree()?;
    assert_eq!(tree["name"], "root");
    assert_eq!(tree["children"].as_array().map(Vec::len), Some(2));
    for name in ["root", "eu", "us", "eu-west"] {
        let (node, _) = find_node(&tree, name).context(name.to_string())?;
        assert_eq!(node["role"], "relay");
        assert!(node["children"].is_array());
        assert!(node.get("connected").is_some());
    }

    relays[1].kill()?;
    wait_for("eu to show as disconnected", SETTLE, || {
        let tree = mesh.tree()?;
        let eu = find_node(&tree, "eu").map(|(node, _)| node["connected"] == false);
        Ok((eu == Some(true)).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let error = link(&mesh, "relays", "eu-west")?.expect_err("eu is down");
    assert!(
        error.contains("eu, on the path to eu-west, is not connected"),
        "{error}"
    );

    // No token: the data directory is all a relay needs to come back.
    relays[1] = mesh.start("eu")?;
    wait_for("the tree to be whole again", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "eu", "root") && connected_under(&tree, "eu-west", "eu"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;
    wait_for("eu-west's link through the restarted eu", SETTLE, || {
        Ok(link(&mesh, "relays", "eu-west")?
            .ok()
            .filter(|link| link["connected"] == true && link["parent"] == "eu"))
    })
    .with_context(|| mesh.logs())?;
    Ok(())
}

#[test]
fn a_bundle_crosses_each_link_once() -> anyhow::Result<()> {
    let (mesh, mut relays) = three_levels()?;
    let size: u64 = 4 * 1024 * 1024;
    let bytes: Vec<u8> = (0..size).map(|_| rand::random::<u8>()).collect();
    let file = mesh.dir.path().join("bundle.bin");
    std::fs::write(&file, &bytes)?;
    let path = file.to_string_lossy().to_string();
    let pushed = mesh.relayctl(&["bundle", "push", &path, "--name", "demo"])?;
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let id = relaymesh_protocol::BundleId::of(&bytes).to_hex();
    assert!(String::from_utf8_lossy(&pushed.stdout).contains(&id));

    // The application's own counters: each parent completed exactly one
    // transfer of the bundle to each child, whatever QUIC retransmitted on
    // a busy loopback (wire bytes are the fan-out benchmark's business).
    let served = |tree: &serde_json::Value, name: &str| {
        find_node(tree, name).map(|(node, _)| {
            (
                node["bundlesServed"].as_u64().unwrap_or_default(),
                node["bundleBytesServed"].as_u64().unwrap_or_default(),
            )
        })
    };
    let links = ["eu", "us", "eu-west"];
    let tree = wait_for("every link to serve the bundle", SETTLE, || {
        let tree = mesh.tree()?;
        let done = links
            .iter()
            .all(|name| served(&tree, name).is_some_and(|(times, _)| times >= 1));
        Ok(done.then_some(tree))
    })
    .with_context(|| mesh.logs())?;
    for name in links {
        assert_eq!(served(&tree, name), Some((1, size)), "{name}: {tree}");
    }

    // eu-west logs the bundle once it is verified and stored.
    wait_for("eu-west to store the bundle", SETTLE, || {
        let log = std::fs::read_to_string(&relays[3].log)?;
        Ok(log
            .lines()
            .any(|line| line.contains("bundle stored") && line.contains(&id))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    relays[3].stop()?;
    let west = mesh.inspect("eu-west")?;
    let bundles = west["bundles"].as_array().context("bundles")?;
    assert_eq!(bundles.len(), 1, "{west}");
    assert_eq!(bundles[0]["id"], id.as_str());
    assert_eq!(bundles[0]["size"].as_u64(), Some(size));
    assert_eq!(bundles[0]["verified"], true);
    assert!(west["entries"]
        .as_array()
        .is_some_and(|e| e.iter().any(|k| k == "bundle/demo")));

    // Each parent's store says the same: one transfer per link, of this id.
    relays[1].stop()?;
    relays[0].stop()?;
    for (parent, children) in [("root", &["eu", "us"][..]), ("eu", &["eu-west"][..])] {
        let served = &mesh.inspect(parent)?["served"];
        for child in children {
            let link = &served[*child];
            assert_eq!(
                link["times"].as_u64(),
                Some(1),
                "{parent} → {child}: {served}"
            );
            assert_eq!(
                link["bytes"].as_u64(),
                Some(size),
                "{parent} → {child}: {served}"
            );
            let bundles = link["bundles"].as_array().context("bundles")?;
            assert_eq!(bundles.len(), 1, "{parent} → {child}: {served}");
            assert_eq!(bundles[0]["id"], id.as_str());
            assert_eq!(bundles[0]["times"].as_u64(), Some(1));
        }
    }
    Ok(())
}
