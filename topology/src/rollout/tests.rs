use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn supply_of(pairs: &[(&str, u64)]) -> Supply {
    Supply {
        total: pairs.iter().map(|(_, count)| count).sum(),
        per_value: pairs.iter().map(|(v, c)| (v.to_string(), *c)).collect(),
    }
}

fn wave(key: Option<&str>, total: u32) -> Wave {
    Wave {
        key_label: key.map(str::to_string),
        total,
        per_value: BTreeMap::new(),
        per_value_cap: None,
        per_child: BTreeMap::new(),
    }
}

#[test]
fn values_go_first_smallest_numerically_and_unlabelled_last() {
    let supply = supply_of(&[("100", 1), ("20", 2), (UNLABELLED, 3), ("3", 1)]);
    assert_eq!(ordered_values(&supply), vec!["3", "20", "100", UNLABELLED]);
    let derived = derive(&wave(Some("carbon"), 4), &supply);
    assert_eq!(
        derived,
        BTreeMap::from([
            ("3".to_string(), 1),
            ("20".to_string(), 2),
            ("100".to_string(), 1)
        ])
    );
    // Not every value a number: in text order.
    let words = supply_of(&[("b", 1), ("10", 1), ("a", 1)]);
    assert_eq!(ordered_values(&words), vec!["10", "a", "b"]);
}

#[test]
fn a_capped_wave_takes_one_per_value() {
    let regions = supply_of(&[("eu", 4), ("us", 4), ("ap", 4)]);
    let mut canary = wave(Some("region"), 12);
    canary.per_value_cap = Some(1);
    let derived = derive(&canary, &regions);
    assert_eq!(derived.values().sum::<u32>(), 3);
    assert!(derived.values().all(|count| *count == 1));
}

#[test]
fn a_split_keeps_what_each_child_had_while_the_wave_grows() {
    let children = [
        WaveChild {
            name: "a",
            supply: supply_of(&[("1", 2), ("2", 1)]),
        },
        WaveChild {
            name: "b",
            supply: supply_of(&[("1", 1), ("3", 2)]),
        },
    ];
    let first = split_wave("p", &wave(Some("k"), 2), &children, None);
    let total: u32 = first.values().map(|w| w.total).sum();
    assert_eq!(total, 2);
    // Only value 1's clusters go first: there are three of them.
    assert!(first
        .values()
        .all(|w| w.per_value.keys().all(|value| value == "1")));
    let second = split_wave("p", &wave(Some("k"), 4), &children, Some(&first));
    for (child, share) in &first {
        assert!(second[child].per_value.get("1") >= share.per_value.get("1"));
    }
    assert_eq!(second.values().map(|w| w.total).sum::<u32>(), 4);
    assert_eq!(
        second
            .values()
            .filter_map(|w| w.per_value.get("1"))
            .sum::<u32>(),
        3
    );
}

#[test]
fn a_leaf_runs_the_new_revision_only_with_a_share_for_its_value() {
    let mut share = wave(Some("region"), 1);
    share.per_value.insert("eu".into(), 1);
    assert!(leaf_in_wave(&share, &labels(&[("region", "eu")])));
    assert!(!leaf_in_wave(&share, &labels(&[("region", "us")])));
    assert!(leaf_in_wave(&wave(None, 1), &labels(&[])));
    assert!(!leaf_in_wave(&wave(None, 0), &labels(&[])));
}

fn progressive(max_concurrency: u32, max_failures: u32) -> RolloutSpec {
    RolloutSpec {
        strategy: super::Strategy::Progressive,
        max_concurrency: Amount::Count(max_concurrency),
        max_failures: Amount::Count(max_failures),
        ..RolloutSpec::default()
    }
}

fn observed(selected: u64, handed: u64, succeeded: u64, failed: u64) -> Observed {
    Observed {
        selected,
        handed,
        counts: Counts {
            waiting: selected.saturating_sub(handed),
            updating: handed.saturating_sub(succeeded + failed),
            succeeded,
            failed,
        },
        gates_open: true,
        groups: Vec::new(),
    }
}

