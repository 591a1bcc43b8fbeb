//! Placement status flowing up: what this node's own cluster reports (on an
//! agent) and what each child reports for its subtree, merged per placement
//! (`topology::summary`) and forwarded to the parent as changes, coalesced
//! with the inventory. A disconnected child's clusters count as offline.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::message::UpMessage;
use relaymesh_protocol::query::ChildCounts;
use relaymesh_protocol::{PlacementStatus, StatusUpdate};
use relaymesh_topology::summary;

use super::sorted::Cursor;
use super::{Action, Core, Now};
use relaymesh_protocol::limits::Limit;

mod merges;

/// Statuses by placement key. Boxed: a map's node holds eleven values, and
/// most of these maps (an agent's own, a relay's per child) hold one or
/// two, so unboxed every agent would carry three mostly empty nodes of
/// statuses (2 KB each) for its one placement.
type ByKey = BTreeMap<String, Box<PlacementStatus>>;

#[derive(Debug)]
pub(crate) struct Statuses {
    /// This node's own cluster, by placement key (agents).
    own: ByKey,
    /// What each child reported, by child then placement key.
    children: BTreeMap<String, ByKey>,
    /// What was last sent up.
    reported: ByKey,
    /// Something changed since the last report.
    pub dirty: bool,
    /// Counts changes (see [`Core::status_version`]).
    version: u64,
    /// The most placements one child may report.
    max_keys_per_child: usize,
    /// Each placement's merge, kept as children report.
    merges: merges::Merges,
    /// Nothing goes up: this node moved to a new parent and waits for the
    /// root to settle the move (see [`relaymesh_protocol::moves`]).
    pub held: bool,
}

impl Statuses {
    pub fn new(max_keys_per_child: usize) -> Self {
        Self {
            own: BTreeMap::new(),
            children: BTreeMap::new(),
            reported: BTreeMap::new(),
            dirty: false,
            version: 0,
            max_keys_per_child,
            merges: merges::Merges::default(),
            held: false,
        }
    }
}

impl Core {
    /// Sets (or, with `None`, forgets) the status of this node's own cluster
    /// for one placement: the edge agent's reconciler calls it.
    pub fn set_own_status(&mut self, now: Now, key: &str, status: Option<PlacementStatus>) {
        let changed = match status {
            Some(status) => {
                let before = self
                    .statuses
                    .own
                    .insert(key.to_string(), Box::new(status.clone()));
                before.as_deref() != Some(&status)
            }
            None => self.statuses.own.remove(key).is_some(),
        };
        if changed {
            self.status_changed(now);
        }
    }

    /// A number that changes whenever any placement's merged status may
    /// have: the root's daemon wakes its status writer on it.
    pub fn status_version(&self) -> u64 {
        self.statuses.version
    }

    /// The merged status of one placement below (and at) this node.
    pub fn placement_status(&self, key: &str) -> Option<PlacementStatus> {
        let merged = self.merged_key(key);
        #[cfg(debug_assertions)]
        assert_eq!(
            merged,
            self.merged_over_every_child(key),
            "the kept merge of {key} differs from a merge over every child"
        );
        merged
    }

    /// What each child reported for placement `key`, by child name: its
    /// counts, all offline while its link is down (as [`merged`] counts
    /// them). Children that reported nothing for it are left out.
    ///
    /// [`merged`]: Self::placement_status
    pub fn placement_by_child(&self, key: &str) -> Vec<ChildCounts> {
        let mut left_out = self.cuts.left_out_of(key).in_order();
        let mut links = Cursor::new(&self.links_by_name);
        self.statuses
            .children
            .iter()
            .filter(|(child, _)| !left_out(child))
            .filter_map(|(child, reported)| {
                let status = reported.get(key)?;
                let counts = match links.contains(child) {
                    true => status.counts,
                    false => self.offline_counts(child, key, status),
                };
                Some(ChildCounts {
                    child: child.clone(),
                    counts,
                })
            })
            .collect()
    }

