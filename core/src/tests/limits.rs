//! The core's limits on what one child may make it hold, and the counters
//! of refusals that climb to the root.

use relaymesh_protocol::{InventoryUpdate, PhaseCounts, PlacementStatus, StatusUpdate};

use super::*;
use relaymesh_protocol::limits::Limit;

/// root ── eu ── eu-west, with the given core limits below the root (the
/// root keeps the defaults, so what eu forwards is never refused there).
fn chain(max_records_per_child: usize, max_status_keys_per_child: usize) -> Net {
    let mut net = Net::new();
    net.add("root", None);
    net.config_mut().max_records_per_child = max_records_per_child;
    net.config_mut().max_status_keys_per_child = max_status_keys_per_child;
    for (name, parent) in [("eu", "root"), ("eu-west", "eu")] {
        net.add(name, Some(parent));
    }
    net.settle();
    net
}

/// Delivers `message` to eu as if eu-west had sent it.
fn from_eu_west(net: &mut Net, message: UpMessage) {
    let now = net.now();
    let link = net["eu-west"].link().unwrap_or_default();
    if let Some(eu) = net.core_mut("eu") {
        eu.handle_child_message(now, link, message);
    }
    net.run();
    net.settle();
}

fn refusals(net: &Net, at: &str, of: &str, limit: Limit) -> u64 {
    net.record(at, of)
        .and_then(|record| record.limit_refusals.get(limit.as_str()).copied())
        .unwrap_or(0)
}

fn agents(names: &[&str]) -> Vec<relaymesh_protocol::NodeRecord> {
    names
        .iter()
        .map(|name| node_record(name, Role::Agent, "eu-west"))
        .collect()
}

fn names_known(net: &Net, at: &str) -> BTreeSet<String> {
    net[at]
        .core()
        .nodes()
        .into_iter()
        .map(|record| record.name)
        .collect()
}

#[test]
fn a_child_over_its_record_limit_is_refused_and_counted_up_to_the_root() {
    // eu-west's own record and two more.
    let mut net = chain(3, DEFAULT_MAX_STATUS_KEYS_PER_CHILD);
    from_eu_west(
        &mut net,
        UpMessage::Inventory(InventoryUpdate::Delta {
            upserts: agents(&["a1", "a2", "a3", "a4", "a5"]),
            removals: vec![],
        }),
    );
    for at in ["eu", "root"] {
        let known = names_known(&net, at);
        assert!(
            known.contains("a1") && known.contains("a2"),
            "{at}: {known:?}"
        );
        assert!(
            !known.contains("a3") && !known.contains("a5"),
            "{at}: {known:?}"
        );
    }
    // Counted where it was refused, in eu's own record, which the root sees.
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        3
    );
    assert_eq!(
        refusals(&net, "root", "eu-west", Limit::InventoryRecordsPerChild),
        0
    );

    // Records already held still change at the limit, and one that leaves
    // makes room for another.
    let mut relabelled = agents(&["a1"]);
    relabelled[0].labels.insert("zone".into(), "b".into());
    from_eu_west(
        &mut net,
        UpMessage::Inventory(InventoryUpdate::Delta {
            upserts: relabelled,
            removals: vec!["a2".into()],
        }),
    );
    from_eu_west(
        &mut net,
        UpMessage::Inventory(InventoryUpdate::Delta {
            upserts: agents(&["a3"]),
            removals: vec![],
        }),
    );
    let a1 = net.record("root", "a1").expect("a1 is still known");
    assert_eq!(a1.labels.get("zone"), Some("b"));
    let known = names_known(&net, "root");
    assert!(known.contains("a3") && !known.contains("a2"), "{known:?}");
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        3
    );
}

#[test]
fn a_full_inventory_at_the_limit_replaces_the_old_records() {
    let mut net = chain(3, DEFAULT_MAX_STATUS_KEYS_PER_CHILD);
    let full = |names: &[&str]| {
        let mut records = vec![node_record("eu-west", Role::Relay, "eu")];
        records.extend(agents(names));
        UpMessage::Inventory(InventoryUpdate::Full {
            records,
            first: true,
            last: true,
        })
    };
    from_eu_west(&mut net, full(&["a1", "a2"]));
    // A whole new set the size of the limit: the old records do not count
    // against it.
    from_eu_west(&mut net, full(&["b1", "b2"]));
    let known = names_known(&net, "eu");
    assert!(known.contains("b1") && known.contains("b2"), "{known:?}");
    assert!(!known.contains("a1"), "{known:?}");
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        0
    );
    from_eu_west(&mut net, full(&["b1", "b2", "b3"]));
    assert!(!names_known(&net, "eu").contains("b3"));
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        1
    );
}

