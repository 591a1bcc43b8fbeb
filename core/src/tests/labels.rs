//! Labels the root sets on a cluster: the cluster's record shows them all
//! the way up, and placements that select by them follow.

use super::*;

fn tier_large() -> relaymesh_protocol::PlacementTarget {
    relaymesh_protocol::PlacementTarget {
        selector: Some(relaymesh_protocol::LabelSelector {
            match_labels: [("tier".to_string(), "large".to_string())].into(),
            match_expressions: vec![],
        }),
        ..Default::default()
    }
}

fn label(net: &mut Net, change: relaymesh_protocol::ClusterLabels) {
    let entry = change.to_entry().expect("encodes");
    upsert_at_root(net, entry);
    net.settle();
}

#[test]
fn labels_set_at_the_root_climb_back_up_and_placements_follow() {
    let mut net = fleet();
    let key = "placement/shop/large";
    upsert_at_root(&mut net, placement(key, tier_large()));
    net.settle();
    assert!(!net.keys("e1").contains(key));

    label(
        &mut net,
        relaymesh_protocol::ClusterLabels {
            node: "e1".into(),
            set: [("tier".to_string(), "large".to_string())].into(),
            remove: vec!["zone".into()],
            annotations: Default::default(),
        },
    );
    let record = net.record("root", "e1").expect("e1 at the root");
    assert_eq!(record.labels.get("tier"), Some("large"));
    assert_eq!(record.labels.get("region"), Some("eu"));
    assert!(!record.labels.contains_key("zone"));
    assert!(net.keys("e1").contains(key));
    assert!(!net.keys("e2").contains(key));

    label(
        &mut net,
        relaymesh_protocol::ClusterLabels {
            node: "e1".into(),
            ..Default::default()
        },
    );
    let record = net.record("root", "e1").expect("e1 at the root");
    assert_eq!(record.labels.get("zone"), Some("a"));
    assert!(!net.keys("e1").contains(key));
}
