//! Make-before-break for count-bounded placements: when a recut moves a
//! share from one child to another, the relay that decided it keeps the
//! shrunk child's copy until the grown one reports its clusters ready, or
//! until [`crate::HANDOVER_TIMEOUT`].

use std::time::Duration;

use relaymesh_protocol::query::{Answer, Query};

use super::*;

const KEY: &str = "placement/shop/gold";

fn one_gold() -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: Some(relaymesh_protocol::LabelSelector {
            match_labels: [("tier".to_string(), "gold".to_string())].into(),
            match_expressions: vec![],
        }),
        max_clusters: Some(1),
        ..Default::default()
    }
}

fn tier(net: &mut Net, node: &str, value: Option<&str>) {
    let change = relaymesh_protocol::ClusterLabels {
        node: node.into(),
        set: value
            .map(|value| [("tier".to_string(), value.to_string())].into())
            .unwrap_or_default(),
        remove: if value.is_none() {
            vec!["tier".into()]
        } else {
            vec![]
        },
        annotations: Default::default(),
    };
    upsert_at_root(net, change.to_entry().expect("encodes"));
}

/// Lets labels and inventory climb and placements be cut, but stops well
/// short of the handover timeout (which `settle` would run on to).
fn settle_briefly(net: &mut Net) {
    for _ in 0..50 {
        net.advance(Duration::from_millis(200));
    }
}

fn report_ready(net: &mut Net, agent: &str, key: &str) {
    let now = net.now();
    net.core_mut(agent)
        .expect("an agent")
        .set_own_status(now, key, Some(ready()));
    settle_briefly(net);
}

/// What relay `at` answers the root of how it split the placement: each
/// child's quota and whether it is kept for a handover.
fn split_at(net: &mut Net, at: &str) -> Vec<(String, u32, bool)> {
    let id = net
        .query("root", at, Query::Split { key: KEY.into() })
        .expect("the root");
    match net["root"].answer(id).cloned() {
        Some(Answer::Split {
            children, more: 0, ..
        }) => children
            .into_iter()
            .map(|cut| {
                let quota = cut.quota.map_or(0, |quota| quota.total);
                (cut.child, quota, cut.kept)
            })
            .collect(),
        other => panic!("expected a split, got {other:?}"),
    }
}

/// e1 holds the placement, ready; `others` are gold too.
fn gold_on_e1(others: &[&str]) -> Net {
    let mut net = fleet();
    tier(&mut net, "e1", Some("gold"));
    settle_briefly(&mut net);
    upsert_at_root(&mut net, placement(KEY, one_gold()));
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, KEY), set(&["e1"]));
    report_ready(&mut net, "e1", KEY);
    for other in others {
        tier(&mut net, other, Some("gold"));
    }
    settle_briefly(&mut net);
    assert_eq!(
        agents_with(&net, KEY),
        set(&["e1"]),
        "a bound keeps its clusters"
    );
    net
}

#[test]
fn a_move_inside_one_relay_keeps_the_old_copy_until_the_new_one_is_ready() {
    let mut net = gold_on_e1(&["e2"]);

    tier(&mut net, "e1", None);
    settle_briefly(&mut net);
    assert_eq!(
        agents_with(&net, KEY),
        set(&["e1", "e2"]),
        "e1 keeps its copy while e2 starts"
    );
    let at_root = net["root"].core().placement_status(KEY).expect("status");
    assert_eq!(
        at_root.counts.ready, 0,
        "the leaving cluster no longer counts: {at_root:?}"
    );
    assert_eq!(net["root"].core().placement_selected(KEY), Some(1));

    assert_eq!(
        split_at(&mut net, "eu-west"),
        [("e1".to_string(), 1, true), ("e2".to_string(), 1, false)],
        "eu-west says it keeps e1 for the handover"
    );

    report_ready(&mut net, "e2", KEY);
    assert_eq!(agents_with(&net, KEY), set(&["e2"]));
    assert_eq!(
        split_at(&mut net, "eu-west"),
        [("e2".to_string(), 1, false)]
    );
    // As e1's agent does once its copy is pruned.
    let now = net.now();
    net.core_mut("e1")
        .expect("an agent")
        .set_own_status(now, KEY, None);
    settle_briefly(&mut net);
    let at_root = net["root"].core().placement_status(KEY).expect("status");
    assert_eq!(at_root.counts.ready, 1, "{at_root:?}");
}

#[test]
fn a_move_across_subtrees_is_held_by_the_relay_that_decides_it() {
    let mut net = gold_on_e1(&["u1"]);

    tier(&mut net, "e1", None);
    settle_briefly(&mut net);
    assert_eq!(
        agents_with(&net, KEY),
        set(&["e1", "u1"]),
        "e1 keeps its copy: its relays cannot fill their quota and the root holds them"
    );

    report_ready(&mut net, "u1", KEY);
    assert_eq!(agents_with(&net, KEY), set(&["u1"]));
}

#[test]
fn a_changed_selector_moves_a_bounded_placement_make_before_break() {
    let mut net = gold_on_e1(&[]);
    tier(&mut net, "u2", Some("silver"));
    settle_briefly(&mut net);

    let mut silver = one_gold();
    if let Some(selector) = &mut silver.selector {
        selector.match_labels = [("tier".to_string(), "silver".to_string())].into();
    }
    upsert_at_root(&mut net, placement(KEY, silver));
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, KEY), set(&["e1", "u2"]));

    report_ready(&mut net, "u2", KEY);
    assert_eq!(agents_with(&net, KEY), set(&["u2"]));
}

