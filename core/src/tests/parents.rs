//! Re-parenting among candidate parents when a parent dies: the node keeps
//! its slice, the relays above take the new side's record once the old side
//! lost the node, the root names the new parent in the grant (and only
//! then does the node report status), and the dead parent, back, forgets
//! the node. A node without a grant is not taken from its old side.

use super::*;

fn counts(net: &Net, node: &str, key: &str) -> relaymesh_protocol::PhaseCounts {
    net[node]
        .core()
        .placement_status(key)
        .map(|status| status.counts)
        .unwrap_or_default()
}

fn parent_at(net: &Net, at: &str, node: &str) -> Option<String> {
    net.record(at, node).and_then(|record| record.parent)
}

const KEY: &str = "placement/shop/all";

/// The fleet with every cluster ready for one placement, and e1 granted
/// eu-west and us as candidate parents.
fn granted_fleet() -> Net {
    let mut net = ready_fleet(KEY);
    net.grant_parents("e1", &["eu-west", "us"])
        .expect("the grant is signed");
    net.settle();
    let grant = net["root"].core().grant("e1").expect("the root holds it");
    assert_eq!(grant.current.as_deref(), Some("eu-west"), "settled at once");
    assert!(net["e1"].core().grant("e1").is_some(), "the node holds it");
    assert!(
        net["us"].core().grant("e1").is_some(),
        "so does a candidate"
    );
    net
}

/// eu-west dies: its links to eu and to its agents go down.
fn kill_eu_west(net: &mut Net) {
    for node in ["e1", "e2", "eu-west"] {
        net.disconnect(node);
    }
}

#[test]
fn an_agent_whose_parent_died_re_parents_to_a_candidate_keeping_its_slice() {
    let mut net = granted_fleet();
    assert_eq!(counts(&net, "root", KEY).ready, 6);
    kill_eu_west(&mut net);
    net.fail_over("e1", "us").expect("e1 dials us");
    let mut steps = 0;
    loop {
        assert!(
            net.keys("e1").contains(KEY),
            "e1 lost its placement at step {steps}"
        );
        let settled = parent_at(&net, "root", "e1").as_deref() == Some("us")
            && !net["e1"].core().status_held();
        if settled {
            break;
        }
        steps += 1;
        assert!(steps < 200, "the re-parenting did not settle");
        net.advance(std::time::Duration::from_millis(20));
    }
    net.settle();
    assert!(net.keys("e1").contains(KEY));
    // The dead eu-west's last report still counts e1; eu leaves it out, as
    // e1 counts under us now: every cluster once.
    let at_root = counts(&net, "root", KEY);
    assert_eq!(
        (at_root.ready, at_root.offline),
        (5, 1),
        "e2 offline, the rest ready: {at_root:?}"
    );
    let grant = net["root"].core().grant("e1").expect("the grant");
    assert_eq!(grant.current.as_deref(), Some("us"));
    // eu still holds e1 under the dead eu-west until the root's grant says
    // where it is: then it forgets it.
    assert_eq!(parent_at(&net, "eu", "e1"), None, "eu forgot e1");
    assert_eq!(counts(&net, "us", KEY).ready, 4, "e1 reports through us");

    // eu-west comes back from its store, still holding e1 as its child; the
    // root's grant makes it forget e1, so nothing counts e1 twice.
    net.restart("eu-west");
    net.connect("eu-west");
    net.connect("e2");
    net.settle();
    assert_eq!(parent_at(&net, "eu-west", "e1"), None, "eu-west forgot e1");
    assert_eq!(parent_at(&net, "root", "e1").as_deref(), Some("us"));
    let at_root = counts(&net, "root", KEY);
    assert_eq!(
        (at_root.ready, at_root.offline, at_root.pending),
        (6, 0, 0),
        "{at_root:?}"
    );
}

