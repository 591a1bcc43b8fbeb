//! Moving a node to another parent on the root's order: the old side lets
//! go first, the new side's claim waits for it, the root settles the move
//! only then, and no summary on the way counts the node twice.

use super::*;

fn total(net: &Net, node: &str, key: &str) -> u64 {
    let Some(status) = net[node].core().placement_status(key) else {
        return 0;
    };
    let counts = status.counts;
    counts.pending + counts.applied + counts.ready + counts.failed + counts.offline
}

#[test]
fn a_moved_agent_is_never_counted_twice_and_settles_under_its_new_parent() {
    let key = "placement/shop/all";
    let mut net = ready_fleet(key);
    net.settle();
    assert_eq!(total(&net, "root", key), 6);
    assert!(net.keys("e1").contains(key) && net.keys("u1").contains(key));

    net.move_node("e1", "us").expect("the move is signed");
    // Every summary on the way, at every relay, at every step.
    let mut steps = 0;
    loop {
        for relay in ["root", "eu", "eu-west", "us"] {
            let below = match relay {
                "root" => 6,
                "eu" => 3,
                "eu-west" => 2,
                _ => 4,
            };
            let counted = total(&net, relay, key);
            assert!(
                counted <= below,
                "{relay} counts {counted} clusters of at most {below} at step {steps}"
            );
        }
        // The moved agent never loses its placement on the way: its new
        // parent's first snapshot may come before it cut the placement for
        // it, and a removal would make its agent prune the workload.
        assert!(
            net.keys("e1").contains(key),
            "e1 lost its placement at step {steps}"
        );
        let settled = !net["e1"].core().status_held()
            && net["root"]
                .core()
                .nodes()
                .iter()
                .any(|node| node.name == "e1" && node.parent.as_deref() == Some("us"));
        if settled && total(&net, "root", key) == 6 {
            break;
        }
        steps += 1;
        assert!(steps < 200, "the move did not settle");
        net.advance(std::time::Duration::from_millis(20));
    }
    net.settle();
    let status = net["root"].core().placement_status(key).expect("status");
    assert_eq!((status.counts.ready, status.counts.offline), (6, 0));
    assert_eq!(total(&net, "us", key), 4);
    assert_eq!(total(&net, "eu-west", key), 1);
    assert!(net["eu-west"]
        .core()
        .nodes()
        .iter()
        .all(|node| node.name != "e1"));
    assert!(net["eu"]
        .core()
        .nodes()
        .iter()
        .all(|node| node.name != "e1"));
    let settled = net["root"]
        .core()
        .entries()
        .find_map(|entry| relaymesh_protocol::Move::from_entry(entry)?.ok())
        .expect("the move stays in the slice");
    assert_eq!(settled.state, relaymesh_protocol::MoveState::Settled);
    // The moved agent kept its slice: the placement is still there.
    assert!(
        net.keys("e1").contains(key),
        "us {:?} e1 {:?}",
        net.keys("us"),
        net.keys("e1")
    );
}

#[test]
fn a_claim_on_a_node_another_child_holds_waits_until_it_lets_go() {
    let mut net = fleet();
    net.move_node("e1", "us").expect("the move is signed");
    // Right after e1 dialled us, us reports e1 to the root before eu-west's
    // report that it let go has climbed through eu: the root must not move
    // e1 to us yet, and must once eu reports it gone.
    let mut saw_claim_first = false;
    for _ in 0..200 {
        let root_view = net["root"]
            .core()
            .nodes()
            .into_iter()
            .find(|node| node.name == "e1")
            .and_then(|node| node.parent);
        let eu_holds = net["eu"]
            .core()
            .nodes()
            .iter()
            .any(|node| node.name == "e1");
        if eu_holds && root_view.as_deref() == Some("us") {
            panic!("the root took us's word for e1 while eu still held it");
        }
        saw_claim_first |= eu_holds && net["us"].core().nodes().iter().any(|n| n.name == "e1");
        if root_view.as_deref() == Some("us") {
            break;
        }
        net.advance(std::time::Duration::from_millis(20));
    }
    assert!(saw_claim_first, "us never held e1 while eu still did");
    assert!(net["root"]
        .core()
        .nodes()
        .iter()
        .any(|node| node.name == "e1" && node.parent.as_deref() == Some("us")));
}

#[test]
fn a_child_the_root_moves_away_is_forgotten_when_it_disconnects_even_without_leaving() {
    let mut net = fleet();
    // A relay that does not exist: e1 cannot join it, so it stays, as an
    // agent that crashed before its `Leaving` got out would.
    net.move_node("e1", "nowhere").expect("the move is signed");
    assert!(net["eu-west"]
        .core()
        .nodes()
        .iter()
        .any(|node| node.name == "e1"));
    net.disconnect("e1");
    net.settle();
    for relay in ["eu-west", "eu", "root"] {
        assert!(
            net[relay]
                .core()
                .nodes()
                .iter()
                .all(|node| node.name != "e1"),
            "{relay} still holds e1"
        );
    }
    // Should it come back, it is a child again.
    net.connect("e1");
    net.settle();
    assert!(net["root"]
        .core()
        .nodes()
        .iter()
        .any(|node| node.name == "e1"));
}

#[test]
fn a_moved_relay_takes_its_clusters_along_counted_once_at_every_step() {
    let key = "placement/shop/all";
    let mut net = ready_fleet(key);
    net.settle();
    assert_eq!(total(&net, "root", key), 6);

    net.move_node("eu-west", "us").expect("the move is signed");
    step_until(
        &mut net,
        "the move's settling",
        |net, step| {
            for (relay, below) in [("root", 6), ("eu", 3), ("us", 5)] {
                let counted = total(net, relay, key);
                assert!(
                    counted <= below,
                    "{relay} counts {counted} clusters of at most {below} at step {step}"
                );
            }
            for agent in ["e1", "e2"] {
                assert!(
                    net.keys(agent).contains(key),
                    "{agent} lost its placement at step {step}"
                );
            }
        },
        |net| {
            !net["eu-west"].core().status_held()
                && net
                    .record("root", "eu-west")
                    .and_then(|record| record.parent)
                    == Some("us".to_string())
                && total(net, "root", key) == 6
        },
    );
    net.settle();
    let status = net["root"].core().placement_status(key).expect("status");
    assert_eq!((status.counts.ready, status.counts.offline), (6, 0));
    assert_eq!(total(&net, "us", key), 5);
    assert_eq!(total(&net, "eu", key), 1);
    // The root sees the whole subtree under us, eu none of it.
    for node in ["e1", "e2"] {
        assert_eq!(
            net.record("root", node).and_then(|record| record.parent),
            Some("eu-west".to_string())
        );
        assert!(net.record("us", node).is_some(), "us holds {node}");
        assert!(net.record("eu", node).is_none(), "eu forgot {node}");
        // Its link to eu-west stayed up, and it knows the relays above
        // it now (the entries that name one of them concern it).
        assert_eq!(net[node].core().ancestors(), ["root", "us", "eu-west"]);
        // Its certificate's chain must lead through them: renewed, without
        // a join.
        assert!(net[node].renewals() >= 1, "{node} renewed");
    }
    for node in ["u1", "root", "us"] {
        assert_eq!(net[node].renewals(), 0, "{node}'s ancestors did not change");
    }
}
