use super::*;

fn record(name: &str, parent: &str, role: Role) -> NodeRecord {
    NodeRecord {
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

/// A relay `m` with children `a` and `b`, and agent `x` under `a`.
fn inventory() -> Inventory {
    let own = NodeRecord {
        parent: None,
        ..record("m", "", Role::Relay)
    };
    let mut inventory = Inventory::restore(own, &Persisted::default(), 100);
    let mut mutations = Vec::new();
    for child in ["a", "b"] {
        inventory.child_connected(record(child, "m", Role::Relay), 1, &mut mutations);
    }
    let update = InventoryUpdate::Delta {
        upserts: vec![record("x", "a", Role::Agent)],
        removals: vec![],
    };
    inventory.apply_from_child("a", update, &mut mutations);
    inventory
}

fn report(inventory: &mut Inventory, child: &str, upserts: Vec<NodeRecord>, removals: &[&str]) {
    let update = InventoryUpdate::Delta {
        upserts,
        removals: removals.iter().map(|name| name.to_string()).collect(),
    };
    inventory.apply_from_child(child, update, &mut Vec::new());
}

fn parent_of(inventory: &Inventory, name: &str) -> Option<String> {
    inventory
        .record(name)
        .and_then(|record| record.parent.clone())
}

#[test]
fn a_moved_node_goes_to_its_new_side_only_once_the_old_side_lets_go() {
    let mut inventory = inventory();
    inventory.set_moves([("x".to_string(), "b".to_string())].into());
    report(
        &mut inventory,
        "b",
        vec![record("x", "b", Role::Agent)],
        &[],
    );
    assert_eq!(
        parent_of(&inventory, "x").as_deref(),
        Some("a"),
        "a still holds x"
    );
    report(&mut inventory, "a", vec![], &["x"]);
    assert_eq!(parent_of(&inventory, "x").as_deref(), Some("b"));
    assert_eq!(inventory.take_admitted_claims(), ["b"]);
}

/// Relay `r` under `a` with `x` and relay `q` below it, and `z` below
/// `q`, all reported by `a`.
fn with_a_subtree() -> Inventory {
    let mut inventory = inventory();
    report(
        &mut inventory,
        "a",
        vec![
            record("r", "a", Role::Relay),
            record("q", "r", Role::Relay),
            record("y", "r", Role::Agent),
            record("z", "q", Role::Agent),
        ],
        &[],
    );
    inventory
}

/// What `b` reports once `r` moved under it with its subtree.
fn moved_subtree() -> Vec<NodeRecord> {
    vec![
        record("r", "b", Role::Relay),
        record("q", "r", Role::Relay),
        record("y", "r", Role::Agent),
        record("z", "q", Role::Agent),
    ]
}

#[test]
fn a_moved_relay_takes_its_subtree_to_its_new_side_once_the_old_side_lets_go() {
    let mut inventory = with_a_subtree();
    inventory.set_moves([("r".to_string(), "b".to_string())].into());
    report(&mut inventory, "b", moved_subtree(), &[]);
    for node in ["r", "q", "y", "z"] {
        assert_eq!(
            inventory.index().via(node),
            Some("a"),
            "a still holds {node}"
        );
    }
    // The old side's removals come in name order: q before r.
    report(&mut inventory, "a", vec![], &["q", "r", "y", "z"]);
    for node in ["r", "q", "y", "z"] {
        assert_eq!(inventory.index().via(node), Some("b"), "b holds {node}");
    }
    assert_eq!(parent_of(&inventory, "r").as_deref(), Some("b"));
    assert_eq!(parent_of(&inventory, "z").as_deref(), Some("q"));
    assert_eq!(
        inventory.aggregates().get("a").map(Aggregate::clusters),
        Some(1)
    );
    assert_eq!(
        inventory.aggregates().get("b").map(Aggregate::clusters),
        Some(2)
    );
    assert!(inventory.take_admitted_claims().contains(&"b".to_string()));
}

#[test]
fn without_a_move_no_child_lays_claim_to_a_relays_subtree() {
    let mut inventory = with_a_subtree();
    report(&mut inventory, "b", moved_subtree(), &[]);
    report(&mut inventory, "a", vec![], &["q", "r", "y", "z"]);
    for node in ["r", "q", "y", "z"] {
        assert_eq!(
            inventory.index().via(node),
            None,
            "b's word is not taken for {node}"
        );
    }
}

#[test]
fn without_a_move_no_child_lays_claim_to_another_childs_node() {
    let mut inventory = inventory();
    report(
        &mut inventory,
        "b",
        vec![record("x", "b", Role::Agent)],
        &[],
    );
    report(&mut inventory, "a", vec![], &["x"]);
    assert_eq!(
        parent_of(&inventory, "x"),
        None,
        "b's word is not taken for x"
    );
    // Nor for a move to another relay.
    let mut inventory = self::inventory();
    inventory.set_moves([("x".to_string(), "elsewhere".to_string())].into());
    report(
        &mut inventory,
        "b",
        vec![record("x", "b", Role::Agent)],
        &[],
    );
    report(&mut inventory, "a", vec![], &["x"]);
    assert_eq!(parent_of(&inventory, "x"), None);
}

/// The direct children a walk of the subtree finds.
fn walked_children(inventory: &Inventory) -> Vec<String> {
    inventory
        .nodes
        .iter()
        .filter(|(name, (_, via))| *name == via)
        .map(|(name, _)| name.clone())
        .collect()
}

/// The index of direct children follows every change of the subtree:
/// children joining, nodes below them, a moved subtree, a child removed.
#[test]
fn the_direct_children_index_follows_the_subtree() {
    let mut inventory = with_a_subtree();
    assert_eq!(inventory.direct_children(), ["a", "b"]);
    assert_eq!(inventory.direct_children(), walked_children(&inventory));
    inventory.set_moves([("r".to_string(), "b".to_string())].into());
    report(&mut inventory, "b", moved_subtree(), &[]);
    report(&mut inventory, "a", vec![], &["r", "q", "y", "z"]);
    assert_eq!(parent_of(&inventory, "r").as_deref(), Some("b"));
    assert_eq!(inventory.direct_children(), walked_children(&inventory));
    inventory.child_connected(record("c", "m", Role::Relay), 2, &mut Vec::new());
    assert_eq!(inventory.direct_children(), ["a", "b", "c"]);
    inventory.remove_subtree("a", &mut Vec::new());
    assert_eq!(inventory.direct_children(), ["b", "c"]);
    assert_eq!(inventory.direct_children(), walked_children(&inventory));
}

#[test]
fn a_copy_of_every_record_shares_those_that_did_not_change() {
    let mut inventory = inventory();
    let copy: BTreeMap<String, Arc<NodeRecord>> = inventory
        .all_shared()
        .map(|record| (record.name.clone(), Arc::clone(record)))
        .collect();
    assert_eq!(
        inventory.take_touched(),
        None,
        "the first time: copy them all"
    );
    let mut mutations = Vec::new();
    inventory.child_disconnected("b", 2, &mut mutations);
    inventory.child_served("a", 1, 10);
    inventory.child_served("a", 1, 10);
    assert_eq!(
        inventory.take_touched(),
        Some(["a".to_string(), "b".to_string()].into()),
        "the names of what changed, once each"
    );
    assert_eq!(inventory.take_touched(), Some(BTreeSet::new()));
    for record in inventory.all_shared() {
        let before = &copy[&record.name];
        let changed = record.name == "a" || record.name == "b";
        assert_eq!(
            !Arc::ptr_eq(before, record),
            changed,
            "{} copied on write only if it changed",
            record.name
        );
    }
    // What the copy holds is what was, not what is.
    assert!(copy["b"].link.as_ref().is_some_and(|link| link.connected));
    assert!(!inventory.record("b").is_some_and(is_connected));
    assert_eq!(
        copy["a"].link.as_ref().map(|link| link.bundles_served),
        Some(0)
    );
    assert_eq!(
        inventory
            .record("a")
            .and_then(|a| a.link.as_ref())
            .map(|link| link.bundles_served),
        Some(1)
    );
}

#[test]
fn the_children_whose_measurements_changed_are_named_once() {
    let mut inventory = inventory();
    assert_eq!(
        inventory.take_measured_touched(),
        None,
        "the first time: copy them all"
    );
    inventory.child_measured("a", |link| link.acked_revision = 3);
    inventory.child_measured("a", |link| link.acked_revision = 4);
    inventory.child_measured("b", |link| link.acked_revision = 0);
    inventory.child_measured("x", |link| link.acked_revision = 9);
    assert_eq!(
        inventory.take_measured_touched(),
        Some(["a".to_string(), "b".to_string()].into()),
        "a changed twice; b was measured for the first time; x is no direct child"
    );
    inventory.child_measured("b", |link| link.acked_revision = 0);
    inventory.remove_subtree("a", &mut Vec::new());
    assert_eq!(
        inventory.take_measured_touched(),
        Some(["a".to_string()].into()),
        "an unchanged measurement is no change; a child that went is one"
    );
    assert!(!inventory.measured().contains_key("a"));
}

#[test]
fn a_record_shares_its_labels_with_its_aggregate() {
    let mut inventory = inventory();
    let labelled = |name: &str, parent: &str, region: &str| NodeRecord {
        labels: [("region".to_string(), region.to_string())].into(),
        ..record(name, parent, Role::Agent)
    };
    report(&mut inventory, "a", vec![labelled("a1", "a", "eu")], &[]);
    report(&mut inventory, "b", vec![labelled("b1", "b", "eu")], &[]);
    report(&mut inventory, "b", vec![labelled("b2", "b", "us")], &[]);
    let labels =
        |inventory: &Inventory, name: &str| inventory.record(name).expect("held").labels.clone();
    let (aggregated, count) = inventory.aggregates()["b"]
        .iter()
        .find(|(set, _)| set.get("region") == Some("eu"))
        .expect("b's aggregate counts its eu cluster");
    assert_eq!(count, 1);
    assert!(aggregated.shares_with(&labels(&inventory, "b1")));
    // Relays `a` and `b` share the empty set; a label set on `a` copies it.
    assert!(labels(&inventory, "a").shares_with(&labels(&inventory, "b")));
    let mut mutations = Vec::new();
    assert!(inventory.set_child_label("a", "tier", Some("edge"), &mut mutations));
    assert_eq!(labels(&inventory, "a").len(), 1);
    assert!(labels(&inventory, "b").is_empty());
}
