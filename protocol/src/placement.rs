//! What a placement says about where it goes, as it travels down the tree.
//!
//! A relay receives a [`PlacementTarget`], resolves it against its own
//! subtree's inventory, and sends each child the same target with the
//! [`Quota`] that child must fill. The root starts with no quota: it derives
//! one from `max_clusters` and `spread_by`. A rollout's [`Wave`] travels the
//! same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod body;

/// The prefix of every placement's slice key (`placement/NAMESPACE/NAME`).
pub const KEY_PREFIX: &str = "placement/";

/// A Kubernetes-style label selector: all of `match_labels` and all of
/// `match_expressions` must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements.
    pub match_expressions: Vec<LabelRequirement>,
}

/// One requirement of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// How the key's value is tested.
    pub operator: SelectorOperator,
    /// The values for `In` and `NotIn`.
    pub values: Vec<String>,
}

/// The operators of a [`LabelRequirement`], as Kubernetes names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// Where a placement's workloads go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PlacementTarget {
    /// Clusters whose labels match; `None` selects no cluster by labels.
    pub selector: Option<LabelSelector>,
    /// Clusters named explicitly; always selected, whatever the bound.
    pub names: Vec<String>,
    /// At most this many clusters chosen by `selector`.
    pub max_clusters: Option<u32>,
    /// Spread the bound evenly over this label's values.
    pub spread_by: Option<String>,
    /// The share of the bound this subtree must fill, set by the parent.
    pub quota: Option<Quota>,
    /// While a rollout runs: how many of this subtree's selected clusters
    /// run the newest revision (the entry's first bundle), set by the root
    /// and cut by every relay like the quota; the others run the previous
    /// revision (the second bundle) or wait for their wave. `None`: every
    /// selected cluster runs every bundle of the entry. Boxed: most targets
    /// have none, and a relay holds one target per child and placement.
    pub wave: Option<Box<Wave>>,
}

/// The key of the clusters that lack a wave's [`Wave::key_label`]: not a
/// valid label value, so no cluster's value is ever taken for it. They come
/// last in a wave's order.
pub const UNLABELLED: &str = "(none)";

/// How many clusters of a subtree run a placement's newest revision.
///
/// The root sets only `total` (and the label that orders the rollout); the
/// root's core derives `per_value` from its supply, first values first, and
/// every relay splits both over its children, so no node ever lists the
/// clusters of a wave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Wave {
    /// The cluster label whose values order the rollout (`orderBy`, or a
    /// canary's group label); `None`: any order.
    pub key_label: Option<String>,
    /// How many clusters of the subtree run the newest revision.
    pub total: u32,
    /// With `key_label`: how many of `total` per value of the label
    /// ([`UNLABELLED`] for clusters without it). Empty where it is still to
    /// be derived (at the root).
    pub per_value: BTreeMap<String, u32>,
    /// At most this many per value when deriving `per_value` (a canary's one
    /// cluster per region); `None`: no bound.
    pub per_value_cap: Option<u32>,
    /// Set by the root alone, for a rollout with `maxUnavailablePerGroup`:
    /// how many clusters of each of the root's children's subtrees run the
    /// newest revision (the root's core hands each child its number instead
    /// of splitting `total`). Empty everywhere else. Protocol version 7.
    pub per_child: BTreeMap<String, u32>,
}

/// How many selected clusters one subtree must provide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quota {
    /// The number of clusters.
    pub total: u32,
    /// With `spread_by`: how many of `total` per value of that label.
    pub per_value: BTreeMap<String, u32>,
}
