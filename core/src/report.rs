//! What the root's core says of each placement, for the placement
//! controller's status and rollouts: one assembly, so every status reads
//! the same facts.

use std::collections::BTreeMap;

use relaymesh_protocol::{BundleId, PlacementStatus, SliceEntry, Target};

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
    /// Its rollout, as the core decided it (see `rollouts`).
    pub rollout: Option<crate::rollouts::Rollout>,
}

impl Core {
    /// At the root: the report of every placement entry whose key starts
    /// with `prefix` and that the root has split.
    pub fn placement_reports(&self, prefix: &str) -> BTreeMap<String, PlacementReport> {
        self.entries_with_prefix(prefix)
            .filter_map(|entry| Some((entry.key.clone(), self.report_of(entry)?)))
            .collect()
    }

    /// At the root: placement `key`'s report, if the root has split it.
    pub(crate) fn placement_report(&self, key: &str) -> Option<PlacementReport> {
        self.report_of(self.slice.entry(key)?)
    }

    /// Only a rollout with groups carries `parts` and `by_value`, which
    /// cost O(children) and O(aggregates).
    fn report_of(&self, entry: &SliceEntry) -> Option<PlacementReport> {
        let key = &entry.key;
        let selected = self.placement_selected(key)?;
        let label = match &entry.target {
            Target::Placement(target) => {
                target.wave.as_ref().and_then(|wave| wave.key_label.clone())
            }
            _ => None,
        };
        let grouped = self.rollouts.grouped(key);
        Some(PlacementReport {
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
            rollout: self.rollouts.get(key).cloned(),
        })
    }
}