#[test]
fn waves_grow_as_clusters_succeed_never_past_the_concurrency() {
    let spec = progressive(2, 0);
    let step = next_wave(&spec, &Position::default(), &observed(12, 0, 0, 0));
    assert_eq!((step.wave.total, &step.state), (2, &State::Progressing));
    // Handed out, nobody reported yet: no more.
    let step = next_wave(&spec, &step.position, &observed(12, 2, 0, 0));
    assert_eq!(step.wave.total, 2);
    let step = next_wave(&spec, &step.position, &observed(12, 2, 1, 0));
    assert_eq!(step.wave.total, 3);
    let step = next_wave(&spec, &step.position, &observed(12, 12, 12, 0));
    assert_eq!((step.wave.total, &step.state), (12, &State::Complete));
}

#[test]
fn failures_past_the_limit_halt_and_a_pause_holds() {
    let spec = progressive(2, 1);
    let at = &Position {
        canary_done: true,
        admitted: 2,
        per_group: BTreeMap::new(),
    };
    let step = next_wave(&spec, at, &observed(12, 2, 0, 1));
    assert_eq!(step.state, State::Progressing, "one failure is allowed");
    assert_eq!(step.wave.total, 2, "the failed cluster holds its place");
    let wider = progressive(3, 2);
    let step = next_wave(&wider, at, &observed(12, 2, 0, 2));
    assert_eq!(step.wave.total, 3, "a third place is free");
    let step = next_wave(&wider, at, &observed(12, 3, 0, 2));
    assert!(matches!(step.state, State::Progressing));
    let step = next_wave(&progressive(2, 5), at, &observed(12, 2, 0, 2));
    assert!(matches!(step.state, State::Halted(ref why) if why.contains("hold every place")));
    let step = next_wave(&spec, at, &observed(12, 2, 0, 2));
    assert!(matches!(step.state, State::Halted(ref why) if why.contains("2 clusters failed")));
    assert_eq!(step.wave.total, 2);
    let paused = RolloutSpec {
        paused: true,
        ..spec.clone()
    };
    let step = next_wave(&paused, at, &observed(12, 2, 2, 0));
    assert_eq!((step.wave.total, &step.state), (2, &State::Paused));
    let step = next_wave(
        &spec,
        at,
        &Observed {
            gates_open: false,
            ..observed(12, 2, 2, 0)
        },
    );
    assert_eq!((step.wave.total, &step.state), (2, &State::Gated));
}

#[test]
fn a_canary_goes_one_per_group_first_then_progressively() {
    let spec = RolloutSpec {
        strategy: super::Strategy::Canary,
        canary_by: Some("region".into()),
        order_by: Some("carbon".into()),
        ..progressive(2, 0)
    };
    let step = next_wave(&spec, &Position::default(), &observed(12, 0, 0, 0));
    assert_eq!(step.wave.key_label.as_deref(), Some("region"));
    assert_eq!(step.wave.per_value_cap, Some(1));
    // The relays handed it to three clusters; two succeeded.
    let step = next_wave(&spec, &step.position, &observed(12, 3, 0, 0));
    assert!(!step.position.canary_done);
    let step = next_wave(&spec, &step.position, &observed(12, 3, 2, 0));
    assert_eq!(step.wave.per_value_cap, Some(1));
    let step = next_wave(&spec, &step.position, &observed(12, 3, 3, 0));
    assert!(step.position.canary_done);
    assert_eq!(step.wave.key_label.as_deref(), Some("carbon"));
    assert_eq!(step.wave.total, 5);
}

