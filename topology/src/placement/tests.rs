use proptest::prelude::*;

use super::*;
use crate::model::{resolve_tree, Resolution, Tree};
use crate::selector;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn target(selector: &str, max: Option<u32>, spread_by: Option<&str>) -> PlacementTarget {
    PlacementTarget {
        selector: Some(selector::parse(selector).expect("valid")),
        max_clusters: max,
        spread_by: spread_by.map(str::to_string),
        ..PlacementTarget::default()
    }
}

#[test]
fn water_fill_is_even_and_bounded() {
    assert_eq!(water_fill(4, &[1, 10, 10]), vec![1, 2, 1]);
    assert_eq!(water_fill(5, &[1, 10, 10]), vec![1, 2, 2]);
    assert_eq!(water_fill(30, &[1, 10, 10]), vec![1, 10, 10]);
    assert_eq!(water_fill(2, &[0, 3, 3, 3]), vec![0, 1, 1, 0]);
    assert_eq!(water_fill(0, &[3, 3]), vec![0, 0]);
    assert_eq!(water_fill(3, &[]), Vec::<u64>::new());
}

#[test]
fn the_root_spreads_max_clusters_over_values_in_sorted_order() {
    let supply = Supply {
        total: 21,
        per_value: [("a".into(), 1), ("b".into(), 10), ("c".into(), 10)].into(),
    };
    let quota = spread(4, &supply);
    assert_eq!(quota.total, 4);
    assert_eq!(
        quota.per_value,
        [("a".into(), 1), ("b".into(), 2), ("c".into(), 1)].into()
    );
    assert_eq!(spread(100, &supply).total, 21);
    let plain = Supply {
        total: 7,
        per_value: BTreeMap::new(),
    };
    assert_eq!(spread(100, &plain).total, 7);
}

#[test]
fn a_split_is_sticky_to_the_previous_one() {
    let edge = labels(&[("tier", "edge")]);
    let aggregates: Vec<(String, Aggregate)> = (0..4)
        .map(|i| {
            let mut aggregate = Aggregate::new();
            aggregate.add_many(&edge.clone().into(), 5);
            (format!("child-{i}"), aggregate)
        })
        .collect();
    let children: Vec<ChildInput<'_>> = aggregates
        .iter()
        .map(|(name, aggregate)| ChildInput { name, aggregate })
        .collect();
    let first = split(
        "p",
        &target("tier=edge", Some(6), None),
        None,
        &children,
        None,
    );
    assert_eq!(first.quota_sum().total, 6);
    assert_eq!(first.per_child.len(), 4, "6 over 4 children: 2,2,1,1");
    // Growing the bound only adds; every child keeps what it had.
    let grown = split(
        "p",
        &target("tier=edge", Some(9), None),
        None,
        &children,
        Some(&first),
    );
    for (child, share) in &first.per_child {
        let (ChildShare::Quota(before), Some(ChildShare::Quota(after))) =
            (share, grown.per_child.get(child))
        else {
            panic!("bounded shares are quotas");
        };
        assert!(after.total >= before.total);
    }
    // Shrinking trims the largest shares first.
    let shrunk = split(
        "p",
        &target("tier=edge", Some(4), None),
        None,
        &children,
        Some(&first),
    );
    assert_eq!(shrunk.quota_sum().total, 4);
    assert!(shrunk.per_child.values().all(|share| *share
        == ChildShare::Quota(Quota {
            total: 1,
            per_value: BTreeMap::new()
        })));
    // Without a bound every child with matching clusters gets everything.
    let all = split("p", &target("tier=edge", None, None), None, &children, None);
    assert!(all.per_child.values().all(|s| *s == ChildShare::Unbounded));
    assert_eq!(all.per_child.len(), 4);
}