#[test]
fn a_replacement_that_never_gets_ready_ends_the_handover_at_its_timeout() {
    let mut net = gold_on_e1(&["e2"]);

    tier(&mut net, "e1", None);
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, KEY), set(&["e1", "e2"]));

    net.advance(crate::HANDOVER_TIMEOUT / 2);
    assert_eq!(agents_with(&net, KEY), set(&["e1", "e2"]), "not yet");
    net.advance(crate::HANDOVER_TIMEOUT / 2);
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, KEY), set(&["e2"]));
}

#[test]
fn shrinking_a_bound_drops_copies_at_once() {
    let mut net = gold_on_e1(&["e2", "u1"]);
    let mut two = one_gold();
    two.max_clusters = Some(2);
    upsert_at_root(&mut net, placement(KEY, two.clone()));
    settle_briefly(&mut net);
    let holders = agents_with(&net, KEY);
    assert_eq!(holders.len(), 2, "{holders:?}");

    upsert_at_root(&mut net, placement(KEY, one_gold()));
    settle_briefly(&mut net);
    assert_eq!(
        agents_with(&net, KEY).len(),
        1,
        "nothing replaces the dropped copy, so nothing waits"
    );
}

/// What the root publishes now of the handovers that are done.
fn finished_handovers(net: &mut Net) -> Vec<SliceEntry> {
    let now = net.now();
    net.core_mut("root")
        .expect("the root")
        .finished_handovers(now)
}

/// The root's side, for a placement without a bound: moved from eu to us,
/// the eu clusters keep it (named in the published target) until every us
/// cluster reports it ready, then drop it.
#[test]
fn an_unbounded_placement_moves_make_before_break_across_the_tree() {
    let key = "placement/shop/every";
    let mut net = fleet();
    let every_in = |value: &str| relaymesh_protocol::PlacementTarget {
        selector: region(value),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement(key, every_in("eu")));
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, key), set(&["e1", "e2", "e3"]));
    for agent in ["e1", "e2", "e3"] {
        report_ready(&mut net, agent, key);
    }

    // The spec now says us: the root publishes it with eu's clusters kept.
    let now = net.now();
    let root = net.core_mut("root").expect("the root");
    let published = root.hand_over(now, placement(key, every_in("us")));
    assert_eq!(root.handover_leaving(key), ["e1", "e2", "e3"]);
    upsert_at_root(&mut net, published);
    settle_briefly(&mut net);
    let everyone = set(&["e1", "e2", "e3", "u1", "u2", "u3"]);
    assert_eq!(
        agents_with(&net, key),
        everyone,
        "both, while us gets ready"
    );
    // What the placement's status is written from says so.
    let reports = net.0["root"].core().placement_reports("placement/");
    let report = &reports[key];
    assert_eq!(report.leaving, ["e1", "e2", "e3"]);
    assert_eq!(report.selected, 6);
    assert_eq!(report.status.counts.ready, 3);
    assert!(finished_handovers(&mut net).is_empty());

    // Deciding again while it hands over keeps the leaving clusters.
    let now = net.now();
    let again = net
        .core_mut("root")
        .expect("the root")
        .hand_over(now, placement(key, every_in("us")));
    upsert_at_root(&mut net, again);
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, key), everyone);

    // Two of three are not enough.
    for agent in ["u1", "u2"] {
        report_ready(&mut net, agent, key);
    }
    assert!(finished_handovers(&mut net).is_empty());
    report_ready(&mut net, "u3", key);
    let done = finished_handovers(&mut net);
    assert_eq!(done.len(), 1, "us is ready");
    for entry in done {
        upsert_at_root(&mut net, entry);
    }
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, key), set(&["u1", "u2", "u3"]));
    assert!(net
        .core_mut("root")
        .expect("the root")
        .handover_leaving(key)
        .is_empty());
}

#[test]
fn a_child_resuming_after_its_parent_restarted_gets_the_cut_the_restart_changed() {
    // A handover's holds are not persisted: a restarted eu-west no longer
    // keeps e1's copy. e1 resumes from a revision it acknowledged before
    // the restart; only eu-west's log says its cut changed since.
    let mut net = gold_on_e1(&["e2"]);
    tier(&mut net, "e1", None);
    settle_briefly(&mut net);
    assert_eq!(agents_with(&net, KEY), set(&["e1", "e2"]));
    // e1 acknowledges eu-west's head: nothing it was sent says more.
    net.publish("for-e1", Target::Subtrees(vec!["e1".into()]), b"x");
    settle_briefly(&mut net);
    let head = net["eu-west"].core().head();
    let position = net["e1"].persisted().parent_position;
    assert_eq!(position.map(|p| p.revision), Some(head));
    net.restart("eu-west");
    for node in ["eu-west", "e1", "e2"] {
        net.connect(node);
    }
    settle_briefly(&mut net);
    let relay = net["eu-west"].core();
    let entry = relay
        .entries()
        .find(|entry| entry.key == KEY)
        .expect("held");
    let given: BTreeSet<String> = ["e1", "e2"]
        .into_iter()
        .filter(|child| relay.entry_for_child(entry, child).is_some())
        .map(str::to_string)
        .collect();
    assert_eq!(given, set(&["e2"]), "the restart ended the hold");
    assert_eq!(agents_with(&net, KEY), given);
}