proptest! {
    /// Through a two-level tree, a wave of `total` reaches exactly
    /// min(total, clusters) leaves, and none of them has a larger value
    /// than a leaf left out.
    #[test]
    fn a_wave_reaches_the_first_clusters_in_order_through_the_tree(
        values in prop::collection::vec(prop::collection::vec(0u8..6, 0..6), 1..5),
        total in 0u32..30,
    ) {
        let key = "carbon";
        let mids: Vec<(String, Vec<(String, Labels)>)> = values
            .iter()
            .enumerate()
            .map(|(m, leaves)| {
                let leaves = leaves
                    .iter()
                    .enumerate()
                    .map(|(l, value)| (format!("m{m}-l{l}"), labels(&[(key, &value.to_string())])))
                    .collect();
                (format!("m{m}"), leaves)
            })
            .collect();
        let leaf_supply = |leaves: &[(String, Labels)]| {
            let sets: Vec<relaymesh_protocol::LabelSet> =
                leaves.iter().map(|(_, labels)| labels.clone().into()).collect();
            let aggregate: Aggregate = sets.iter().collect();
            wave_supply(&aggregate, None, Some(key))
        };
        let root_children: Vec<WaveChild<'_>> = mids
            .iter()
            .map(|(name, leaves)| WaveChild { name, supply: leaf_supply(leaves) })
            .collect();
        let root = split_wave("p", &wave(Some(key), total), &root_children, None);
        let mut admitted = Vec::new();
        let mut left_out = Vec::new();
        for (name, leaves) in &mids {
            let children: Vec<WaveChild<'_>> = leaves
                .iter()
                .map(|(leaf, labels)| WaveChild {
                    name: leaf,
                    supply: leaf_supply(std::slice::from_ref(&(leaf.clone(), labels.clone()))),
                })
                .collect();
            let shares = split_wave("p", &root[name], &children, None);
            for (leaf, labels) in leaves {
                let value: u32 = labels[key].parse().expect("a number");
                if leaf_in_wave(&shares[leaf], labels) {
                    admitted.push(value);
                } else {
                    left_out.push(value);
                }
            }
        }
        let clusters = values.iter().map(Vec::len).sum::<usize>();
        prop_assert_eq!(admitted.len(), clusters.min(total as usize));
        if let (Some(last_in), Some(first_out)) = (admitted.iter().max(), left_out.iter().min()) {
            prop_assert!(last_in <= first_out);
        }
    }
}

fn group(name: &str, selected: u64, succeeded: u64, updating: u64, failed: u64) -> GroupObserved {
    GroupObserved {
        name: name.into(),
        selected,
        counts: Counts {
            waiting: selected.saturating_sub(succeeded + updating + failed),
            updating,
            succeeded,
            failed,
        },
    }
}

fn grouped(groups: Vec<GroupObserved>) -> Observed {
    let mut total = observed(0, 0, 0, 0);
    for group in &groups {
        total.selected += group.selected;
        total.counts.succeeded += group.counts.succeeded;
        total.counts.updating += group.counts.updating;
        total.counts.failed += group.counts.failed;
        total.handed += group.counts.succeeded + group.counts.updating + group.counts.failed;
    }
    Observed { groups, ..total }
}

fn per_group_spec(concurrency: u32, per_group: u32) -> RolloutSpec {
    RolloutSpec {
        max_unavailable_per_group: Some(Amount::Count(per_group)),
        ..progressive(concurrency, 5)
    }
}

#[test]
fn each_group_gets_its_own_budget_within_the_overall_concurrency() {
    let spec = per_group_spec(2, 1);
    let groups = |eu: (u64, u64), us: (u64, u64), ap: (u64, u64)| {
        grouped(vec![
            group("ap", 4, ap.0, ap.1, 0),
            group("eu", 4, eu.0, eu.1, 0),
            group("us", 4, us.0, us.1, 0),
        ])
    };
    let step = next_wave(&spec, &Position::default(), &groups((0, 0), (0, 0), (0, 0)));
    assert_eq!(
        step.wave.per_child,
        BTreeMap::from([("ap".to_string(), 1), ("eu".to_string(), 1)]),
        "one per group, two in all"
    );
    assert_eq!(step.wave.total, 2);
    // ap's cluster succeeded: its place goes to ap's next cluster, or to
    // us, which has none yet; groups go in name order.
    let step = next_wave(&spec, &step.position, &groups((0, 1), (0, 0), (1, 0)));
    assert_eq!(
        step.wave.per_child,
        BTreeMap::from([("ap".to_string(), 2), ("eu".to_string(), 1)])
    );
    // Never more than one updating in a group, whatever the concurrency.
    let wide = per_group_spec(12, 1);
    let step = next_wave(&wide, &Position::default(), &groups((0, 0), (0, 0), (0, 0)));
    assert!(step.wave.per_child.values().all(|count| *count == 1));
    assert_eq!(step.wave.total, 3);
    // A percentage is of each group's selected clusters.
    let half = RolloutSpec {
        max_unavailable_per_group: Some(Amount::Percent(50)),
        ..wide
    };
    let step = next_wave(&half, &Position::default(), &groups((0, 0), (0, 0), (0, 0)));
    assert!(step.wave.per_child.values().all(|count| *count == 2));
}

