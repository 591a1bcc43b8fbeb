//! Tests of the core on the in-memory network of [`crate::simulation`]:
//! several cores wired as a tree, every action executed by the harness's
//! fake daemon, virtual time.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};

use relaymesh_protocol::message::{DownMessage, UpMessage};
use relaymesh_protocol::{BundleId, Role, SliceEntry, Target};

use super::*;
use crate::simulation::{Simulation, SimulationConfig};
use crate::state::Served;

/// How a compromised relay changes an entry it forwards.
type Alteration = fn(&mut SliceEntry);

/// The harness with the shorthands these tests use; every step is expected
/// to succeed.
struct Net(Simulation);

impl Deref for Net {
    type Target = Simulation;

    fn deref(&self) -> &Simulation {
        &self.0
    }
}

impl DerefMut for Net {
    fn deref_mut(&mut self) -> &mut Simulation {
        &mut self.0
    }
}

impl Net {
    fn new() -> Self {
        // A short log, so a child falls behind it quickly.
        let config = SimulationConfig {
            log_keep: 8,
            ..SimulationConfig::default()
        };
        Self(Simulation::new(config).expect("a simulation"))
    }

    /// A relay, connected to its parent.
    fn add(&mut self, name: &str, parent: Option<&str>) {
        self.0.add_relay(name, parent).expect("added");
    }

    /// An agent, connected to its parent.
    fn add_agent(&mut self, name: &str, parent: &str, labels: &[(&str, &str)]) {
        self.0
            .add_agent(name, parent, labels.iter().copied())
            .expect("added");
    }

    fn connect(&mut self, name: &str) {
        self.0.connect(name).expect("connected");
    }

    fn disconnect(&mut self, name: &str) {
        self.0.disconnect(name).expect("disconnected");
    }

    fn restart(&mut self, name: &str) {
        self.0.restart(name).expect("restarted");
    }

    fn publish(&mut self, key: &str, target: Target, bytes: &[u8]) -> BundleId {
        self.0.publish(key, target, bytes).expect("published")
    }

    /// From now on `name` applies `alter` to every entry it sends down.
    fn tamper(&mut self, name: &str, alter: Alteration) {
        self.0
            .alter_down(name, move |message| tamper_with(message, alter))
            .expect("a node");
    }

    fn keys(&self, name: &str) -> BTreeSet<String> {
        self.0[name]
            .core()
            .entries()
            .map(|entry| entry.key.clone())
            .collect()
    }

    fn record(&self, at: &str, of: &str) -> Option<relaymesh_protocol::NodeRecord> {
        self.0[at].record(of)
    }

    /// Messages sent down, by every node.
    fn messages_down(&self) -> u64 {
        self.0
            .nodes()
            .map(|node| node.traffic().messages_to_children)
            .sum()
    }
}

/// An inventory record as a child might report it.
fn node_record(name: &str, role: Role, parent: &str) -> relaymesh_protocol::NodeRecord {
    relaymesh_protocol::NodeRecord {
        name: name.into(),
        role,
        parent: Some(parent.into()),
        labels: Default::default(),
        addresses: vec![],
        version: String::new(),
        link: None,
        capacity: Default::default(),
        refused_entries: 0,
        limit_refusals: Default::default(),
    }
}

/// Applies `alter` to every entry a message carries.
fn tamper_with(message: &mut DownMessage, alter: Alteration) {
    match message {
        DownMessage::Delta { changes, .. } => {
            for change in changes {
                if let SliceChange::Upsert(entry) = change {
                    alter(entry);
                }
            }
        }
        DownMessage::Snapshot { entries, .. } => entries.iter_mut().for_each(alter),
        _ => {}
    }
}

/// root ─┬─ eu ── eu-west
///       └─ us
fn three_levels() -> Net {
    let mut net = Net::new();
    net.add("root", None);
    for (name, parent) in [("eu", "root"), ("us", "root"), ("eu-west", "eu")] {
        net.add(name, Some(parent));
    }
    net.advance(INVENTORY_COALESCE * 2);
    net
}

