//! The harness itself: a balanced tree, its traffic per level, and runs
//! that keep no state.

use relaymesh_protocol::{PhaseCounts, PlacementStatus, PlacementTarget, SliceEntry, Target};

use super::*;

/// root → `fanout` relays → `fanout` agents each.
fn balanced(fanout: usize, keep_state: bool) -> Simulation {
    let config = SimulationConfig {
        keep_state,
        ..SimulationConfig::default()
    };
    let mut sim = Simulation::new(config).expect("a simulation");
    sim.add_relay("root", None).expect("the root");
    for relay in 0..fanout {
        let relay = format!("r{relay}");
        sim.add_relay(&relay, Some("root")).expect("a relay");
        for agent in 0..fanout {
            let zone = if agent % 2 == 0 { "a" } else { "b" };
            sim.add_agent(&format!("{relay}-{agent}"), &relay, [("zone", zone)])
                .expect("an agent");
        }
    }
    assert!(sim.settle(), "the tree goes quiet");
    sim
}

#[test]
fn a_placement_reaches_its_clusters_and_their_status_comes_back_summed() {
    for keep_state in [true, false] {
        let mut sim = balanced(4, keep_state);
        let root = sim.node("root").expect("the root");
        assert_eq!(root.core().nodes().len(), 1 + 4 + 16);
        let bundle = BundleId::of(b"workload");
        let entry = SliceEntry {
            key: "placement/shop/web".into(),
            target: Target::Placement(PlacementTarget {
                selector: relaymesh_topology::selector::parse("zone=a").ok(),
                ..PlacementTarget::default()
            }),
            bundles: vec![bundle],
            body: Vec::new(),
            serial: 0,
            signature: Vec::new(),
        };
        sim.upsert_at_root(entry, &[b"workload"]).expect("placed");
        // A child asks for the bundle as soon as it has the entry, maybe
        // before its parent has it: the fetch is retried.
        assert!(sim.settle());
        let chosen: Vec<String> = sim
            .nodes()
            .filter(|node| node.role() == Role::Agent && node.holds("placement/shop/web"))
            .map(|node| node.name().to_string())
            .collect();
        assert_eq!(chosen.len(), 8, "{chosen:?}");
        for name in &chosen {
            assert!(sim[name.as_str()].bundle(&bundle).is_some(), "{name}");
            let now = sim.now();
            if let Some(core) = sim.core_mut(name) {
                let counts = PhaseCounts {
                    ready: 1,
                    ..PhaseCounts::default()
                };
                let status = PlacementStatus {
                    counts,
                    ..PlacementStatus::default()
                };
                core.set_own_status(now, "placement/shop/web", Some(status));
            }
        }
        assert!(sim.settle());
        let status = sim["root"].core().placement_status("placement/shop/web");
        assert_eq!(status.map(|status| status.counts.ready), Some(8));
        assert_eq!(
            sim["root"].persisted().nodes.is_empty(),
            !keep_state,
            "state is kept only when asked"
        );
    }
}

#[test]
fn traffic_is_counted_per_level_and_the_root_handles_its_children_only() {
    let sim = balanced(6, false);
    let levels = sim.traffic_by_level();
    assert_eq!(levels.len(), 3);
    assert_eq!(
        levels.iter().map(|level| level.nodes).collect::<Vec<_>>(),
        [1, 6, 36]
    );
    // Every message sent was received by someone: a perfect network.
    let sent: u64 = levels
        .iter()
        .map(|level| level.total.messages_to_children + level.total.messages_to_parent)
        .sum();
    let received: u64 = levels
        .iter()
        .map(|level| level.total.messages_from_children + level.total.messages_from_parent)
        .sum();
    assert_eq!(sent, received);
    // The root hears from its six children, a bounded number of times
    // each, however many agents lie below them.
    let root = &levels[0];
    assert_eq!(
        root.total.messages_from_children,
        levels[1].total.messages_to_parent
    );
    assert!(root.total.messages_from_children <= 6 * 8, "{root:?}");
}

#[test]
fn a_tree_refuses_what_is_not_a_tree() {
    let mut sim = Simulation::new(SimulationConfig::default()).expect("a simulation");
    assert!(matches!(
        sim.add_relay("eu", Some("root")),
        Err(SimulationError::UnknownNode(_))
    ));
    sim.add_relay("root", None).expect("the root");
    assert!(matches!(
        sim.add_relay("other", None),
        Err(SimulationError::Root(_))
    ));
    sim.add_agent("edge", "root", [("zone", "a")])
        .expect("an agent");
    assert!(matches!(
        sim.add_relay("below", Some("edge")),
        Err(SimulationError::ParentIsAgent { .. })
    ));
    assert!(matches!(
        sim.add_relay("edge", Some("root")),
        Err(SimulationError::DuplicateNode(_))
    ));
}