#[test]
fn a_group_whose_failures_fill_its_budget_halts_the_rollout() {
    let spec = per_group_spec(3, 1);
    let start = next_wave(
        &spec,
        &Position::default(),
        &grouped(vec![group("eu", 4, 0, 0, 0), group("us", 4, 0, 0, 0)]),
    );
    let step = next_wave(
        &spec,
        &start.position,
        &grouped(vec![group("eu", 4, 0, 0, 1), group("us", 4, 1, 0, 0)]),
    );
    assert!(
        matches!(step.state, State::Halted(ref why) if why.contains("below eu") && why.contains("maxUnavailablePerGroup")),
        "{:?}",
        step.state
    );
    assert_eq!(
        step.wave.per_child, start.wave.per_child,
        "nothing more goes anywhere, and nothing goes back"
    );
}

proptest! {
    /// Whatever the counts, no group has more clusters in flight than its
    /// budget allows beyond what it had, and the wave never shrinks.
    #[test]
    fn grouped_waves_respect_every_budget(
        counts in prop::collection::vec((1u64..8, 0u64..8, 0u64..3), 1..5),
        concurrency in 1u32..6,
        per_group in 1u32..3,
    ) {
        let spec = per_group_spec(concurrency, per_group);
        let groups: Vec<GroupObserved> = counts
            .iter()
            .enumerate()
            .map(|(index, (selected, succeeded, updating))| {
                let succeeded = (*succeeded).min(*selected);
                let updating = (*updating).min(selected - succeeded);
                group(&format!("g{index}"), *selected, succeeded, updating, 0)
            })
            .collect();
        let before = Position {
            canary_done: true,
            admitted: 0,
            per_group: groups
                .iter()
                .map(|group| (group.name.clone(), to_u32(group.counts.succeeded + group.counts.updating)))
                .collect(),
        };
        let step = next_wave(&spec, &before, &grouped(groups.clone()));
        if step.state == State::Complete {
            // Every cluster runs it: the wave is no longer split by group.
            return Ok(());
        }
        for group in &groups {
            let had = u64::from(before.per_group[&group.name]);
            let now = u64::from(step.wave.per_child.get(&group.name).copied().unwrap_or(0));
            prop_assert!(now >= had, "a group never shrinks");
            prop_assert!(now <= group.selected.max(had));
            if now > had {
                prop_assert!(now - group.counts.succeeded <= u64::from(per_group));
            }
        }
        let in_flight_before: u64 = groups.iter().map(|group| group.counts.updating).sum();
        let grown: u64 = groups
            .iter()
            .map(|group| u64::from(step.wave.per_child.get(&group.name).copied().unwrap_or(0)) - u64::from(before.per_group[&group.name]))
            .sum();
        prop_assert!(grown == 0 || in_flight_before + grown <= u64::from(concurrency));
    }
}

#[test]
fn groups_by_label_key_the_wave_by_it_with_each_values_number() {
    let spec = RolloutSpec {
        group_label: Some("zone".into()),
        ..per_group_spec(4, 1)
    };
    let first = next_wave(&spec, &Position::default(), &grouped(vec![]));
    assert_eq!(first.wave.key_label.as_deref(), Some("zone"));
    assert_eq!(first.wave.total, 0, "nothing before the groups report");
    let step = next_wave(
        &spec,
        &first.position,
        &grouped(vec![group("a", 3, 0, 0, 0), group("b", 2, 0, 0, 0)]),
    );
    assert_eq!(step.wave.key_label.as_deref(), Some("zone"));
    assert_eq!(
        step.wave.per_value,
        BTreeMap::from([("a".to_string(), 1), ("b".to_string(), 1)])
    );
    assert!(step.wave.per_child.is_empty());
    assert_eq!(step.wave.total, 2);
    // A canary before (its wave keyed by another label): the groups have
    // not reported, so the canary's clusters stay where they are.
    let canary = Position {
        canary_done: true,
        admitted: 3,
        per_group: BTreeMap::new(),
    };
    let step = next_wave(&spec, &canary, &grouped(vec![]));
    assert_eq!(step.position.admitted, 3);
}
