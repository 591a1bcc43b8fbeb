//! Link statistics stay with the parent that measured them: what climbs to
//! the root per second is O(its children), not O(the nodes below).

use std::time::Duration;

use super::*;

const RELAYS: usize = 4;
const AGENTS_PER_RELAY: usize = 25;
const TICKS: u64 = 10;

/// root ── r0..r3 ── 25 agents each.
fn wide_tree() -> Net {
    let mut net = Net::new();
    net.add("root", None);
    for relay in 0..RELAYS {
        let relay = format!("r{relay}");
        net.add(&relay, Some("root"));
        for agent in 0..AGENTS_PER_RELAY {
            net.add_agent(&format!("{relay}-{agent}"), &relay, &[("zone", "a")]);
        }
    }
    assert!(net.settle(), "the tree goes quiet");
    net
}

fn every_child(net: &Net) -> Vec<String> {
    net.nodes()
        .filter(|node| node.depth() > 0)
        .map(|node| node.name().to_string())
        .collect()
}

#[test]
fn the_root_hears_o_children_while_every_link_changes_every_tick() {
    let mut net = wide_tree();
    let children = every_child(&net);
    let before = *net["root"].traffic();
    for tick in 1..=TICKS {
        // The daemon samples every link about once a second, and on a real
        // network every sample differs.
        for (index, name) in children.iter().enumerate() {
            let stats = LinkStats {
                rtt: Duration::from_micros(1_000 + tick * 10 + index as u64),
                bytes_sent: tick * 1_000,
                bytes_received: tick * 500,
            };
            net.report_link_stats(name, stats).expect("a node");
        }
        net.advance(Duration::from_secs(1));
    }
    assert!(net.settle());
    let after = *net["root"].traffic();
    let messages = after.messages_from_children - before.messages_from_children;
    let records = after.inventory_records_from_children - before.inventory_records_from_children;
    eprintln!(
        "over {TICKS} ticks the root received {messages} messages carrying {records} \
         inventory records from {RELAYS} children ({} nodes below)",
        children.len()
    );
    // O(children): at most one message per child per tick, and no record
    // of a node below a child (the old behaviour sent every node's record
    // up every tick: RELAYS * AGENTS_PER_RELAY * TICKS of them).
    assert!(messages <= RELAYS as u64 * TICKS, "{messages} messages");
    assert!(records <= RELAYS as u64, "{records} records");

    // The root still shows its own children's links, measured here.
    let r0 = net.record("root", "r0").and_then(|record| record.link);
    let r0 = r0.expect("r0's link");
    assert!(r0.connected);
    assert!(r0.rtt_micros >= 1_000 + TICKS * 10, "{r0:?}");
    assert_eq!(r0.bytes_sent, TICKS * 1_000);
    // Its relay keeps an agent's link; the root knows only that it is up.
    let at_relay = net.record("r0", "r0-3").and_then(|record| record.link);
    assert_eq!(at_relay.map(|link| link.bytes_sent), Some(TICKS * 1_000));
    let at_root = net.record("root", "r0-3").and_then(|record| record.link);
    let at_root = at_root.expect("r0-3's link as the root knows it");
    assert!(at_root.connected);
    assert_eq!(
        (at_root.rtt_micros, at_root.bytes_sent),
        (0, 0),
        "not reported"
    );
}

#[test]
fn a_disconnect_below_still_reaches_the_root() {
    let mut net = wide_tree();
    net.disconnect("r1-7");
    assert!(net.settle());
    let link = net.record("root", "r1-7").and_then(|record| record.link);
    assert!(link.is_some_and(|link| !link.connected));
    net.connect("r1-7");
    assert!(net.settle());
    let link = net.record("root", "r1-7").and_then(|record| record.link);
    assert!(link.is_some_and(|link| link.connected));
}

#[test]
fn versions_move_with_what_they_count() {
    let mut net = wide_tree();
    let versions = |net: &Net| {
        let core = net["root"].core();
        (core.inventory_version(), core.link_measurements_version())
    };
    let (records, measured) = versions(&net);
    let stats = LinkStats {
        rtt: Duration::from_micros(700),
        ..LinkStats::default()
    };
    net.report_link_stats("r2", stats).expect("a node");
    assert!(net.settle());
    assert_eq!(
        versions(&net),
        (records, measured + 1),
        "only a measurement"
    );
    assert_eq!(net["root"].core().link_measurements()["r2"].rtt_micros, 700);
    net.report_link_stats("r2", stats).expect("a node");
    assert_eq!(versions(&net), (records, measured + 1), "nothing changed");
    net.disconnect("r2-4");
    assert!(net.settle());
    assert!(versions(&net).0 > records, "a record changed");
}