#[test]
fn names_reach_their_child_and_leaves_decide_alike() {
    let mut tree = Tree::new("root");
    let eu = tree.add_relay(0, "eu").expect("root is a relay");
    let edge = labels(&[("tier", "edge"), ("region", "eu")]);
    let core = labels(&[("tier", "core"), ("region", "eu")]);
    tree.add_cluster(eu, "eu-1", &edge).expect("relay");
    tree.add_cluster(eu, "eu-2", &core).expect("relay");
    tree.build_aggregates();
    let mut named = target("tier=edge", Some(0), None);
    named.names = vec!["eu-2".into(), "nowhere".into()];
    let resolution = resolve_tree(&tree, "p", &named, None);
    assert!(
        resolution.by_label.is_empty(),
        "max 0 selects none by label"
    );
    assert_eq!(resolution.selected(), ["eu-2".to_string()].into());

    let at_root = split("p", &named, None, &[], None);
    let eu_named: BTreeSet<String> = ["eu".to_string()].into();
    let to_eu = cut(&named, &at_root, &eu_named, "eu").expect("named below eu");
    assert_eq!(to_eu.quota, Some(Quota::default()));
    assert!(leaf_selects(&to_eu, "eu-2", &core));
    assert!(!leaf_selects(&to_eu, "eu-1", &edge));
    let mut one = to_eu.clone();
    one.quota = Some(Quota {
        total: 1,
        per_value: BTreeMap::new(),
    });
    assert!(leaf_selects(&one, "eu-1", &edge));
    assert!(!leaf_selects(
        &target("tier=edge", None, None),
        "eu-2",
        &core
    ));
    assert!(leaf_selects(
        &target("tier=edge", None, None),
        "eu-1",
        &edge
    ));
}

/// A tree: clusters under the root, and relays each with clusters and
/// relays of clusters (two or three levels).
type Shape = (Vec<Labels>, Vec<(Vec<Labels>, Vec<Vec<Labels>>)>);

fn label_set() -> impl Strategy<Value = Labels> {
    (
        proptest::option::of(prop_oneof![Just("a"), Just("b"), Just("c")]),
        proptest::option::of(prop_oneof![Just("x"), Just("y")]),
        proptest::option::of(prop_oneof![Just("1"), Just("2")]),
    )
        .prop_map(|(region, tier, zone)| {
            let mut labels = Labels::new();
            for (key, value) in [("region", region), ("tier", tier), ("zone", zone)] {
                if let Some(value) = value {
                    labels.insert(key.to_string(), value.to_string());
                }
            }
            labels
        })
}

fn shape() -> impl Strategy<Value = Shape> {
    let clusters = || prop::collection::vec(label_set(), 0..5);
    let relay = (clusters(), prop::collection::vec(clusters(), 0..4));
    (clusters(), prop::collection::vec(relay, 1..4))
}

fn placement() -> impl Strategy<Value = PlacementTarget> {
    let selector = prop_oneof![
        Just(""),
        Just("region=a"),
        Just("region in (a,b)"),
        Just("tier!=x"),
        Just("!zone"),
        Just("zone,region notin (c)"),
    ];
    let spread = prop_oneof![Just(None), Just(Some("region")), Just(Some("tier"))];
    let names = prop::collection::vec(
        prop_oneof![Just("c0"), Just("c3"), Just("c9"), Just("x")],
        0..3,
    );
    (selector, proptest::option::of(0u32..14), spread, names).prop_map(
        |(selector, max, spread, names)| PlacementTarget {
            names: names.into_iter().map(str::to_string).collect(),
            ..target(selector, max, spread)
        },
    )
}

