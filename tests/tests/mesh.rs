//! The relay mesh end to end: real `relay` processes on loopback, each with
//! its own sled directory, joined with tokens and inspected with `relayctl`.

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_tests::{connected_under, find_node, wait_for, Mesh, RelayProcess};

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

#[test]
fn a_killed_mid_relay_rejoins_from_its_data_dir() -> anyhow::Result<()> {
    let (mesh, mut relays) = three_levels()?;
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

    // eu-west has the entry once it acknowledged a revision, and the bundle
    // once eu has sent it about one bundle's worth of bytes.
    wait_for("eu-west to receive the bundle", SETTLE, || {
        let tree = mesh.tree()?;
        let west = find_node(&tree, "eu-west").map(|(node, _)| node.clone());
        Ok(west.filter(|west| {
            west["ackedRevision"].as_u64() >= Some(1) && west["bytesSent"].as_u64() >= Some(size)
        }))
    })
    .with_context(|| mesh.logs())?;

    // Let the link counters settle, then read what the root sent.
    std::thread::sleep(Duration::from_secs(3));
    let tree = mesh.tree()?;
    let sent = |name: &str| {
        find_node(&tree, name)
            .and_then(|(node, _)| node["bytesSent"].as_u64())
            .unwrap_or_default()
    };
    let (to_eu, to_us) = (sent("eu"), sent("us"));
    assert!(
        to_eu >= size && to_us >= size,
        "each child got the bundle: {to_eu} {to_us}"
    );
    // Three relays below the root hold the bundle, but only two links leave
    // the root: one copy per link is about 2 × size; per descendant would be 3 ×.
    let total = to_eu + to_us;
    assert!(
        total < size * 5 / 2,
        "the root sent {total} bytes for a {size}-byte bundle to 2 children"
    );

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
    Ok(())
}
