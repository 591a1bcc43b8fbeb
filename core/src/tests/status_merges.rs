//! Each placement's merged status is kept as children report: a report
//! moves one child's part, it does not merge every child again; a new cut
//! makes the merge anew.

use super::*;

const AGENTS: usize = 300;
const KEY: &str = "placement/shop/web";

/// root ── 300 agents, every one holding and reporting [`KEY`] ready.
fn star() -> Net {
    let mut net = Net::new();
    net.add("root", None);
    for agent in 0..AGENTS {
        net.add_agent(&format!("a{agent:03}"), "root", &[("zone", "a")]);
    }
    assert!(net.settle(), "the star goes quiet");
    upsert_at_root(&mut net, placement(KEY, all_clusters()));
    let now = net.now();
    for agent in 0..AGENTS {
        let core = net.core_mut(&format!("a{agent:03}")).expect("an agent");
        core.set_own_status(now, KEY, Some(ready()));
    }
    assert!(net.settle());
    net
}

fn at_root(net: &Net) -> relaymesh_protocol::PlacementStatus {
    net["root"]
        .core()
        .placement_status(KEY)
        .expect("the root has a status")
}

#[test]
fn a_report_moves_one_childs_part_and_merges_no_other() {
    let mut net = star();
    assert_eq!(at_root(&net).counts.ready, AGENTS as u64);
    let merged_before = net["root"].core().status_parts_merged_anew();
    for round in 0..20u64 {
        let agent = format!("a{:03}", round * 7);
        let failed = relaymesh_protocol::PlacementStatus {
            counts: relaymesh_protocol::PhaseCounts {
                failed: 1,
                ..Default::default()
            },
            message: Some(format!("{agent}: image pull failed")),
            ..Default::default()
        };
        let now = net.now();
        let core = net.core_mut(&agent).expect("an agent");
        core.set_own_status(now, KEY, Some(failed));
        assert!(net.settle());
        let status = at_root(&net);
        assert_eq!(status.counts.failed, round + 1);
        assert_eq!(status.counts.ready, AGENTS as u64 - round - 1);
        // The first failing agent by name speaks for them all.
        assert_eq!(status.message.as_deref(), Some("a000: image pull failed"));
    }
    // One link goes down: its cluster counts offline, from its part alone.
    net.disconnect("a299");
    assert!(net.settle());
    assert_eq!(at_root(&net).counts.offline, 1);
    let merged = net["root"].core().status_parts_merged_anew() - merged_before;
    assert_eq!(
        merged, 0,
        "children merged anew for 21 changes of one child"
    );
}

/// A child that a new cut leaves out stops counting at once, whatever it
/// still reports: the root keeps each placement's merge as children
/// report, and a new cut must make it anew (in debug builds every read is
/// also checked against a merge over every child).
#[test]
fn a_child_a_new_cut_leaves_out_stops_counting_at_once() {
    let key = "placement/shop/web";
    let mut net = ready_fleet(key);
    net.settle();
    let ready_at_root = |net: &Net| {
        net["root"]
            .core()
            .placement_status(key)
            .map_or(0, |status| status.counts.ready)
    };
    assert_eq!(ready_at_root(&net), 6);
    let eu_only = relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        ..Default::default()
    };
    upsert_at_root(&mut net, placement(key, eu_only));
    step_until(
        &mut net,
        "only the eu clusters count",
        |net, step| {
            let children = net["root"].core().placement_children(key);
            if !children.iter().any(|child| child == "us") {
                assert!(ready_at_root(net) <= 3, "us still counted at step {step}");
            }
        },
        |net| ready_at_root(net) == 3,
    );
}