#[test]
fn pieces_of_a_full_inventory_are_bounded_before_the_last_arrives() {
    let mut net = chain(3, DEFAULT_MAX_STATUS_KEYS_PER_CHILD);
    let piece = |records: Vec<relaymesh_protocol::NodeRecord>, first: bool, last: bool| {
        UpMessage::Inventory(InventoryUpdate::Full {
            records,
            first,
            last,
        })
    };
    let mut first = vec![node_record("eu-west", Role::Relay, "eu")];
    first.extend(agents(&["a1", "a2", "a3", "a4"]));
    // A child that never sends the last piece cannot grow what waits for
    // it past its limit.
    from_eu_west(&mut net, piece(first, true, false));
    from_eu_west(&mut net, piece(agents(&["a5"]), false, false));
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        3
    );
    from_eu_west(&mut net, piece(Vec::new(), false, true));
    let known = names_known(&net, "eu");
    assert!(known.contains("a1") && known.contains("a2"), "{known:?}");
    assert!(!known.contains("a3") && !known.contains("a5"), "{known:?}");
    assert_eq!(
        refusals(&net, "root", "eu", Limit::InventoryRecordsPerChild),
        3
    );
}

#[test]
fn a_child_over_its_status_key_limit_is_refused_and_counted_up_to_the_root() {
    let mut net = chain(DEFAULT_MAX_RECORDS_PER_CHILD, 2);
    let status = PlacementStatus {
        counts: PhaseCounts {
            ready: 1,
            ..PhaseCounts::default()
        },
        ..PlacementStatus::default()
    };
    let upserts = ["p/a", "p/b", "p/c", "p/d"]
        .iter()
        .map(|key| (key.to_string(), status.clone()))
        .collect();
    from_eu_west(
        &mut net,
        UpMessage::Status(StatusUpdate {
            full: true,
            upserts,
            removals: vec![],
        }),
    );
    let eu = &net["eu"].core();
    assert!(eu.placement_status("p/a").is_some() && eu.placement_status("p/b").is_some());
    assert!(eu.placement_status("p/c").is_none() && eu.placement_status("p/d").is_none());
    assert_eq!(refusals(&net, "root", "eu", Limit::StatusKeysPerChild), 2);
    // A key already reported still changes at the limit.
    let mut failed = status.clone();
    failed.counts = PhaseCounts {
        failed: 1,
        ..PhaseCounts::default()
    };
    from_eu_west(
        &mut net,
        UpMessage::Status(StatusUpdate {
            full: false,
            upserts: vec![("p/a".into(), failed)],
            removals: vec![],
        }),
    );
    let merged = net["eu"].core().placement_status("p/a");
    assert_eq!(merged.map(|status| status.counts.failed), Some(1));
    assert_eq!(refusals(&net, "root", "eu", Limit::StatusKeysPerChild), 2);
}

#[test]
fn refusals_the_daemon_counts_reach_the_root_and_saturate() {
    let mut net = chain(
        DEFAULT_MAX_RECORDS_PER_CHILD,
        DEFAULT_MAX_STATUS_KEYS_PER_CHILD,
    );
    let now = net.now();
    if let Some(node) = net.core_mut("eu-west") {
        node.count_limit_refusals(now, Limit::ConnectionsPerAddress, 936);
        node.count_limit_refusals(now, Limit::JoinsPerAddress, 0);
    }
    net.run();
    net.settle();
    let record = net.record("root", "eu-west").expect("eu-west is known");
    assert_eq!(
        record.limit_refusals,
        BTreeMap::from([("connections-per-address".to_string(), 936)]),
        "a zero count adds no counter"
    );
    let now = net.now();
    if let Some(node) = net.core_mut("eu-west") {
        node.count_limit_refusals(now, Limit::ConnectionsPerAddress, u64::MAX);
    }
    net.run();
    net.settle();
    assert_eq!(
        refusals(&net, "root", "eu-west", Limit::ConnectionsPerAddress),
        u64::MAX
    );
}

#[test]
fn a_child_fetches_at_most_max_bundle_streams_at_once() {
    use relaymesh_protocol::limits::MAX_BUNDLE_STREAMS;
    let mut net = chain(
        DEFAULT_MAX_RECORDS_PER_CHILD,
        DEFAULT_MAX_STATUS_KEYS_PER_CHILD,
    );
    net.hold_fetches(true);
    let count = MAX_BUNDLE_STREAMS + 4;
    for n in 0..count {
        net.publish(&format!("bundle/{n}"), Target::Everywhere, &[n as u8; 8]);
    }
    let at_eu = |net: &Net| {
        net.held_fetches()
            .iter()
            .filter(|(name, _)| name == "eu")
            .count()
    };
    assert_eq!(at_eu(&net), MAX_BUNDLE_STREAMS);
    // A fetch that completes or fails frees its stream for the next one.
    let now = net.now();
    let mut at_eu_ids = net
        .held_fetches()
        .iter()
        .filter(|(name, _)| name == "eu")
        .map(|(_, id)| *id);
    let (Some(first), Some(second)) = (at_eu_ids.next(), at_eu_ids.next()) else {
        panic!("eu fetches bundles");
    };
    if let Some(eu) = net.core_mut("eu") {
        eu.handle_bundle_stored(now, first);
        eu.handle_bundle_failed(now, second);
    }
    net.run();
    assert_eq!(at_eu(&net), MAX_BUNDLE_STREAMS + 2);
}