/// Builds the tree; children in reverse order when `reversed`.
fn build(shape: &Shape, reversed: bool) -> Tree {
    let mut tree = Tree::new("root");
    let mut next = 0;
    let add_clusters = |tree: &mut Tree, parent, clusters: &[Labels], offset: usize| {
        let mut named: Vec<(String, &Labels)> = clusters
            .iter()
            .enumerate()
            .map(|(i, labels)| (format!("c{}", offset + i), labels))
            .collect();
        if reversed {
            named.reverse();
        }
        for (name, labels) in named {
            tree.add_cluster(parent, &name, labels)
                .expect("parent is a relay");
        }
    };
    // Number clusters in one fixed order, whatever the insertion order.
    let mut offsets = Vec::new();
    for (own, relays) in &shape.1 {
        offsets.push(next);
        next += own.len() + relays.iter().map(Vec::len).sum::<usize>();
    }
    let root_offset = next;
    let mut relays: Vec<usize> = (0..shape.1.len()).collect();
    if reversed {
        relays.reverse();
    }
    for i in relays {
        let (own, below) = &shape.1[i];
        let relay = tree.add_relay(0, &format!("r{i}")).expect("root");
        let mut offset = offsets[i];
        add_clusters(&mut tree, relay, own, offset);
        offset += own.len();
        let mut subs: Vec<(usize, usize)> = Vec::new();
        for (j, clusters) in below.iter().enumerate() {
            subs.push((j, offset));
            offset += clusters.len();
        }
        if reversed {
            subs.reverse();
        }
        for (j, offset) in subs {
            let sub = tree.add_relay(relay, &format!("r{i}-{j}")).expect("relay");
            add_clusters(&mut tree, sub, &below[j], offset);
        }
    }
    add_clusters(&mut tree, 0, &shape.0, root_offset);
    tree.build_aggregates();
    tree
}

/// Every cluster of the tree with its labels, by brute force.
fn clusters(tree: &Tree) -> Vec<(String, Labels)> {
    (0..tree.len())
        .filter_map(|id| Some((tree.name(id).to_string(), tree.labels(id)?.to_map())))
        .collect()
}

fn eligible(target: &PlacementTarget, labels: &Labels) -> bool {
    let selector = target.selector.as_ref().expect("generated with a selector");
    selector::matches(selector, labels)
        && target
            .spread_by
            .as_ref()
            .is_none_or(|key| labels.contains_key(key))
}