#[test]
fn inventory_reaches_the_root_with_link_state() {
    let mut net = three_levels();
    let names: BTreeSet<String> = net["root"]
        .core()
        .nodes()
        .into_iter()
        .map(|record| record.name)
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    let west = net
        .record("root", "eu-west")
        .expect("eu-west known at root");
    assert_eq!(west.parent.as_deref(), Some("eu"));
    assert!(west.link.as_ref().is_some_and(|link| link.connected));

    net.disconnect("eu-west");
    net.advance(INVENTORY_COALESCE * 2);
    let west = net.record("root", "eu-west").expect("still known");
    assert!(west.link.as_ref().is_some_and(|link| !link.connected));
}

#[test]
fn a_bundle_crosses_each_link_once() {
    let mut net = three_levels();
    let bytes = vec![42u8; 100_000];
    let id = net.publish("bundle/demo", Target::Everywhere, &bytes);
    let len = bytes.len() as u64;
    for name in ["eu", "us", "eu-west"] {
        assert!(net.keys(name).contains("bundle/demo"), "{name}");
        assert_eq!(net[name].bundle(&id), Some(&bytes[..]), "{name}");
        assert_eq!(net[name].traffic().bundle_bytes_fetched, len);
    }
    // The parents' own counters say the same, in the inventory that climbs to
    // the root and in each parent's store.
    net.advance(INVENTORY_COALESCE * 2);
    for (parent, child) in [("root", "eu"), ("root", "us"), ("eu", "eu-west")] {
        let link = net.record("root", child).and_then(|record| record.link);
        let link = link.expect("a child has a link record");
        assert_eq!((link.bundles_served, link.bundle_bytes_served), (1, len));
        let once = Served {
            times: 1,
            bytes: len,
        };
        let persisted = &net[parent].persisted();
        assert_eq!(persisted.served.get(&(id, child.to_string())), Some(&once));
        assert_eq!(persisted.served_totals.get(child), Some(&once));
    }
    // Removing the entry removes it everywhere and frees the bundle.
    let now = net.now();
    if let Some(root) = net.core_mut("root") {
        root.remove_local(now, "bundle/demo");
    }
    net.run();
    for name in ["root", "eu", "us", "eu-west"] {
        assert!(net.keys(name).is_empty(), "{name}");
        assert!((net[name].bundle_count() == 0), "{name}");
        // Per-bundle records go with the bundle; the link totals stay.
        assert!(net[name].persisted().served.is_empty(), "{name}");
    }
    assert_eq!(net["root"].persisted().served_totals.len(), 2);
    // A restarted parent reports the totals it kept.
    net.restart("root");
    net.advance(INVENTORY_COALESCE * 2);
    let eu = net.record("root", "eu").and_then(|record| record.link);
    assert_eq!(eu.map(|link| link.bundles_served), Some(1));
}

#[test]
fn targeted_entries_reach_only_their_subtree() {
    let mut net = three_levels();
    let id = net.publish(
        "bundle/west",
        Target::Subtrees(vec!["eu-west".into()]),
        b"w",
    );
    assert!(net.keys("eu").contains("bundle/west"));
    assert!(net.keys("eu-west").contains("bundle/west"));
    assert!(net.keys("us").is_empty());
    assert!(net["us"].bundle(&id).is_none());
    // us may not fetch it even by asking for its id.
    assert!(!net["root"].core().may_serve_bundle("us", &id));
    assert!(net["root"].core().may_serve_bundle("eu", &id));
}

#[test]
fn a_reconnecting_child_resumes_with_a_delta() {
    let mut net = three_levels();
    net.publish("a", Target::Everywhere, b"a");
    net.disconnect("eu-west");
    net.publish("b", Target::Everywhere, b"b");
    let before = net.messages_down();
    net.connect("eu-west");
    assert_eq!(net.keys("eu-west"), net.keys("eu"));
    // Welcome plus one delta: no snapshot was needed.
    assert_eq!(net.messages_down() - before, 2);
    let eu_head = net["eu"].core().head();
    assert_eq!(
        net["eu-west"]
            .persisted()
            .parent_position
            .map(|p| p.revision),
        Some(eu_head)
    );
}

