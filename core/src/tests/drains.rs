//! Cordon and drain through a tree of cores: a drained cluster's bounded
//! placement is placed elsewhere while the drained one keeps it, until the
//! drain is done; a cordoned cluster gets nothing new; the waves of a
//! rollout reach the clusters in the order of their label.

use super::*;

const DRAINING: &str = relaymesh_topology::placement::DRAINING_LABEL;
const CORDONED: &str = relaymesh_topology::placement::CORDONED_LABEL;

fn set_label(net: &mut Net, node: &str, key: &str, value: &str) {
    let change = relaymesh_protocol::ClusterLabels {
        node: node.into(),
        set: [(key.to_string(), value.to_string())].into(),
        remove: vec![],
        annotations: Default::default(),
    };
    upsert_at_root(net, change.to_entry().expect("encodes"));
    net.settle();
}

fn one_in_eu() -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: region("eu"),
        max_clusters: Some(1),
        ..Default::default()
    }
}

#[test]
fn a_drained_cluster_keeps_its_copy_until_the_drain_is_done() {
    let mut net = fleet();
    let key = "placement/shop/one";
    upsert_at_root(&mut net, placement(key, one_in_eu()));
    net.settle();
    let before = agents_with(&net, key);
    assert_eq!(before.len(), 1, "{before:?}");
    let drained = before.iter().next().cloned().expect("one holder");

    set_label(&mut net, &drained, DRAINING, "true");
    let during = agents_with(&net, key);
    assert_eq!(
        during.len(),
        2,
        "the replacement and the drained: {during:?}"
    );
    assert!(during.contains(&drained));
    assert_eq!(net.0["root"].core().placement_selected(key), Some(1));

    set_label(&mut net, &drained, DRAINING, "done");
    let after = agents_with(&net, key);
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(!after.contains(&drained));
}

/// The fleet with a bounded placement `key` on one cluster of eu, which
/// reports it ready; and that cluster.
fn held_ready(key: &str) -> (Net, String) {
    let mut net = fleet();
    upsert_at_root(&mut net, placement(key, one_in_eu()));
    net.settle();
    let holder = agents_with(&net, key)
        .into_iter()
        .next()
        .expect("one holder");
    let now = net.now();
    net.core_mut(&holder)
        .expect("the holder")
        .set_own_status(now, key, Some(ready()));
    (net, holder)
}

/// The cluster that holds `key` beside `drained`, once it reported it
/// ready.
fn replacement_ready(net: &mut Net, key: &str, drained: &str) -> String {
    let replacement = agents_with(net, key)
        .into_iter()
        .find(|agent| agent != drained)
        .expect("a replacement");
    let now = net.now();
    net.core_mut(&replacement)
        .expect("the replacement")
        .set_own_status(now, key, Some(ready()));
    replacement
}

#[test]
fn a_drained_cluster_still_reporting_is_not_counted_beside_its_replacement() {
    let key = "placement/shop/one";
    let (mut net, drained) = held_ready(key);
    net.settle();
    let ready_at_root = |net: &Net| {
        net.0["root"]
            .core()
            .placement_status(key)
            .map(|status| status.counts.ready)
    };
    assert_eq!(ready_at_root(&net), Some(1));

    // Its agent has not withdrawn its status (a reconciler slower than the
    // record climbing): the root counts only the replacement, not ready
    // yet, so the drain is not done on the drained cluster's own copy
    // (issue 31: READY 3/2 right after `drain --wait`).
    set_label(&mut net, &drained, DRAINING, "true");
    assert!(agents_with(&net, key).contains(&drained));
    assert_eq!(net.0["root"].core().placement_selected(key), Some(1));
    assert_eq!(ready_at_root(&net).unwrap_or(0), 0);

    replacement_ready(&mut net, key, &drained);
    net.settle();
    assert_eq!(ready_at_root(&net), Some(1));
}