    /// Whether `update` changes how many of a count-bounded placement's
    /// clusters below `child` carry each value of its wave's label: the
    /// wave is split by those counts (see `selected_by_value_reported`).
    fn values_moved(&self, child: &str, update: &StatusUpdate) -> bool {
        let keyed_label = |key: &str| match self.slice.entry(key).map(|entry| &entry.target) {
            Some(relaymesh_protocol::Target::Placement(target))
                if target.max_clusters.is_some() || target.quota.is_some() =>
            {
                target.wave.as_ref().and_then(|wave| wave.key_label.clone())
            }
            _ => None,
        };
        update.upserts.iter().any(|(key, status)| {
            let Some(label) = keyed_label(key) else {
                return false;
            };
            let before = self.child_reported(child, key);
            before.map(|before| super::placements::reported_by_value(before, &label))
                != Some(super::placements::reported_by_value(status, &label))
        })
    }

    pub(super) fn child_status(&mut self, now: Now, child: &str, update: StatusUpdate) {
        // A handover waits for the clusters replacing others to be ready.
        let handing_over = update
            .upserts
            .iter()
            .map(|(key, _)| key)
            .chain(update.removals.iter())
            .any(|key| self.cuts.holds.contains(key));
        if handing_over || self.values_moved(child, &update) {
            self.schedule_recut(now);
        }
        let refused = self.restatus_child(child, |core| {
            let max_keys = core.statuses.max_keys_per_child;
            let reported = core.statuses.children.entry(child.to_string()).or_default();
            if update.full {
                reported.clear();
            }
            for key in update.removals {
                reported.remove(&key);
            }
            let mut refused: u64 = 0;
            for (key, status) in update.upserts {
                if reported.len() >= max_keys && !reported.contains_key(&key) {
                    refused = refused.saturating_add(1);
                    continue;
                }
                reported.insert(key, Box::new(status));
            }
            refused
        });
        if refused > 0 {
            tracing::warn!(
                child,
                refused,
                limit = self.statuses.max_keys_per_child,
                "refused placement status from a child over its limit of status keys"
            );
            self.count_limit_refusals(now, Limit::StatusKeysPerChild, refused);
        }
        self.status_changed(now);
    }

    /// What `child` last reported of placement `key`.
    pub(super) fn child_reported(&self, child: &str, key: &str) -> Option<&PlacementStatus> {
        self.statuses.children.get(child)?.get(key).map(Box::as_ref)
    }

    /// Forgets what a child reported: it left the tree (it was revoked).
    pub(super) fn forget_child_status(&mut self, now: Now, child: &str) {
        if self.restatus_child(child, |core| core.statuses.children.remove(child).is_some()) {
            self.status_changed(now);
        }
    }

    /// Forgets what a disconnected child reported of placement `key`, which
    /// it no longer has: it would count as offline there for ever.
    pub(super) fn forget_child_placement_status(&mut self, child: &str, key: &str) {
        let removed = self.restatus_child(child, |core| {
            core.statuses
                .children
                .get_mut(child)
                .is_some_and(|reported| reported.remove(key).is_some())
        });
        if removed {
            self.statuses.dirty = true;
            self.statuses.version += 1;
        }
    }

    /// Which children's reports count changed (a handover began or ended):
    /// the merged status is to be sent again.
    pub(super) fn status_parts_changed(&mut self) {
        self.statuses.dirty = true;
        self.statuses.version += 1;
    }

    pub(super) fn status_link_changed(&mut self, now: Now) {
        self.status_changed(now);
    }

    fn status_changed(&mut self, now: Now) {
        self.statuses.dirty = true;
        self.statuses.version += 1;
        self.schedule_inventory_flush(now);
    }