#[test]
fn a_child_too_far_behind_gets_a_snapshot() {
    let mut net = three_levels();
    net.disconnect("us");
    // log_keep is 8 in these tests.
    for i in 0..12 {
        net.publish(
            &format!("k{i}"),
            Target::Everywhere,
            format!("{i}").as_bytes(),
        );
    }
    let now = net.now();
    if let Some(root) = net.core_mut("root") {
        root.remove_local(now, "k0");
    }
    net.run();
    net.connect("us");
    assert_eq!(net.keys("us"), net.keys("root"));
    assert!(!net.keys("us").contains("k0"));
}

#[test]
fn a_change_goes_only_to_the_children_it_concerns() {
    let mut net = three_levels();
    let (us_before, eu_before) = (
        net["us"].traffic().messages_from_parent,
        net["eu"].traffic().messages_from_parent,
    );
    net.publish("west", Target::Subtrees(vec!["eu-west".into()]), b"w");
    // us is not told of a change that is not its own: no message, no
    // store write, no acknowledgement.
    assert_eq!(net["us"].traffic().messages_from_parent, us_before);
    assert!(net["eu"].traffic().messages_from_parent > eu_before);
    assert!(net.keys("eu-west").contains("west"));
    // It acknowledged all it was sent, so it does not lag.
    net.advance(INVENTORY_COALESCE * 2);
    let link = net.record("root", "us").and_then(|record| record.link);
    assert_eq!(link.map(|link| link.revision_lag), Some(0));
}

#[test]
fn an_idle_child_is_moved_on_before_it_leaves_the_log_and_resumes_with_a_delta() {
    let mut net = three_levels();
    let before = net["us"].traffic().messages_from_parent;
    // log_keep is 8 in these tests: us is moved on once it is 4 behind.
    for i in 0..12 {
        net.publish(
            &format!("west-{i}"),
            Target::Subtrees(vec!["eu-west".into()]),
            format!("{i}").as_bytes(),
        );
        let head = net["root"].core().head();
        let position = net["us"].persisted().parent_position.map(|p| p.revision);
        assert!(
            position.is_some_and(|revision| head - revision < 4),
            "us at {position:?}, the root's head at {head}"
        );
    }
    let sent = net["us"].traffic().messages_from_parent - before;
    assert!(sent > 0 && sent < 12, "{sent} messages for 12 changes");
    // Its position is in the log: it resumes with a delta, not a snapshot.
    net.disconnect("us");
    net.publish("west-last", Target::Subtrees(vec!["eu-west".into()]), b"l");
    let before = net["us"].traffic().messages_from_parent;
    net.connect("us");
    assert_eq!(net["us"].traffic().messages_from_parent - before, 2);
    assert!(net.keys("us").is_empty());
}

#[test]
fn a_restarted_relay_converges_from_its_store() {
    let mut net = three_levels();
    net.publish("a", Target::Everywhere, b"a");
    net.restart("eu");
    assert!(net.keys("eu").contains("a"), "the slice survives a restart");
    net.publish("b", Target::Everywhere, b"b");
    assert!(!net.keys("eu").contains("b"), "eu is down");
    net.connect("eu");
    net.connect("eu-west");
    assert_eq!(net.keys("eu-west"), net.keys("root"));
    net.advance(INVENTORY_COALESCE * 2);
    let west = net.record("root", "eu-west").expect("known");
    assert!(west.link.is_some_and(|link| link.connected));
}

#[test]
fn a_new_node_under_a_child_pulls_entries_that_name_it() {
    let mut net = three_levels();
    net.publish("late", Target::Subtrees(vec!["us-east".into()]), b"late");
    assert!(net.keys("us").is_empty());
    net.add("us-east", Some("us"));
    net.advance(INVENTORY_COALESCE * 2);
    assert!(net.keys("us").contains("late"));
    assert!(net.keys("us-east").contains("late"));
}

