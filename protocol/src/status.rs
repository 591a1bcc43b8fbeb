//! Status that flows up: how the clusters below a node are doing with each
//! placement, as counts that merge by addition at every relay.

use serde::{Deserialize, Serialize};

/// Clusters by phase for one placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PhaseCounts {
    /// Assigned, not yet applied.
    pub pending: u64,
    /// Applied, not yet ready.
    pub applied: u64,
    /// Applied and ready.
    pub ready: u64,
    /// Applying failed, or a workload failed.
    pub failed: u64,
    /// Assigned, but the cluster's link is down.
    pub offline: u64,
}

/// How many failing clusters a status names: the first by name. The counts
/// say how many there are in all.
pub const MAX_FAILING_CLUSTERS: usize = 10;

/// How one placement is doing below a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementStatus {
    /// Clusters by phase.
    pub counts: PhaseCounts,
    /// One failure, for people (`cluster: Deployment shop/web: …`).
    pub message: Option<String>,
    /// Failing clusters with why, sorted by name, at most
    /// [`MAX_FAILING_CLUSTERS`] (appended in protocol version 5).
    pub failing: Vec<FailingCluster>,
}

/// A cluster whose copy of a placement failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FailingCluster {
    /// The cluster's name.
    pub cluster: String,
    /// What failed, as its agent says (`Deployment shop/web: …`).
    pub message: String,
}

/// A change of the status a child reports for its subtree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// Replaces everything the child reported before (sent on every new
    /// link).
    pub full: bool,
    /// Placements whose status changed, by slice key.
    pub upserts: Vec<(String, PlacementStatus)>,
    /// Placements the child no longer reports.
    pub removals: Vec<String>,
}