    /// Sends what changed since the last report (everything if `full`).
    pub(super) fn flush_status(&mut self, full: bool) {
        if self.statuses.held || (!full && !self.statuses.dirty) {
            return;
        }
        self.statuses.dirty = false;
        if !self.upstream.has_parent() {
            // The root reports to no one: its services ask for one
            // placement's status at a time (`placement_status`), and a
            // merge of every placement over every child here, at each
            // flush, was an eighth of its loop in a star of 5,000.
            return;
        }
        let merged = self.merged();
        if !self.upstream.connected() {
            self.statuses.reported = merged;
            return;
        }
        let previous = if full {
            BTreeMap::new()
        } else {
            std::mem::take(&mut self.statuses.reported)
        };
        let upserts: Vec<(String, PlacementStatus)> = merged
            .iter()
            .filter(|(key, status)| previous.get(*key) != Some(*status))
            .map(|(key, status)| (key.clone(), PlacementStatus::clone(status)))
            .collect();
        let removals: Vec<String> = previous
            .keys()
            .filter(|key| !merged.contains_key(*key))
            .cloned()
            .collect();
        self.statuses.reported = merged;
        if full || !upserts.is_empty() || !removals.is_empty() {
            self.actions
                .push_back(Action::SendUp(UpMessage::Status(StatusUpdate {
                    full,
                    upserts,
                    removals,
                })));
        }
    }

    /// What disconnected child `child` reported for placement `key`, all
    /// offline, less the clusters that re-parented elsewhere meanwhile
    /// (they count there).
    fn offline_counts(
        &self,
        child: &str,
        key: &str,
        status: &PlacementStatus,
    ) -> relaymesh_protocol::PhaseCounts {
        let mut counts = summary::offline(&status.counts);
        counts.offline = counts
            .offline
            .saturating_sub(self.departed_selected(child, key));
        counts
    }

    /// How many of the clusters that re-parented away from disconnected
    /// child `child` placement `key` selects (by name or labels; a bounded
    /// placement's share cannot be told here, so its matching clusters are
    /// taken as selected, drained ones not).
    fn departed_selected(&self, child: &str, key: &str) -> u64 {
        let departed = self.inventory.departed(child);
        if departed.is_empty() {
            return 0;
        }
        let Some(relaymesh_protocol::Target::Placement(target)) =
            self.slice.entry(key).map(|entry| &entry.target)
        else {
            return 0;
        };
        departed
            .iter()
            .filter(|record| {
                relaymesh_topology::placement::target_selects(target, &record.name, &record.labels)
            })
            .count() as u64
    }

    fn merged(&self) -> ByKey {
        let keys: BTreeSet<&String> = self
            .statuses
            .own
            .keys()
            .chain(self.statuses.merges.reported_keys())
            .collect();
        keys.into_iter()
            .filter_map(|key| Some((key.clone(), Box::new(self.placement_status(key)?))))
            .collect()
    }

    /// One placement's merged status, merged anew over every child: what
    /// the kept merges ([`merges`]) must equal, checked on every read in
    /// debug builds (every test of the workspace).
    #[cfg(debug_assertions)]
    fn merged_over_every_child(&self, key: &str) -> Option<PlacementStatus> {
        use std::borrow::Cow;
        let mut parts: Vec<Cow<'_, PlacementStatus>> = Vec::new();
        // Reported at all, if only by children whose reports are left out.
        let mut known = false;
        if let Some(own) = self.statuses.own.get(key) {
            parts.push(Cow::Borrowed(own));
            known = true;
        }
        let mut left_out = self.cuts.left_out_of(key).in_order();
        let mut links = Cursor::new(&self.links_by_name);
        for (child, reported) in &self.statuses.children {
            let Some(status) = reported.get(key) else {
                continue;
            };
            known = true;
            if left_out(child) {
                // Kept only until its replacement is ready: the
                // placement's counts are those of the new clusters.
                continue;
            }
            if links.contains(child) {
                parts.push(Cow::Borrowed(status));
            } else {
                // Its clusters are offline now: counted so, and
                // neither named as failing nor summed by rules on
                // what they said last.
                parts.push(Cow::Owned(PlacementStatus {
                    counts: self.offline_counts(child, key, status),
                    message: status.message.clone(),
                    ..PlacementStatus::default()
                }));
            }
        }
        known.then(|| summary::merge(parts.iter().map(Cow::as_ref)))
    }
}