#[test]
fn a_child_cannot_speak_for_another_subtree() {
    let mut net = three_levels();
    let now = net.now();
    let us_link = net["us"].link().unwrap_or_default();
    let forged = node_record("eu-west", Role::Relay, "us");
    if let Some(root) = net.core_mut("root") {
        root.handle_child_message(
            now,
            us_link,
            UpMessage::Inventory(relaymesh_protocol::InventoryUpdate::Delta {
                upserts: vec![forged],
                removals: vec!["eu-west".into(), "eu".into()],
            }),
        );
    }
    net.run();
    let west = net.record("root", "eu-west").expect("still there");
    assert_eq!(west.parent.as_deref(), Some("eu"));
    assert!(net.record("root", "eu").is_some());
}

#[test]
fn an_agent_speaks_only_for_itself_and_cannot_change_its_role() {
    let mut net = three_levels();
    net.add_agent("edge", "eu", &[("region", "eu")]);
    net.advance(INVENTORY_COALESCE * 2);
    let now = net.now();
    let edge_link = net["edge"].link().unwrap_or_default();
    // A cluster below the agent, and the agent claiming to be a relay under
    // another parent.
    let forged = vec![
        node_record("edge", Role::Relay, "root"),
        node_record("ghost", Role::Agent, "edge"),
    ];
    if let Some(eu) = net.core_mut("eu") {
        eu.handle_child_message(
            now,
            edge_link,
            UpMessage::Inventory(relaymesh_protocol::InventoryUpdate::Delta {
                upserts: forged,
                removals: vec![],
            }),
        );
    }
    net.run();
    net.advance(INVENTORY_COALESCE * 2);
    for at in ["eu", "root"] {
        assert!(net.record(at, "ghost").is_none(), "{at} knows the ghost");
        let edge = net.record(at, "edge").expect("the agent is known");
        assert_eq!(edge.role, Role::Agent, "{at}: the certificate's role");
        assert_eq!(edge.parent.as_deref(), Some("eu"), "{at}: the real parent");
    }
}

#[test]
fn a_delta_that_does_not_follow_asks_for_a_snapshot() {
    let mut net = three_levels();
    net.publish("a", Target::Everywhere, b"a");
    let now = net.now();
    if let Some(node) = net.core_mut("us") {
        node.handle_parent_message(
            now,
            DownMessage::Delta {
                base: 999,
                revision: 1000,
                changes: vec![],
            },
        );
        assert!(matches!(node.poll_action(), Some(Action::Persist(_))));
        assert_eq!(node.poll_action(), Some(Action::ReconnectParent));
        assert_eq!(node.hello().resume, None);
    }
    net.disconnect("us");
    net.connect("us");
    assert_eq!(net.keys("us"), net.keys("root"));
}

/// root ─┬─ eu ─┬─ eu-west ── agents e1 (zone a), e2 (zone b)
///       │      └─ agent e3 (zone a)
///       └─ us ── agents u1, u2, u3 (zone c)
fn fleet() -> Net {
    let mut net = three_levels();
    net.add_agent("e1", "eu-west", &[("region", "eu"), ("zone", "a")]);
    net.add_agent("e2", "eu-west", &[("region", "eu"), ("zone", "b")]);
    net.add_agent("e3", "eu", &[("region", "eu"), ("zone", "a")]);
    for name in ["u1", "u2", "u3"] {
        net.add_agent(name, "us", &[("region", "us"), ("zone", "c")]);
    }
    // Inventory climbs one level per coalescing period.
    net.settle();
    net
}

fn placement(key: &str, target: relaymesh_protocol::PlacementTarget) -> SliceEntry {
    SliceEntry {
        key: key.into(),
        target: Target::Placement(target),
        bundles: vec![],
        body: vec![],
        serial: 0,
        signature: Vec::new(),
    }
}

fn region(value: &str) -> Option<relaymesh_protocol::LabelSelector> {
    Some(relaymesh_protocol::LabelSelector {
        match_labels: [("region".to_string(), value.to_string())].into(),
        match_expressions: vec![],
    })
}

fn any_cluster() -> Option<relaymesh_protocol::LabelSelector> {
    Some(relaymesh_protocol::LabelSelector::default())
}

