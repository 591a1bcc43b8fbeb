//! What the core says of one placement, handed from the event loop to the
//! placement controller for its status and rollout.

use relaymesh_protocol::{BundleId, PlacementStatus};

/// What the core says of one placement, for its status.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlacementReport {
    /// How many clusters the root's split selects.
    pub selected: u64,
    /// How they are doing, merged up the tree.
    pub status: PlacementStatus,
    /// The bundles of the placement's entry now.
    pub bundles: Vec<BundleId>,
    /// The clusters it is leaving, which keep their copies until the ones
    /// it now selects are ready (`handover`).
    pub leaving: Vec<String>,
    /// How many clusters the root's split of a rollout's wave reached.
    pub wave: Option<u64>,
    /// Each of the root's children's part (a rollout's groups).
    pub parts: Vec<relaymesh_core::ChildPart>,
    /// With a wave keyed by a label: the label, and how many clusters the
    /// placement selects per value of it.
    pub by_value: Option<(String, std::collections::BTreeMap<String, u64>)>,
    /// The names in its `clusters.names` that are no cluster of the tree.
    pub unknown: Vec<String>,
}
