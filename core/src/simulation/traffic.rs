//! What each node of a simulation handled and sent, and the sums per level
//! of the tree: the measure of how a relay's work grows with its children
//! rather than with the destinations below.

use std::ops::AddAssign;

use serde::Serialize;

use super::Node;

/// Counters of one node, or of many summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// Events its core was handed: messages, links opening and closing,
    /// timers, bundle transfers. Its work, in calls.
    pub events: u64,
    /// Messages received from its parent.
    pub messages_from_parent: u64,
    /// Slice changes (of deltas) and entries (of snapshots) in them: what
    /// a resumed link cost beyond its greeting.
    pub slice_changes_from_parent: u64,
    /// Messages received from its children.
    pub messages_from_children: u64,
    /// Inventory records (upserts and removals) in the messages received
    /// from its children: what its subtree's changes cost it.
    pub inventory_records_from_children: u64,
    /// Messages sent to its parent.
    pub messages_to_parent: u64,
    /// Encoded bytes of the status messages it sent to its parent.
    pub status_bytes_to_parent: u64,
    /// Encoded bytes of the status messages its children sent it.
    pub status_bytes_from_children: u64,
    /// Messages sent to its children.
    pub messages_to_children: u64,
    /// Bundles fetched from its parent and stored.
    pub bundles_fetched: u64,
    /// Their bytes.
    pub bundle_bytes_fetched: u64,
    /// Bundles its children fetched from it.
    pub bundles_served: u64,
    /// Batches of mutations it persisted.
    pub persist_batches: u64,
    /// Mutations in them.
    pub mutations: u64,
}

impl AddAssign<&Traffic> for Traffic {
    fn add_assign(&mut self, other: &Traffic) {
        self.events += other.events;
        self.messages_from_parent += other.messages_from_parent;
        self.slice_changes_from_parent += other.slice_changes_from_parent;
        self.messages_from_children += other.messages_from_children;
        self.inventory_records_from_children += other.inventory_records_from_children;
        self.messages_to_parent += other.messages_to_parent;
        self.status_bytes_to_parent += other.status_bytes_to_parent;
        self.status_bytes_from_children += other.status_bytes_from_children;
        self.messages_to_children += other.messages_to_children;
        self.bundles_fetched += other.bundles_fetched;
        self.bundle_bytes_fetched += other.bundle_bytes_fetched;
        self.bundles_served += other.bundles_served;
        self.persist_batches += other.persist_batches;
        self.mutations += other.mutations;
    }
}

/// The traffic of one level of the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LevelTraffic {
    /// 0 for the root.
    pub level: usize,
    /// Nodes at this level.
    pub nodes: u64,
    /// Their traffic, summed.
    pub total: Traffic,
    /// The most events one node of the level handled.
    pub max_events: u64,
    /// The most messages one node of the level received (from its parent
    /// and its children).
    pub max_messages_received: u64,
}

/// Sums `nodes`' traffic per level.
pub(super) fn by_level(nodes: &[Node]) -> Vec<LevelTraffic> {
    let mut levels: Vec<LevelTraffic> = Vec::new();
    for node in nodes {
        while levels.len() <= node.depth {
            let level = levels.len();
            levels.push(LevelTraffic {
                level,
                ..LevelTraffic::default()
            });
        }
        let level = &mut levels[node.depth];
        let traffic = &node.traffic;
        level.nodes += 1;
        level.total += traffic;
        level.max_events = level.max_events.max(traffic.events);
        level.max_messages_received = level
            .max_messages_received
            .max(traffic.messages_from_parent + traffic.messages_from_children);
    }
    levels
}