fn agents_with(net: &Net, key: &str) -> BTreeSet<String> {
    net.nodes()
        .filter(|node| node.role() == Role::Agent)
        .filter(|node| node.holds(key))
        .map(|node| node.name().to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A placement target that selects every cluster.
fn all_clusters() -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: Some(relaymesh_protocol::LabelSelector::default()),
        ..Default::default()
    }
}

/// One cluster's status: ready.
fn ready() -> relaymesh_protocol::PlacementStatus {
    relaymesh_protocol::PlacementStatus {
        counts: relaymesh_protocol::PhaseCounts {
            ready: 1,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn upsert_at_root(net: &mut Net, entry: SliceEntry) {
    net.0.upsert_at_root(entry, &[]).expect("signed and added");
}

/// The fleet with placement `key` on every cluster, each reporting it
/// ready.
fn ready_fleet(key: &str) -> Net {
    let mut net = fleet();
    upsert_at_root(&mut net, placement(key, all_clusters()));
    let now = net.now();
    for agent in ["e1", "e2", "e3", "u1", "u2", "u3"] {
        net.core_mut(agent)
            .expect("an agent")
            .set_own_status(now, key, Some(ready()));
    }
    net
}

/// Runs the net 20 ms at a time, checking `each` at every step, until
/// `done` (at most 200 steps, or the test fails naming `what`).
fn step_until(
    net: &mut Net,
    what: &str,
    mut each: impl FnMut(&Net, usize),
    done: impl Fn(&Net) -> bool,
) {
    for step in 0..200 {
        each(net, step);
        if done(net) {
            return;
        }
        net.advance(std::time::Duration::from_millis(20));
    }
    panic!("{what} did not happen in 200 steps");
}

#[test]
fn placements_resolve_level_by_level_to_exactly_the_right_clusters() {
    let mut net = fleet();
    let by_label = relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/eu", by_label));
    assert_eq!(
        agents_with(&net, "placement/shop/eu"),
        set(&["e1", "e2", "e3"])
    );
    assert!(
        net.keys("us").is_empty(),
        "us has no eu cluster and gets nothing"
    );

    let by_name = relaymesh_protocol::PlacementTarget {
        names: vec!["e2".into(), "u3".into()],
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/named", by_name));
    assert_eq!(
        agents_with(&net, "placement/shop/named"),
        set(&["e2", "u3"])
    );

    let bounded = relaymesh_protocol::PlacementTarget {
        selector: any_cluster(),
        max_clusters: Some(3),
        spread_by: Some("region".into()),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/three", bounded));
    let chosen = agents_with(&net, "placement/shop/three");
    assert_eq!(chosen.len(), 3, "{chosen:?}");
    let eu = chosen.iter().filter(|n| n.starts_with('e')).count();
    assert!(
        (1..=2).contains(&eu),
        "spread over both regions: {chosen:?}"
    );

    // The root's count of what each selects is the clusters that got it,
    // and the sum of its children's parts.
    for key in [
        "placement/shop/eu",
        "placement/shop/named",
        "placement/shop/three",
    ] {
        let root = net.0["root"].core();
        let parts: u64 = root.placement_parts(key).iter().map(|p| p.selected).sum();
        let got = u64::try_from(agents_with(&net, key).len()).expect("small");
        assert_eq!(root.placement_selected(key), Some(got), "{key}");
        assert_eq!(parts, got, "{key}");
    }
}

#[test]
fn a_new_cluster_does_not_move_existing_assignments() {
    let mut net = fleet();
    let bounded = relaymesh_protocol::PlacementTarget {
        selector: any_cluster(),
        max_clusters: Some(2),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/two", bounded));
    let before = agents_with(&net, "placement/shop/two");
    assert_eq!(before.len(), 2);
    net.add_agent("u4", "us", &[("region", "us"), ("zone", "c")]);
    net.add_agent("e4", "eu-west", &[("region", "eu"), ("zone", "a")]);
    net.settle();
    assert_eq!(agents_with(&net, "placement/shop/two"), before);
}

#[test]
fn a_placement_follows_a_cluster_that_appears_later() {
    let mut net = fleet();
    let target = relaymesh_protocol::PlacementTarget {
        selector: region("ap"),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/ap", target));
    assert!(agents_with(&net, "placement/shop/ap").is_empty());
    net.add_agent("a1", "us", &[("region", "ap")]);
    net.settle();
    assert_eq!(agents_with(&net, "placement/shop/ap"), set(&["a1"]));
    assert!(!net.keys("eu").contains("placement/shop/ap"));
}

#[test]
fn status_merges_up_the_tree_and_disconnected_clusters_count_offline() {
    let mut net = fleet();
    let target = relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/eu", target));
    let now = net.now();
    for (agent, ready) in [("e1", true), ("e2", false), ("e3", true)] {
        let counts = relaymesh_protocol::PhaseCounts {
            ready: u64::from(ready),
            failed: u64::from(!ready),
            ..Default::default()
        };
        let message = (!ready).then(|| format!("{agent}: Deployment shop/web: image pull failed"));
        let failing = message
            .iter()
            .map(|message| relaymesh_protocol::FailingCluster {
                cluster: agent.into(),
                message: message.clone(),
            })
            .collect();
        if let Some(node) = net.core_mut(agent) {
            let status = relaymesh_protocol::PlacementStatus {
                counts,
                message,
                failing,
                ..relaymesh_protocol::PlacementStatus::default()
            };
            node.set_own_status(now, "placement/shop/eu", Some(status));
        }
    }
    net.settle();
    let status = net["root"]
        .core()
        .placement_status("placement/shop/eu")
        .expect("the root has a status");
    assert_eq!((status.counts.ready, status.counts.failed), (2, 1));
    assert!(status.message.is_some_and(|m| m.starts_with("e2:")));
    let failing: Vec<&str> = status.failing.iter().map(|f| f.cluster.as_str()).collect();
    assert_eq!(failing, ["e2"]);

    net.disconnect("e1");
    net.settle();
    let status = net["root"]
        .core()
        .placement_status("placement/shop/eu")
        .expect("the root has a status");
    assert_eq!(
        (
            status.counts.ready,
            status.counts.failed,
            status.counts.offline
        ),
        (1, 1, 1)
    );
    // An offline cluster is not named as failing on what it said last.
    net.disconnect("e2");
    net.settle();
    let status = net["root"].core().placement_status("placement/shop/eu");
    let status = status.expect("the root has a status");
    assert_eq!((status.counts.failed, status.counts.offline), (0, 2));
    assert!(status.failing.is_empty(), "{:?}", status.failing);
}

#[test]
fn a_child_resuming_after_a_placement_changed_gets_its_cut_not_the_whole_entry() {
    // Found by the reconnect-storm benchmark: a placement naming one
    // cluster under us changed while eu was down; eu resumed with a delta
    // and got the whole entry, asked the root for its bundle, and was
    // refused for ever (the bundle is not in eu's cut), its agents too.
    let mut net = fleet();
    let on_u1 = || relaymesh_protocol::PlacementTarget {
        names: vec!["u1".into()],
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/busy", on_u1()));
    net.settle();
    assert_eq!(agents_with(&net, "placement/shop/busy"), set(&["u1"]));
    assert!(!net.keys("eu").contains("placement/shop/busy"));

    net.disconnect("eu");
    let mut changed = placement("placement/shop/busy", on_u1());
    changed.body = b"revision 2".to_vec();
    upsert_at_root(&mut net, changed);
    net.connect("eu");
    net.settle();
    assert!(
        !net.keys("eu").contains("placement/shop/busy"),
        "eu resumed with a delta that must hold only what its cut gives it"
    );
    assert_eq!(agents_with(&net, "placement/shop/busy"), set(&["u1"]));
}

#[test]
fn a_child_that_acknowledged_the_head_resumes_with_only_up_to_date() {
    // Issue 35: every resumed link was sent every placement's cut again,
    // the children that held them all too.
    let mut net = fleet();
    let in_eu = relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement("placement/shop/eu", in_eu));
    upsert_at_root(&mut net, placement("placement/shop/all", all_clusters()));
    net.settle();
    assert_eq!(
        agents_with(&net, "placement/shop/eu"),
        set(&["e1", "e2", "e3"])
    );
    let changes = |net: &Net, node: &str| net[node].traffic().slice_changes_from_parent;
    for child in ["eu", "eu-west", "e3", "u1"] {
        net.disconnect(child);
        let before = changes(&net, child);
        net.connect(child);
        assert_eq!(changes(&net, child), before, "{child} was sent changes");
    }
    // Nor after their parent restarted: its first cuts are the ones its
    // children hold (their digests were persisted).
    net.restart("eu");
    let before: Vec<u64> = ["eu-west", "e3"]
        .iter()
        .map(|child| changes(&net, child))
        .collect();
    for node in ["eu", "eu-west", "e3"] {
        net.connect(node);
    }
    net.settle();
    let after: Vec<u64> = ["eu-west", "e3"]
        .iter()
        .map(|child| changes(&net, child))
        .collect();
    assert_eq!(after, before);
    assert_eq!(
        agents_with(&net, "placement/shop/all"),
        set(&["e1", "e2", "e3", "u1", "u2", "u3"])
    );
}

#[test]
fn a_relay_that_alters_entries_is_refused_below_and_raises_an_alarm() {
    let alterations: [Alteration; 4] = [
        |entry| entry.body = b"something else".to_vec(),
        |entry| entry.bundles = vec![BundleId::of(b"another bundle")],
        |entry| entry.target = Target::Everywhere,
        |entry| entry.signature.clear(),
    ];
    for alter in alterations {
        let mut net = three_levels();
        net.publish(
            "bundle/a",
            Target::Subtrees(vec!["eu-west".into()]),
            b"first",
        );
        let first = net["eu-west"].core().entries().cloned().collect::<Vec<_>>();
        assert_eq!(first.len(), 1);
        net.tamper("eu", alter);
        net.publish(
            "bundle/a",
            Target::Subtrees(vec!["eu-west".into()]),
            b"second",
        );
        // eu took the root's version; eu-west refused eu's alteration of it
        // and kept the version it had.
        assert_eq!(
            net["eu"].core().entries().next().map(|e| e.serial),
            Some(net.serial())
        );
        let held: Vec<_> = net["eu-west"].core().entries().cloned().collect();
        assert_eq!(held, first);
        net.settle();
        let alarm = net.record("root", "eu-west").expect("eu-west at the root");
        assert_eq!(alarm.refused_entries, 1);
        assert_eq!(net.record("root", "eu").expect("eu").refused_entries, 0);
    }
}

#[test]
fn an_older_signed_version_cannot_be_replayed() {
    let mut net = three_levels();
    net.publish("bundle/a", Target::Everywhere, b"first");
    let old = net["eu-west"]
        .core()
        .entries()
        .next()
        .cloned()
        .expect("held");
    net.publish("bundle/a", Target::Everywhere, b"second");
    let new = net["eu-west"]
        .core()
        .entries()
        .next()
        .cloned()
        .expect("held");
    assert!(new.serial > old.serial);
    // eu replays the first version, validly signed but older.
    let now = net.now();
    if let Some(node) = net.core_mut("eu-west") {
        let revision = node.hello().resume.map_or(0, |resume| resume.revision);
        node.handle_parent_message(
            now,
            DownMessage::Delta {
                base: revision,
                revision: revision + 1,
                changes: vec![SliceChange::Upsert(old)],
            },
        );
    }
    net.run();
    let held = net["eu-west"]
        .core()
        .entries()
        .next()
        .cloned()
        .expect("held");
    assert_eq!(held, new);
    net.settle();
    assert_eq!(
        net.record("root", "eu-west")
            .expect("known")
            .refused_entries,
        1
    );
}

/// The root's trust entry naming `token_keys`.
fn trust_entry(token_keys: Vec<Vec<u8>>) -> SliceEntry {
    relaymesh_protocol::MeshTrust {
        anchors: Vec::new(),
        signer_key: [0; 32],
        token_keys,
    }
    .to_entry()
    .expect("encodes")
}

#[test]
fn the_root_key_rotates_through_the_trust_entry_and_the_old_key_is_refused_after() {
    let mut net = three_levels();
    let new = crate::seal::generate_key().expect("a key");
    let old_public = net.root_key().to_vec();
    let label = |net: &Net, name: &str| {
        net.record("root", name).and_then(|record| {
            record
                .labels
                .get(crate::TOKEN_KEYS_LABEL)
                .map(str::to_string)
        })
    };
    net.settle();
    assert_eq!(label(&net, "eu-west"), None, "no label before any trust");

    // Start: the trust names both keys, signed with the old one.
    upsert_at_root(
        &mut net,
        trust_entry(vec![old_public.clone(), new.1.clone()]),
    );
    net.settle();
    let both = format!(
        "{}.{}",
        crate::trust::short_hex(&old_public),
        crate::trust::short_hex(&new.1)
    );
    assert_eq!(label(&net, "eu-west"), Some(both));

    // The root signs with the new key: every node takes what it signs.
    let old = net.replace_root_key(new.clone());
    net.publish("bundle/a", Target::Everywhere, b"first");
    let held = |net: &Net| {
        net["eu-west"]
            .core()
            .entry("bundle/a")
            .map(|entry| entry.bundles.clone())
    };
    assert_eq!(held(&net), Some(vec![BundleId::of(b"first")]));

    // Finish: the new key alone. An entry the old key signs is refused.
    upsert_at_root(&mut net, trust_entry(vec![new.1.clone()]));
    net.settle();
    assert_eq!(
        label(&net, "eu-west"),
        Some(crate::trust::short_hex(&new.1))
    );
    net.replace_root_key(old);
    net.publish("bundle/a", Target::Everywhere, b"second");
    assert_eq!(held(&net), Some(vec![BundleId::of(b"first")]));
    net.settle();
    assert_eq!(net.record("root", "eu").expect("eu").refused_entries, 1);
}

fn revoke_at_root(net: &mut Net, name: &str) -> relaymesh_protocol::Revocation {
    let revocation = relaymesh_protocol::Revocation::Node {
        name: name.into(),
        at_unix: net.now().unix_ms / 1000,
    };
    upsert_at_root(net, revocation.to_entry().expect("encodes"));
    net.settle();
    revocation
}

#[test]
fn a_revoked_relay_is_cut_off_and_leaves_the_inventory_with_its_subtree() {
    let mut net = fleet();
    assert!(net.record("root", "e1").is_some());
    let revocation = revoke_at_root(&mut net, "eu-west");

    // eu closed eu-west's link; e1 and e2 are still below eu-west, which
    // no longer hears from the tree.
    assert_eq!(net["eu-west"].link(), None, "eu-west is cut off");
    assert!(net["e1"].link().is_some());
    for at in ["root", "eu"] {
        for gone in ["eu-west", "e1", "e2"] {
            assert!(net.record(at, gone).is_none(), "{at} still knows {gone}");
        }
        assert!(net.record(at, "e3").is_some(), "{at} forgot e3");
    }
    // Every relay and agent that still hears from the root was told, so
    // its daemon refuses the node's certificates from now on.
    for name in ["root", "eu", "us", "e3", "u1"] {
        assert_eq!(net[name].revocations(), &[revocation.clone()][..], "{name}");
    }
    assert!(net["eu-west"].revocations().is_empty());
    // A placement no longer counts the clusters that left.
    upsert_at_root(
        &mut net,
        placement(
            "placement/shop/web",
            relaymesh_protocol::PlacementTarget {
                selector: region("eu"),
                ..Default::default()
            },
        ),
    );
    net.settle();
    assert_eq!(agents_with(&net, "placement/shop/web"), set(&["e3"]));
}

#[test]
fn a_direct_child_of_the_root_is_cut_off_by_the_root_itself() {
    let mut net = three_levels();
    revoke_at_root(&mut net, "us");
    assert_eq!(net["us"].link(), None);
    assert!(net.record("root", "us").is_none());
    assert!(net.record("root", "eu-west").is_some());
    // Restarting the root keeps it forgotten: the removal was persisted.
    net.restart("root");
    assert!(net.record("root", "us").is_none());
}
mod drains;
mod handover;
mod labels;
mod limits;
mod link_stats;
mod lost;
mod moves;
mod parents;
mod queries;
mod status_merges;
