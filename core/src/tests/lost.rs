//! Lost clusters: an agent disconnected for longer than its relay's
//! `lost_after` loses its count-bounded placements to another cluster
//! (while it keeps what it had), no longer counts in their status, and is
//! an open cluster again when it is back.

use super::*;

const LOST: &str = relaymesh_topology::placement::LOST_LABEL;
const LOST_AFTER: std::time::Duration = std::time::Duration::from_secs(60);
const KEY: &str = "placement/shop/one";

fn one_in_eu() -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        max_clusters: Some(1),
        ..Default::default()
    }
}

fn lost_label(net: &Net, at: &str, node: &str) -> Option<String> {
    net.record(at, node)
        .and_then(|record| record.labels.get(LOST).map(str::to_string))
}

#[test]
fn a_cluster_disconnected_for_longer_than_lost_after_gives_its_place_to_another() {
    let mut net = fleet();
    let now = net.now();
    for relay in ["root", "eu", "us", "eu-west"] {
        net.core_mut(relay)
            .expect("a relay")
            .set_lost_after(now, Some(LOST_AFTER));
    }
    upsert_at_root(&mut net, placement(KEY, one_in_eu()));
    net.settle();
    let holders = agents_with(&net, KEY);
    assert_eq!(holders.len(), 1, "{holders:?}");
    let lost = holders.iter().next().cloned().expect("one holder");
    let now = net.now();
    net.core_mut(&lost)
        .expect("an agent")
        .set_own_status(now, KEY, Some(ready()));
    net.settle();

    net.disconnect(&lost);
    // Second by second: `settle` would run on to the lost timer.
    for _ in 0..LOST_AFTER.as_secs() / 2 {
        net.advance(std::time::Duration::from_secs(1));
    }
    assert_eq!(agents_with(&net, KEY), holders, "not lost yet");
    assert_eq!(lost_label(&net, "root", &lost), None);
    let at_root = net["root"].core().placement_status(KEY).expect("status");
    assert_eq!(at_root.counts.offline, 1, "{at_root:?}");

    net.advance(LOST_AFTER / 2);
    net.settle();
    assert_eq!(lost_label(&net, "root", &lost).as_deref(), Some("true"));
    let now_held = agents_with(&net, KEY);
    assert_eq!(
        now_held.len(),
        2,
        "the lost one keeps its copy: {now_held:?}"
    );
    let replacement = now_held
        .iter()
        .find(|name| **name != lost)
        .cloned()
        .expect("a replacement");
    let now = net.now();
    net.core_mut(&replacement)
        .expect("an agent")
        .set_own_status(now, KEY, Some(ready()));
    net.settle();
    let at_root = net["root"].core().placement_status(KEY).expect("status");
    assert_eq!(
        (at_root.counts.ready, at_root.counts.offline),
        (1, 0),
        "the lost cluster no longer counts: {at_root:?}"
    );

    // Back, it is open again and reports its own labels; its copy goes,
    // the replacement keeps its place.
    net.connect(&lost);
    net.settle();
    assert_eq!(lost_label(&net, "root", &lost), None);
    assert_eq!(agents_with(&net, KEY), set(&[replacement.as_str()]));
}

#[test]
fn without_lost_after_a_disconnected_cluster_keeps_its_place() {
    let mut net = fleet();
    upsert_at_root(&mut net, placement(KEY, one_in_eu()));
    net.settle();
    let holders = agents_with(&net, KEY);
    let holder = holders.iter().next().cloned().expect("one holder");
    net.disconnect(&holder);
    net.advance(LOST_AFTER * 10);
    net.settle();
    net.advance(LOST_AFTER);
    net.settle();
    assert_eq!(agents_with(&net, KEY), holders);
    assert_eq!(lost_label(&net, "root", &holder), None);
}