/// Once the drain is done, the drained cluster no longer receives the
/// placement but may still report its copy until its agent has removed
/// it: that report is not counted either (CI run 82: READY 3/2 right after
/// `relayctl drain --wait`, the hold released and the stale report
/// counted again).
#[test]
fn a_drained_cluster_reporting_after_the_drain_is_done_is_not_counted() {
    let key = "placement/shop/one";
    let (mut net, drained) = held_ready(key);
    net.settle();
    set_label(&mut net, &drained, DRAINING, "true");
    replacement_ready(&mut net, key, &drained);
    net.settle();

    // Its agent has not removed its copy yet, and still says it is ready.
    let now = net.now();
    net.core_mut(&drained)
        .expect("the drained cluster")
        .set_own_status(now, key, Some(ready()));
    set_label(&mut net, &drained, DRAINING, "done");
    assert!(!agents_with(&net, key).contains(&drained));
    let status = net.0["root"]
        .core()
        .placement_status(key)
        .expect("a status");
    assert_eq!(net.0["root"].core().placement_selected(key), Some(1));
    assert_eq!(
        status.counts.ready, 1,
        "only the replacement is counted: {status:?}"
    );
}

/// The root's side: the drain is done only once the replacement reports
/// ready and the counts had time to settle, not on the drained cluster's
/// own copy; then the root publishes the drain `done` and the drained
/// cluster drops its copy.
#[test]
fn a_drain_is_done_once_its_replacement_is_ready() {
    let key = "placement/shop/one";
    let (mut net, drained) = held_ready(key);
    set_label(&mut net, &drained, DRAINING, "true");
    let finished = |net: &mut Net| {
        let now = net.now();
        net.core_mut("root").expect("the root").finished_drains(now)
    };
    net.advance(crate::DRAIN_SETTLE * 2);
    assert!(
        finished(&mut net).is_empty(),
        "its replacement is not ready"
    );

    let replacement = replacement_ready(&mut net, key, &drained);
    for _ in 0..10 {
        net.advance(std::time::Duration::from_millis(200));
    }
    // Ready now, but not for long enough yet.
    assert!(finished(&mut net).is_empty());
    net.advance(crate::DRAIN_SETTLE);
    let done = finished(&mut net);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].node, drained);
    assert_eq!(done[0].set.get(DRAINING).map(String::as_str), Some("done"));
    upsert_at_root(&mut net, done[0].to_entry().expect("encodes"));
    net.settle();
    assert_eq!(agents_with(&net, key), [replacement].into());
}

#[test]
fn a_cordoned_cluster_keeps_what_it_has_and_gets_nothing_new() {
    let mut net = fleet();
    let key = "placement/shop/one";
    upsert_at_root(&mut net, placement(key, one_in_eu()));
    net.settle();
    let holder = agents_with(&net, key)
        .into_iter()
        .next()
        .expect("one holder");
    for node in ["e1", "e2", "e3"] {
        set_label(&mut net, node, CORDONED, "true");
    }
    assert_eq!(agents_with(&net, key), [holder].into());
    let new = "placement/shop/new";
    upsert_at_root(&mut net, placement(new, one_in_eu()));
    net.settle();
    assert!(
        agents_with(&net, new).is_empty(),
        "every eu cluster is cordoned"
    );
    assert_eq!(net.0["root"].core().placement_selected(new), Some(0));
}

