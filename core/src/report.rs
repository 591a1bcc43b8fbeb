//! What the root's core says of each placement, for the placement
//! controller's status and rollouts: one assembly, so every status reads
//! the same facts.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::{BundleId, PlacementStatus, Target};

use super::placements::ChildPart;
use super::Core;

/// What the core says of one placement, for its status.
#[derive(Debug, Clone, Default)]
pub struct PlacementReport {
    /// How many clusters the root's split selects.
    pub selected: u64,
    /// How they are doing, merged up the tree.
    pub status: PlacementStatus,
    /// The bundles of the placement's entry now.
    pub bundles: Vec<BundleId>,
    /// The clusters it is leaving, which keep their copies until the ones
    /// it now selects are ready (`root_handover`).
    pub leaving: Vec<String>,
    /// How many clusters the root's split of a rollout's wave reached.
    pub wave: Option<u64>,
    /// Each of the root's children's part (a rollout's groups).
    pub parts: Vec<ChildPart>,
    /// With a wave keyed by a label: the label, and how many clusters the
    /// placement selects per value of it.
    pub by_value: Option<(String, std::collections::BTreeMap<String, u64>)>,
    /// The names in its `clusters.names` that are no cluster of the tree.
    pub unknown: Vec<String>,
}

impl Core {
    /// At the root: the report of every placement entry whose key starts
    /// with `prefix` and that the root has split. Only the placements in
    /// `grouped` (a rollout with groups) carry `parts` and `by_value`,
    /// which cost O(children) and O(aggregates).
    pub fn placement_reports(
        &self,
        prefix: &str,
        grouped: &BTreeSet<String>,
    ) -> BTreeMap<String, PlacementReport> {
        self.entries_with_prefix(prefix)
            .filter_map(|entry| {
                let key = &entry.key;
                let selected = self.placement_selected(key)?;
                let label = match &entry.target {
                    Target::Placement(target) => {
                        target.wave.as_ref().and_then(|wave| wave.key_label.clone())
                    }
                    _ => None,
                };
                let grouped = grouped.contains(key);
                let report = PlacementReport {
                    selected,
                    status: self.placement_status(key).unwrap_or_default(),
                    bundles: entry.bundles.clone(),
                    leaving: self.handover_leaving(key),
                    wave: self.placement_wave(key),
                    parts: match grouped {
                        true => self.placement_parts(key),
                        false => Vec::new(),
                    },
                    by_value: label.filter(|_| grouped).map(|label| {
                        let selected = self.placement_selected_by_value(key, &label);
                        (label, selected)
                    }),
                    unknown: self.placement_unknown_names(key),
                };
                Some((key.clone(), report))
            })
            .collect()
    }
}