#[test]
fn every_cluster_counts_once_at_every_step_of_a_failover() {
    let mut net = granted_fleet();
    kill_eu_west(&mut net);
    net.fail_over("e1", "us").expect("e1 dials us");
    for step in 0..200 {
        let at_root = counts(&net, "root", KEY);
        let total =
            at_root.pending + at_root.applied + at_root.ready + at_root.failed + at_root.offline;
        assert!(
            total <= 6,
            "the root counts {total} of 6 clusters at step {step}: {at_root:?}"
        );
        net.advance(std::time::Duration::from_millis(20));
    }
    let at_root = counts(&net, "root", KEY);
    assert_eq!((at_root.ready, at_root.offline), (5, 1), "{at_root:?}");
}

#[test]
fn a_node_without_a_grant_is_not_taken_from_its_old_side() {
    let mut net = granted_fleet();
    kill_eu_west(&mut net);
    // e2 has no grant: us (as a compromised relay could) reports it anyway.
    net.fail_over("e2", "us").expect("e2 dials us");
    net.settle();
    assert_eq!(parent_at(&net, "us", "e2").as_deref(), Some("us"));
    assert_eq!(
        parent_at(&net, "root", "e2").as_deref(),
        Some("eu-west"),
        "the root keeps e2 where it was"
    );
    assert!(
        net["root"].core().grant("e2").is_none(),
        "and grants nothing"
    );
}

#[test]
fn a_claim_waits_while_the_old_side_still_has_the_node() {
    let mut net = granted_fleet();
    // e1 dials us while its link to eu-west is still up (a partition that
    // only the node sees): the root keeps it under eu-west.
    net.fail_over("e1", "us").expect("e1 dials us");
    assert!(net["eu-west"].core().nodes().iter().any(|n| n.name == "e1"));
    // fail_over disconnected e1 from eu-west first, as the daemon's uplink
    // does: eu-west reports it disconnected, and the root takes us's record.
    net.settle();
    assert_eq!(parent_at(&net, "root", "e1").as_deref(), Some("us"));
    assert!(
        parent_at(&net, "eu-west", "e1").is_none(),
        "eu-west forgot e1 on the root's grant"
    );
}

#[test]
fn a_relay_whose_parent_died_re_parents_with_its_clusters_counted_once() {
    let mut net = ready_fleet(KEY);
    net.grant_parents("eu-west", &["eu", "us"])
        .expect("the grant is signed");
    net.settle();
    // eu dies: its links to the root, to eu-west and to e3 go down.
    for node in ["eu", "eu-west", "e3"] {
        net.disconnect(node);
    }
    net.fail_over("eu-west", "us").expect("eu-west dials us");
    step_until(
        &mut net,
        "the re-parenting's settling",
        |net, step| {
            let at_root = counts(net, "root", KEY);
            let counted = at_root.pending
                + at_root.applied
                + at_root.ready
                + at_root.failed
                + at_root.offline;
            assert!(counted <= 6, "the root counts {counted} at step {step}");
            for agent in ["e1", "e2"] {
                assert!(
                    net.keys(agent).contains(KEY),
                    "{agent} lost its placement at step {step}"
                );
            }
        },
        |net| {
            parent_at(net, "root", "eu-west").as_deref() == Some("us")
                && !net["eu-west"].core().status_held()
        },
    );
    net.settle();
    // The dead eu's last report still counts e1 and e2; the root leaves
    // them out, as they count under us now: every cluster once.
    let at_root = counts(&net, "root", KEY);
    assert_eq!(
        (at_root.ready, at_root.offline),
        (5, 1),
        "e3 offline, the rest ready: {at_root:?}"
    );
    assert_eq!(
        counts(&net, "us", KEY).ready,
        5,
        "e1 and e2 report through us"
    );
    for node in ["e1", "e2"] {
        assert_eq!(parent_at(&net, "root", node).as_deref(), Some("eu-west"));
        assert!(net.record("us", node).is_some(), "us holds {node}");
    }
    let grant = net["root"].core().grant("eu-west").expect("the grant");
    assert_eq!(grant.current.as_deref(), Some("us"));
}