/// A placement of every cluster (at most `max_clusters`) rolling out to
/// `total` of them, smallest `carbon` first.
fn by_carbon(total: u32, max_clusters: Option<u32>) -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: any_cluster(),
        max_clusters,
        wave: Some(Box::new(relaymesh_protocol::Wave {
            key_label: Some("carbon".into()),
            total,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The agents whose wave of `key` lets them run its newest revision.
fn in_wave(net: &Net, key: &str) -> BTreeSet<String> {
    net.nodes()
        .filter(|node| node.role() == Role::Agent)
        .filter_map(|node| {
            let entry = node.core().entries().find(|entry| entry.key == key)?;
            let Target::Placement(target) = &entry.target else {
                return None;
            };
            let labels = node.core().labels();
            relaymesh_topology::rollout::leaf_in_wave(target.wave.as_ref()?, &labels)
                .then(|| node.name().to_string())
        })
        .collect()
}

#[test]
fn a_wave_reaches_the_clusters_with_the_smallest_values_first() {
    let mut net = three_levels();
    // The carbon intensity of each cluster, not in the order of the names.
    let clusters = [
        ("e1", "eu-west", "30"),
        ("e2", "eu-west", "5"),
        ("e3", "eu", "20"),
    ];
    for (name, parent, carbon) in clusters {
        net.add_agent(name, parent, &[("region", "eu"), ("carbon", carbon)]);
    }
    for (i, carbon) in ["1", "40", "10"].into_iter().enumerate() {
        net.add_agent(
            &format!("u{i}"),
            "us",
            &[("region", "us"), ("carbon", carbon)],
        );
    }
    net.settle();
    let key = "placement/shop/wave";
    let target = |total: u32| by_carbon(total, None);
    let in_wave = |net: &Net| in_wave(net, key);
    upsert_at_root(&mut net, placement(key, target(2)));
    net.settle();
    assert_eq!(in_wave(&net), ["u0".to_string(), "e2".to_string()].into());
    upsert_at_root(&mut net, placement(key, target(4)));
    net.settle();
    assert_eq!(
        in_wave(&net),
        ["u0", "e2", "u2", "e3"].map(str::to_string).into()
    );
    assert_eq!(net.0["root"].core().placement_wave(key), Some(4));

    // Per-group budgets: the root hands each child its number, and each
    // subtree goes in the label's order within itself.
    let mut grouped = target(0);
    if let Some(wave) = &mut grouped.wave {
        wave.per_child = [("eu".to_string(), 3), ("us".to_string(), 1)].into();
    }
    upsert_at_root(&mut net, placement(key, grouped));
    net.settle();
    assert_eq!(
        in_wave(&net),
        ["e1", "e2", "e3", "u0"].map(str::to_string).into(),
        "all of eu, and us's smallest"
    );
    let parts = net.0["root"].core().placement_parts(key);
    let waves: Vec<(String, u64, Option<u32>)> = parts
        .into_iter()
        .map(|part| (part.child, part.selected, part.wave))
        .collect();
    assert_eq!(
        waves,
        [
            ("eu".to_string(), 3, Some(3)),
            ("us".to_string(), 3, Some(1))
        ]
    );
}

#[test]
fn a_full_cluster_gets_no_new_bounded_placement() {
    let mut net = three_levels();
    net.add_agent("e1", "eu-west", &[("region", "eu")]);
    net.add_agent("e2", "eu-west", &[("region", "eu")]);
    for name in ["e1", "e2"] {
        let now = net.0.now();
        let core = net.0.core_mut(name).expect("a node");
        core.set_capacity(
            now,
            [(
                relaymesh_protocol::inventory::PLACEMENTS_CAPACITY.to_string(),
                "1".to_string(),
            )]
            .into(),
        );
    }
    net.settle();
    let first = "placement/shop/first";
    upsert_at_root(&mut net, placement(first, one_in_eu()));
    net.settle();
    let holder = agents_with(&net, first)
        .into_iter()
        .next()
        .expect("one holder");
    let record = net.record("root", &holder).expect("at the root");
    assert_eq!(
        record.labels.get(relaymesh_topology::placement::FULL_LABEL),
        Some("true")
    );
    let second = "placement/shop/second";
    upsert_at_root(&mut net, placement(second, one_in_eu()));
    net.settle();
    let other = agents_with(&net, second);
    assert_eq!(other.len(), 1);
    assert!(
        !other.contains(&holder),
        "the full cluster gets nothing new"
    );
    let third = "placement/shop/third";
    upsert_at_root(&mut net, placement(third, one_in_eu()));
    net.settle();
    assert!(agents_with(&net, third).is_empty(), "both are full");
}

#[test]
fn an_agent_out_of_room_is_full_until_it_says_otherwise() {
    let mut net = three_levels();
    net.add_agent("e1", "eu-west", &[("region", "eu")]);
    net.add_agent("e2", "eu-west", &[("region", "eu")]);
    net.settle();
    let full = |net: &Net| {
        net.record("root", "e1")
            .expect("at the root")
            .labels
            .get(relaymesh_topology::placement::FULL_LABEL)
            .map(str::to_string)
    };
    assert_eq!(full(&net), None);
    let now = net.0.now();
    net.0
        .core_mut("e1")
        .expect("a node")
        .set_out_of_room(now, true);
    net.settle();
    assert_eq!(full(&net).as_deref(), Some("true"), "climbed to the root");
    for index in 0..3 {
        let key = format!("placement/shop/p{index}");
        upsert_at_root(&mut net, placement(&key, one_in_eu()));
        net.settle();
        assert_eq!(agents_with(&net, &key), set(&["e2"]), "{key}");
    }
    let now = net.0.now();
    net.0
        .core_mut("e1")
        .expect("a node")
        .set_out_of_room(now, false);
    net.settle();
    assert_eq!(full(&net), None, "room again");
}

#[test]
fn an_agent_whose_cluster_does_not_answer_is_labelled_unreachable_until_it_does() {
    let mut net = three_levels();
    net.add_agent("e1", "eu-west", &[("region", "eu")]);
    net.add_agent("e2", "eu-west", &[("region", "eu")]);
    net.settle();
    let unreachable = |net: &Net, name: &str| {
        net.record("root", name)
            .expect("at the root")
            .labels
            .get(relaymesh_topology::placement::UNREACHABLE_LABEL)
            .map(str::to_string)
    };
    assert_eq!(unreachable(&net, "e1"), None);
    let now = net.0.now();
    net.0
        .core_mut("e1")
        .expect("a node")
        .set_cluster_unreachable(now, true);
    net.settle();
    assert_eq!(
        unreachable(&net, "e1").as_deref(),
        Some("true"),
        "climbed to the root"
    );
    assert_eq!(unreachable(&net, "e2"), None, "only its own cluster");
    // It only tells: a count-bounded placement may still go there.
    let record = net.record("root", "e1").expect("at the root");
    assert!(!relaymesh_topology::placement::is_cordoned(&record.labels));
    let now = net.0.now();
    net.0
        .core_mut("e1")
        .expect("a node")
        .set_cluster_unreachable(now, false);
    net.settle();
    assert_eq!(unreachable(&net, "e1"), None, "answers again");
}

/// Each holder of `key` reports what an agent's reconciler would: one
/// cluster on the newest revision, under its value of `label`.
fn report_values(net: &mut Net, key: &str, label: &str) {
    let revision = relaymesh_protocol::BundleId::of(b"newest");
    for name in agents_with(net, key) {
        let now = net.0.now();
        let core = net.0.core_mut(&name).expect("a node");
        let value = core.labels().get(label).cloned().unwrap_or_default();
        let counts = relaymesh_protocol::RevisionCounts {
            revision,
            waiting: 1,
            updating: 0,
            succeeded: 0,
            failed: 0,
        };
        let status = relaymesh_protocol::PlacementStatus {
            counts: relaymesh_protocol::PhaseCounts {
                applied: 1,
                ..Default::default()
            },
            revisions: vec![counts],
            revision_groups: vec![relaymesh_protocol::RevisionGroup {
                label: label.to_string(),
                value,
                counts,
            }],
            ..Default::default()
        };
        core.set_own_status(now, key, Some(status));
    }
    net.settle();
}

#[test]
fn a_bounded_placement_s_wave_follows_the_order_among_the_clusters_chosen() {
    let mut net = three_levels();
    let clusters = [
        ("e1", "eu-west", "30"),
        ("e2", "eu-west", "5"),
        ("e3", "eu", "20"),
        ("u0", "us", "1"),
        ("u1", "us", "40"),
        ("u2", "us", "10"),
    ];
    for (name, parent, carbon) in clusters {
        net.add_agent(name, parent, &[("carbon", carbon)]);
    }
    net.settle();
    let key = "placement/shop/bounded";
    let target = |total: u32| by_carbon(total, Some(3));
    let in_wave = |net: &Net| in_wave(net, key);
    let carbon = |name: &String| -> u32 {
        clusters
            .iter()
            .find(|(cluster, _, _)| cluster == name)
            .and_then(|(_, _, carbon)| carbon.parse().ok())
            .unwrap_or(u32::MAX)
    };
    upsert_at_root(&mut net, placement(key, target(0)));
    net.settle();
    let mut holders: Vec<String> = agents_with(&net, key).into_iter().collect();
    assert_eq!(holders.len(), 3);
    holders.sort_by_key(carbon);
    // The relays chose the three; their values reach the root in status.
    report_values(&mut net, key, "carbon");
    for total in 1..=3u32 {
        upsert_at_root(&mut net, placement(key, target(total)));
        net.settle();
        let smallest: BTreeSet<String> = holders.iter().take(total as usize).cloned().collect();
        assert_eq!(
            in_wave(&net),
            smallest,
            "a wave of {total} among {holders:?}"
        );
        assert_eq!(
            net.0["root"].core().placement_wave(key),
            Some(u64::from(total))
        );
    }
    assert_eq!(agents_with(&net, key), holders.iter().cloned().collect());
    let by_value = net.0["root"]
        .core()
        .placement_selected_by_value(key, "carbon");
    assert_eq!(by_value.values().sum::<u64>(), 3, "{by_value:?}");
}

/// A Progressive rollout across the tree, decided by the root's core
/// (`rollouts`: `topology::rollout::next_wave` on what the root's status
/// says of the newest revision, each time the status is read) and split by
/// every relay's core: never more than `maxConcurrency` clusters updating,
/// each wave larger by the ones that succeeded, until every cluster runs
/// the newest revision. The test only plays the agents.
#[test]
fn a_progressive_rollout_goes_in_waves_across_the_tree() {
    use crate::rollouts::{Phase, RolloutInput};
    use relaymesh_topology::rollout::{Amount, RolloutSpec, Strategy};

    let mut net = fleet();
    let key = "placement/shop/rolling";
    let newest = relaymesh_protocol::BundleId::of(b"v2");
    let agents = ["e1", "e2", "e3", "u1", "u2", "u3"];
    let spec = RolloutSpec {
        strategy: Strategy::Progressive,
        max_concurrency: Amount::Count(2),
        ..RolloutSpec::default()
    };
    let mut entry = placement(key, all_clusters());
    entry.bundles = vec![newest];
    net.place(
        entry,
        RolloutInput {
            spec,
            ..RolloutInput::default()
        },
    )
    .expect("placed");
    net.settle();
    let mut waves = Vec::new();
    let mut succeeded = BTreeSet::new();
    for _ in 0..10 {
        net.advance_rollouts(&BTreeMap::new()).expect("advanced");
        net.settle();
        let phase = net.0["root"]
            .core()
            .rollout(key)
            .map(|rollout| rollout.phase);
        if phase == Some(Phase::Complete) {
            break;
        }
        let running = in_wave(&net, key);
        waves.push(running.len());
        assert!(
            running.len() - running.intersection(&succeeded).count() <= 2,
            "at most maxConcurrency updating: {running:?}"
        );
        // Those in the wave succeed on the newest revision; the others
        // wait on the previous one.
        let now = net.now();
        for agent in agents {
            let in_wave = running.contains(agent);
            let counts = relaymesh_protocol::RevisionCounts {
                revision: newest,
                waiting: u64::from(!in_wave),
                updating: 0,
                succeeded: u64::from(in_wave),
                failed: 0,
            };
            let status = relaymesh_protocol::PlacementStatus {
                revisions: vec![counts],
                ..ready()
            };
            net.core_mut(agent)
                .expect("an agent")
                .set_own_status(now, key, Some(status));
        }
        succeeded = running;
        net.settle();
    }
    assert_eq!(waves, [2, 4, 6], "two more each wave, then complete");
    // Complete: every cluster runs the newest revision, no wave any more.
    assert_eq!(agents_with(&net, key).len(), 6);
    for agent in agents {
        let entry = net.0[agent].core().entries().find(|entry| entry.key == key);
        let entry = entry.expect("the entry");
        assert_eq!(entry.bundles, [newest]);
        assert!(matches!(&entry.target, Target::Placement(target) if target.wave.is_none()));
    }
    let rollout = net.0["root"].core().rollout(key).expect("a rollout");
    assert_eq!(rollout.history[0].outcome, "Complete");
}