/// The quota each visited relay received: the root's own, or its parent's
/// share for it.
fn own_quota(tree: &Tree, resolution: &Resolution, relay: &str) -> Option<Quota> {
    let id = tree.find(relay).expect("visited relays exist");
    let Some(parent) = tree.parent(id) else {
        return resolution.root_quota.clone();
    };
    let split = &resolution.splits[tree.name(parent)];
    match split.per_child.get(relay) {
        Some(ChildShare::Quota(quota)) => Some(quota.clone()),
        Some(ChildShare::Unbounded) => None,
        None => resolution.root_quota.as_ref().map(|_| Quota::default()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn quotas_add_up_and_never_exceed_supply(shape in shape(), target in placement()) {
        let tree = build(&shape, false);
        let resolution = resolve_tree(&tree, "shop/storefront", &target, None);
        let selector = target.selector.as_ref();
        let spread_by = target.spread_by.as_deref();
        for (relay, split) in &resolution.splits {
            // (a) the children's quotas add up to the relay's own.
            if let Some(own) = own_quota(&tree, &resolution, relay) {
                let sum = split.quota_sum();
                prop_assert_eq!(sum.total, own.total, "at {}", relay);
                if spread_by.is_some() {
                    prop_assert_eq!(sum.per_value, own.per_value, "at {}", relay);
                }
            }
            // (b) no child gets more than it can supply.
            for (child, share) in &split.per_child {
                let id = tree.find(child).expect("children exist");
                let supply = tree.aggregate(id).supply(selector, spread_by);
                match share {
                    ChildShare::Unbounded => prop_assert!(target.max_clusters.is_none()),
                    ChildShare::Quota(quota) => {
                        prop_assert!(u64::from(quota.total) <= supply.total);
                        prop_assert!(quota.total > 0);
                        for (value, count) in &quota.per_value {
                            prop_assert!(u64::from(*count) <= supply.per_value.get(value).copied().unwrap_or(0));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn leaves_select_exactly_the_bound(shape in shape(), target in placement()) {
        let tree = build(&shape, false);
        let resolution = resolve_tree(&tree, "shop/storefront", &target, None);
        let all = clusters(&tree);
        let matching: BTreeSet<String> = all
            .iter()
            .filter(|(_, labels)| eligible(&target, labels))
            .map(|(name, _)| name.clone())
            .collect();
        // (c) exactly min(max, supply), all matching.
        prop_assert!(resolution.by_label.is_subset(&matching));
        match target.max_clusters {
            None => prop_assert_eq!(&resolution.by_label, &matching),
            Some(max) => prop_assert_eq!(resolution.by_label.len(), matching.len().min(max as usize)),
        }
        // Per spread value, as the root decided, and the root spread evenly.
        if let (Some(key), Some(max)) = (target.spread_by.as_ref(), target.max_clusters) {
            let root_quota = resolution.root_quota.clone().expect("bounded");
            let mut per_value: BTreeMap<String, u32> = BTreeMap::new();
            for (name, labels) in &all {
                if resolution.by_label.contains(name) {
                    *per_value.entry(labels[key].clone()).or_default() += 1;
                }
            }
            prop_assert_eq!(&per_value, &root_quota.per_value);
            let mut supply = Supply::default();
            for (_, labels) in all.iter().filter(|(_, labels)| eligible(&target, labels)) {
                supply.total += 1;
                *supply.per_value.entry(labels[key].clone()).or_default() += 1;
            }
            prop_assert_eq!(root_quota, spread(max, &supply));
        }
        let names: BTreeSet<String> = all
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| target.names.contains(name))
            .collect();
        prop_assert_eq!(&resolution.by_name, &names);
    }

    #[test]
    fn unrelated_or_surplus_clusters_change_nothing(
        shape in shape(),
        target in placement(),
        labels in label_set(),
        at in any::<prop::sample::Index>(),
    ) {
        let tree = build(&shape, false);
        let before = resolve_tree(&tree, "shop/storefront", &target, None);
        let relays: Vec<usize> = (0..tree.len()).filter(|id| tree.labels(*id).is_none()).collect();
        let mut grown = tree.clone();
        grown.add_cluster(*at.get(&relays), "newcomer", &labels).expect("a relay");
        grown.build_aggregates();
        if !eligible(&target, &labels) {
            // (d) a cluster the placement cannot select changes no split.
            let after = resolve_tree(&grown, "shop/storefront", &target, None);
            prop_assert_eq!(&after.splits, &before.splits);
            prop_assert_eq!(&after.by_label, &before.by_label);
            return Ok(());
        }
        let Some(max) = target.max_clusters else { return Ok(()) };
        let supply = before.by_label.len();
        let met = supply == max as usize;
        let value_has_spare = match target.spread_by.as_ref() {
            None => true,
            Some(key) => {
                let value = &labels[key];
                let quota = before.root_quota.as_ref().expect("bounded");
                let given = quota.per_value.get(value).copied().unwrap_or(0) as usize;
                let available = clusters(&tree)
                    .iter()
                    .filter(|(_, l)| eligible(&target, l) && l.get(key) == Some(value))
                    .count();
                given < available
            }
        };
        if met && value_has_spare {
            // (d) with the bound met, a newcomer displaces no one.
            let after = resolve_tree(&grown, "shop/storefront", &target, Some(&before));
            prop_assert_eq!(&after.by_label, &before.by_label);
        }
    }

    #[test]
    fn the_same_inputs_give_the_same_result(shape in shape(), target in placement()) {
        let tree = build(&shape, false);
        let first = resolve_tree(&tree, "shop/storefront", &target, None);
        prop_assert_eq!(&resolve_tree(&tree, "shop/storefront", &target, None), &first);
        // (e) the order in which children are listed does not matter.
        let reversed = build(&shape, true);
        prop_assert_eq!(&resolve_tree(&reversed, "shop/storefront", &target, None), &first);
        let sticky = resolve_tree(&reversed, "shop/storefront", &target, Some(&first));
        prop_assert_eq!(&sticky, &first);
    }

    #[test]
    fn split_ignores_child_order(shape in shape(), target in placement()) {
        let tree = build(&shape, false);
        let children: Vec<ChildInput<'_>> = tree
            .children(tree.root())
            .iter()
            .map(|id| ChildInput { name: tree.name(*id), aggregate: tree.aggregate(*id) })
            .collect();
        let mut reversed = children.clone();
        reversed.reverse();
        let first = split("k", &target, None, &children, None);
        prop_assert_eq!(&split("k", &target, None, &reversed, None), &first);
        prop_assert_eq!(split("k", &target, None, &reversed, Some(&first)), first);
    }
}

#[test]
fn no_selector_selects_by_name_only() {
    let target = PlacementTarget {
        selector: None,
        names: vec!["c1".into()],
        ..PlacementTarget::default()
    };
    let aggregate = Aggregate::of_cluster(&labels(&[("tier", "edge")]).into());
    let children = [ChildInput {
        name: "c1",
        aggregate: &aggregate,
    }];
    assert_eq!(split("k", &target, None, &children, None), Split::default());
}

#[test]
fn a_drained_cluster_is_replaced_and_a_cordoned_one_keeps_but_gets_nothing_new() {
    let edge = labels(&[("tier", "edge")]);
    let mut cordoned = edge.clone();
    cordoned.insert(CORDONED_LABEL.into(), "true".into());
    let mut drained = cordoned.clone();
    drained.insert(DRAINING_LABEL.into(), "true".into());
    let one = |labels: &Labels| Aggregate::of_cluster(&labels.clone().into());
    let (a, b, c) = (one(&edge), one(&edge), one(&edge));
    let children = |a: &Aggregate, b: &Aggregate, c: &Aggregate| {
        vec![("a", a.clone()), ("b", b.clone()), ("c", c.clone())]
    };
    let two = target("tier=edge", Some(2), None);
    let split_of = |kids: &[(&str, Aggregate)], previous: Option<&Split>| {
        let inputs: Vec<ChildInput<'_>> = kids
            .iter()
            .map(|(name, aggregate)| ChildInput { name, aggregate })
            .collect();
        split("p", &two, None, &inputs, previous)
    };
    let first = split_of(&children(&a, &b, &c), None);
    assert_eq!(first.per_child.len(), 2);
    let holders: Vec<String> = first.per_child.keys().cloned().collect();
    let spare = ["a", "b", "c"]
        .into_iter()
        .find(|name| !first.per_child.contains_key(*name))
        .expect("one child is spare");

    // Cordon one holder: it keeps its share.
    let mut kids = children(&a, &b, &c);
    for kid in &mut kids {
        if kid.0 == holders[0] {
            kid.1 = one(&cordoned);
        }
    }
    let kept = split_of(&kids, Some(&first));
    assert_eq!(kept, first, "a cordoned cluster keeps what it has");
    // Without a previous split (a new placement) it gets nothing.
    let fresh = split_of(&kids, None);
    assert!(!fresh.per_child.contains_key(holders[0].as_str()));
    assert_eq!(fresh.quota_sum().total, 2);

    // Drain it: its share goes to the spare cluster.
    for kid in &mut kids {
        if kid.0 == holders[0] {
            kid.1 = one(&drained);
        }
    }
    let moved = split_of(&kids, Some(&first));
    assert!(!moved.per_child.contains_key(holders[0].as_str()));
    assert!(moved.per_child.contains_key(spare));
    assert!(moved.per_child.contains_key(holders[1].as_str()));
}

#[test]
fn a_target_selects_by_name_or_labels_and_a_bounded_one_never_a_drained_cluster() {
    let eu = labels(&[("region", "eu")]);
    let mut drained = eu.clone();
    drained.insert(DRAINING_LABEL.into(), "true".into());
    let mut lost = eu.clone();
    lost.insert(LOST_LABEL.into(), "true".into());
    let every = target("region=eu", None, None);
    let bounded = target("region=eu", Some(2), None);
    for selecting in [&every, &bounded] {
        assert!(target_selects(selecting, "eu-1", &eu));
        assert!(!target_selects(
            selecting,
            "us-1",
            &labels(&[("region", "us")])
        ));
    }
    assert!(
        target_selects(&every, "eu-1", &drained),
        "stays, as a DaemonSet"
    );
    assert!(!target_selects(&bounded, "eu-1", &drained));
    assert!(!target_selects(&bounded, "eu-1", &lost));
    let named = PlacementTarget {
        names: vec!["eu-1".into()],
        ..bounded.clone()
    };
    assert!(target_selects(&named, "eu-1", &drained), "named");
    let quota = PlacementTarget {
        max_clusters: None,
        quota: Some(Quota::default()),
        ..bounded
    };
    assert!(
        !target_selects(&quota, "eu-1", &drained),
        "a relay's share is bounded too"
    );
}
