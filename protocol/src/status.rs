//! Status that flows up: how the clusters below a node are doing with each
//! placement, as summaries that every relay merges (the algebra is in
//! `relaymesh_topology::summary`): counts by phase, the first failing
//! clusters by name, one [`RuleSummary`] per status rule, and, while a
//! status covers exactly one cluster, that cluster's objects' own status.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::BundleId;

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
    /// One summary per status rule of the placement, by rule name
    /// (appended in protocol version 5).
    pub rules: Vec<RuleSummary>,
    /// While the status covers exactly one cluster: the status of each
    /// object that cluster applied, at most [`MAX_REPORTED_OBJECTS`], so the
    /// root can copy it onto its own objects (appended in protocol version
    /// 5). Empty as soon as more than one cluster is counted.
    pub objects: Vec<ObjectStatus>,
    /// How the clusters are doing with the newest revision of a placement
    /// that rolls out, per revision as the clusters know it (the newest
    /// first reaches some clusters before others), at most
    /// [`MAX_REVISIONS`], sorted by revision (protocol version 6).
    pub revisions: Vec<RevisionCounts>,
    /// The same counts per value of the label the rollout's wave is keyed
    /// by (the clusters know it from their wave), so the root can give each
    /// value of a `maxUnavailablePerGroup` label its own budget; at most
    /// [`MAX_REVISION_GROUPS`], sorted (protocol version 7).
    pub revision_groups: Vec<RevisionGroup>,
    /// The clusters by phase per revision they last applied (the first
    /// bundle of what they run), at most [`MAX_REVISIONS`], sorted by
    /// revision (protocol version 10). Every placement has them, rolling out
    /// or not: the root tells from them how many clusters run its newest
    /// revision, and how many of those are ready, so that `Ready` follows
    /// the workloads and not only the spec. Clusters that applied nothing
    /// yet are in no revision.
    pub applied_revisions: Vec<AppliedRevision>,
}

/// The clusters that last applied one revision of a placement, by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AppliedRevision {
    /// The revision: the first bundle the clusters applied.
    pub revision: BundleId,
    /// Those clusters by phase.
    pub counts: PhaseCounts,
}

/// How many revisions a status counts clusters of ([`PlacementStatus::revisions`]).
pub const MAX_REVISIONS: usize = 4;

/// How many (label, value, revision) groups a status counts clusters of
/// ([`PlacementStatus::revision_groups`]).
pub const MAX_REVISION_GROUPS: usize = 64;

/// The clusters with one value of a label, and how they are doing with one
/// revision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RevisionGroup {
    /// The label (the wave's `key_label`).
    pub label: String,
    /// Its value ([`crate::UNLABELLED`] for clusters without it).
    pub value: String,
    /// Their counts.
    pub counts: RevisionCounts,
}

/// How the selected clusters are doing with one revision of a placement
/// that rolls out (the first bundle of its entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RevisionCounts {
    /// The revision: the bundle the entry names first.
    pub revision: BundleId,
    /// Selected, not in a wave yet: running the previous revision, or
    /// nothing if there is none.
    pub waiting: u64,
    /// Running it, not yet ready for the rollout's `minSuccessTime`.
    pub updating: u64,
    /// Running it, ready for at least `minSuccessTime`.
    pub succeeded: u64,
    /// Running it, and it failed or was not ready within the rollout's
    /// `progressDeadline`.
    pub failed: u64,
}

/// How many groups a rule's summary keeps, the first by key; the values of
/// the others are merged into [`RuleSummary::other`].
pub const MAX_GROUPS: usize = 32;

/// How many status rules a placement may have.
pub const MAX_RULES: usize = 16;

/// How many cluster labels a placement may group its phase counts by
/// (`spec.statusGroupBy`); each travels as two reserved [`RuleSummary`]s.
pub const MAX_GROUP_LABELS: usize = 4;

/// How many [`RuleSummary`]s a status carries: the placement's rules and
/// the phase counts of its group labels.
pub const MAX_RULE_SUMMARIES: usize = MAX_RULES + 2 * MAX_GROUP_LABELS;

/// How many of the largest values a [`Summary`] keeps with their clusters.
pub const MAX_TOP: usize = 10;

/// How many objects a single cluster's status carries ([`PlacementStatus::objects`]).
pub const MAX_REPORTED_OBJECTS: usize = 32;

/// How many bytes of one object's `.status` travel
/// ([`ObjectStatus::status`]); a larger status is not reported.
pub const MAX_OBJECT_STATUS_BYTES: usize = 16 * 1024;

/// One status rule's values below a node: all of them, and per group when
/// the rule groups by a cluster label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuleSummary {
    /// The rule's name (`spec.statusRules[].name`).
    pub rule: String,
    /// Every value.
    pub all: Summary,
    /// With a group-by: each group's values by key (the label's value), the
    /// first [`MAX_GROUPS`] keys in order.
    pub groups: Vec<(String, Summary)>,
    /// The values of every group past the first [`MAX_GROUPS`].
    pub other: Summary,
}

/// A mergeable summary of numbers: how many, their sum (so also their
/// average), the smallest and largest, and the largest few with the cluster
/// each came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Summary {
    /// How many values.
    pub count: u64,
    /// Their sum.
    pub sum: Number,
    /// The smallest value, if any.
    pub min: Option<Number>,
    /// The largest value, if any.
    pub max: Option<Number>,
    /// The largest values, largest first, at most [`MAX_TOP`].
    pub top: Vec<Ranked>,
}

/// A value and the cluster it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ranked {
    /// The value.
    pub value: Number,
    /// The cluster that reported it.
    pub cluster: String,
}

/// A finite number as status rules produce it. Equality and order are
/// IEEE 754's total order, so summaries can be compared and sorted.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Number(pub f64);

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Number {}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Hash for Number {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// One object's own status on the one cluster a status covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectStatus {
    /// The object's API group (`""` for the core group).
    pub group: String,
    /// The object's kind.
    pub kind: String,
    /// The object's namespace, for a namespaced object.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The bundle the applied object came from, so the root copies a status
    /// only onto the revision it belongs to.
    pub bundle: BundleId,
    /// Whether the cluster's controllers have seen the applied spec
    /// (`status.observedGeneration` at least `metadata.generation`, or the
    /// kind has no `observedGeneration`).
    pub observed: bool,
    /// The object's `.status` as JSON, at most [`MAX_OBJECT_STATUS_BYTES`].
    pub status: Vec<u8>,
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
