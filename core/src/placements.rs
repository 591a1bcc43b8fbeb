//! Placement entries, cut per child: which children receive a placement and
//! with what quota, decided from the children's aggregated inventory by
//! `relaymesh_topology::placement`, kept stable between decisions, and
//! re-decided when the clusters below change.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use relaymesh_protocol::query::ChildCut;
use relaymesh_protocol::{PlacementTarget, Quota, RevisionCounts, SliceEntry, Target, Wave};
use relaymesh_topology::aggregate::{Aggregate, Supply};
use relaymesh_topology::placement::{
    cut, named_children, split, ChildInput, ChildShare, Split, DRAINING_LABEL,
};
use relaymesh_topology::rollout::{add_to_supply, split_wave, wave_supply, WaveChild};

use super::cut::{shared, Cut};
use super::handover::Holds;
use super::sorted::Cursor;
use super::Core;

mod recut;

/// One child's part of a placement (see [`Core::placement_parts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildPart {
    /// The child's name.
    pub child: String,
    /// How many clusters below it the placement selects.
    pub selected: u64,
    /// With a rollout: how many of them its wave lets run the newest
    /// revision.
    pub wave: Option<u32>,
    /// What it reported for each revision rolling out.
    pub revisions: Vec<RevisionCounts>,
}

/// The per-child cuts of every placement entry of a relay's slice.
#[derive(Debug, Default)]
pub(crate) struct Cuts {
    /// For each placement key, the entry each child receives.
    by_key: BTreeMap<String, Cut>,
    /// The last split per key, so the next one keeps what it can.
    previous: BTreeMap<String, Split>,
    /// The last split of each rolling-out placement's wave, per child.
    waves: BTreeMap<String, BTreeMap<String, Wave>>,
    /// When to re-decide every placement after the inventory changed.
    pub recut_at: Option<Instant>,
    /// Bounded placements handing over from shrunk children to grown ones.
    pub holds: Holds,
    /// The children each placement's last cut kept at what they had.
    kept: BTreeMap<String, BTreeSet<String>>,
    /// The draining children each placement's last cut kept: their copies
    /// stay until the drain is done, their statuses are no longer the
    /// placement's.
    drained: BTreeMap<String, BTreeSet<String>>,
    /// The digest of each placement's cut, as persisted: whether a cut
    /// changed, across restarts too.
    digests: BTreeMap<String, [u8; 32]>,
    /// Counts decisions: a split, a cut, a hold or a drain changes only in
    /// one, so whatever was derived from them at an older generation (the
    /// kept status merges, the selected counts) is stale.
    generation: u64,
    /// How many clusters each placement's children's shares select, and
    /// what that was counted from: asked at each status report, it is
    /// O(children) to count and changes only with the split, the target
    /// or a child's clusters.
    selected: RefCell<BTreeMap<String, (Counted, u64)>>,
}

/// What a count of selected clusters was made from: the aggregates'
/// version, the cuts' generation and the slice's head (the target).
type Counted = (u64, u64, u64);

impl Cuts {
    /// Changes whenever a placement is decided: a cut, a hold or a drain
    /// may have changed.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// No cuts yet, and the digests of those before a restart.
    pub(crate) fn restored(persisted: &crate::state::Persisted) -> Self {
        Self {
            digests: persisted.cut_digests.clone(),
            ..Self::default()
        }
    }

    /// The children whose reports of placement `key` are left out of this
    /// relay's merged status (its maps looked up once, for every child): a
    /// child kept only until its replacement is ready (a handover with
    /// nothing left to it, or a drain), or one the placement's cut no
    /// longer gives it to at all. A child that
    /// lost the placement still reports its copy until its agent has
    /// removed it: counted, a drained cluster showed READY 3/2 right after
    /// its drain was done (CI run 82).
    pub(super) fn left_out_of(&self, key: &str) -> LeftOut<'_> {
        LeftOut {
            cut: self.by_key.get(key),
            dropped: self.holds.dropped_in(key),
            drained: self.drained.get(key),
        }
    }
}

/// The children whose reports one placement's merged status leaves out
/// ([`Cuts::left_out_of`]).
pub(super) struct LeftOut<'a> {
    cut: Option<&'a Cut>,
    dropped: Option<&'a BTreeSet<String>>,
    drained: Option<&'a BTreeSet<String>>,
}

impl<'a> LeftOut<'a> {
    /// Whether one child's report is left out.
    pub(super) fn contains(&self, child: &str) -> bool {
        self.cut.is_some_and(|cut| !cut.contains_key(child))
            || self.dropped.is_some_and(|dropped| dropped.contains(child))
            || self.drained.is_some_and(|drained| drained.contains(child))
    }

    /// Whether a child's report is left out, for children asked in
    /// ascending name order: the cut is walked once (see `sorted.rs`).
    pub(super) fn in_order(&self) -> impl FnMut(&str) -> bool + 'a {
        let mut cut = self.cut.map(Cursor::new);
        let (dropped, drained) = (self.dropped, self.drained);
        move |child| {
            cut.as_mut().is_some_and(|cut| !cut.contains(child))
                || dropped.is_some_and(|dropped| dropped.contains(child))
                || drained.is_some_and(|drained| drained.contains(child))
        }
    }
}

impl Core {
    /// The entry `child` receives for `entry`, if any.
    pub(super) fn entry_for_child(&self, entry: &SliceEntry, child: &str) -> Option<SliceEntry> {
        match &entry.target {
            Target::Placement(_) => self
                .cuts
                .by_key
                .get(&entry.key)?
                .get(child)
                .map(|entry| SliceEntry::clone(entry)),
            Target::Everywhere | Target::Subtrees(_) => {
                self.concerns(entry, child).then(|| entry.clone())
            }
        }
    }

    /// Decides one placement entry anew; returns the cut it had before.
    /// Moves the cuts to a new generation.
    pub(super) fn decide(&mut self, now: Instant, key: &str) -> Cut {
        let old = self.decide_cut(now, key);
        self.cuts.generation += 1;
        self.cuts.selected.get_mut().remove(key);
        old
    }

    fn decide_cut(&mut self, now: Instant, key: &str) -> Cut {
        let old = self.cuts.by_key.remove(key).unwrap_or_default();
        let Some(entry) = self.slice.entry(key).cloned() else {
            self.cuts.previous.remove(key);
            self.cuts.waves.remove(key);
            self.cuts.holds.forget(key);
            self.cuts.kept.remove(key);
            self.forget_drained(key);
            return old;
        };
        let Target::Placement(target) = &entry.target else {
            self.cuts.holds.forget(key);
            self.forget_drained(key);
            return old;
        };
        let empty = Aggregate::default();
        let children = self.inventory.direct_children();
        let inputs: Vec<ChildInput<'_>> = children
            .iter()
            .map(|name| ChildInput {
                name,
                aggregate: self.inventory.aggregates().get(name).unwrap_or(&empty),
            })
            .collect();
        let decided = split(
            key,
            target,
            target.quota.as_ref(),
            &inputs,
            self.cuts.previous.get(key),
        );
        let named = named_children(target, self.inventory.index());
        let mut per_child = BTreeMap::new();
        for child in &children {
            if let Some(child_target) = cut(target, &decided, &named, child) {
                let mut child_entry = entry.clone();
                child_entry.target = Target::Placement(child_target);
                per_child.insert(child.clone(), child_entry);
            }
        }
        let bounded = target.max_clusters.is_some() || target.quota.is_some();
        let mut held = BTreeSet::new();
        if bounded {
            let decided_total = u64::from(decided.quota_sum().total);
            held = self.hold_shrunk(now, key, target, decided_total, &old, &mut per_child);
            let drained = self.hold_for_draining(&entry, &old, &mut per_child);
            held.extend(drained.iter().cloned());
            self.set_drained(key, drained);
        } else {
            self.cuts.holds.forget(key);
            self.forget_drained(key);
        }
        match &target.wave {
            Some(wave) => {
                let waves = self.split_wave(key, target, wave, &decided, &per_child);
                for (child, child_entry) in &mut per_child {
                    if held.contains(child) {
                        // Kept as it was, wave and all, until it is replaced.
                        continue;
                    }
                    if let Target::Placement(child_target) = &mut child_entry.target {
                        child_target.wave = waves.get(child).cloned().map(Box::new);
                    }
                }
                self.cuts.waves.insert(key.to_string(), waves);
            }
            None => {
                self.cuts.waves.remove(key);
            }
        }
        tracing::debug!(
            placement = key,
            children = per_child.len(),
            "placement decided"
        );
        self.cuts.previous.insert(key.to_string(), decided);
        self.cuts.by_key.insert(key.to_string(), shared(per_child));
        if held.is_empty() {
            self.cuts.kept.remove(key);
        } else {
            self.cuts.kept.insert(key.to_string(), held);
        }
        old
    }

    /// How this relay last cut placement `key`: the share it received and
    /// what each child receives, sorted by child (`None`: not a placement
    /// this relay holds).
    pub fn placement_cut(&self, key: &str) -> Option<(Option<Quota>, Vec<ChildCut>)> {
        let entry = self.slice.entry(key)?;
        let Target::Placement(target) = &entry.target else {
            return None;
        };
        let kept = self.cuts.kept.get(key);
        let children = self
            .cuts
            .by_key
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|(child, cut)| {
                let Target::Placement(cut) = &cut.target else {
                    return None;
                };
                let named = cut
                    .names
                    .iter()
                    .filter(|name| self.inventory.index().via(name) == Some(child.as_str()))
                    .count();
                Some(ChildCut {
                    child: child.clone(),
                    quota: cut.quota.clone(),
                    named: u32::try_from(named).unwrap_or(u32::MAX),
                    wave: cut.wave.as_ref().map(|wave| wave.total),
                    kept: kept.is_some_and(|kept| kept.contains(child)),
                })
            })
            .collect();
        Some((target.quota.clone(), children))
    }

    /// Which draining children placement `key`'s cut keeps; a change
    /// changes the merged status.
    fn set_drained(&mut self, key: &str, drained: BTreeSet<String>) {
        let before = match drained.is_empty() {
            true => self.cuts.drained.remove(key),
            false => self.cuts.drained.insert(key.to_string(), drained.clone()),
        };
        if before.unwrap_or_default() != drained {
            self.status_parts_changed();
        }
    }

    fn forget_drained(&mut self, key: &str) {
        self.set_drained(key, BTreeSet::new());
    }

    /// Make-before-break for a drain: a child cluster being drained keeps
    /// a count-bounded placement it had (its new share is elsewhere) until
    /// the root says the drain is done. What it reports of the placement is
    /// left out of the merged status from the cut that keeps it, so the
    /// root counts only the clusters that replace it: its agent withdraws
    /// its status too, but only once its reconciler learns of the drain,
    /// which may be long after its record (draining) reached the root.
    fn hold_for_draining(
        &self,
        entry: &SliceEntry,
        old: &Cut,
        per_child: &mut BTreeMap<String, SliceEntry>,
    ) -> BTreeSet<String> {
        let mut held = BTreeSet::new();
        for (child, had) in old {
            let draining = self.inventory.record(child).is_some_and(|record| {
                record.role == relaymesh_protocol::Role::Agent
                    && record.labels.get(DRAINING_LABEL) == Some("true")
            });
            if draining && !per_child.contains_key(child) {
                let mut kept = entry.clone();
                kept.target = had.target.clone();
                per_child.insert(child.clone(), kept);
                held.insert(child.clone());
            }
        }
        held
    }

    /// A rollout's wave split over the children that receive the placement:
    /// each can take as many of its selected clusters as there are (per
    /// value of the wave's label), named ones included.
    fn split_wave(
        &self,
        key: &str,
        target: &PlacementTarget,
        wave: &Wave,
        decided: &Split,
        receiving: &BTreeMap<String, SliceEntry>,
    ) -> BTreeMap<String, Wave> {
        let key_label = wave.key_label.as_deref();
        let bounded = target.max_clusters.is_some() || target.quota.is_some();
        let empty = Aggregate::default();
        let mut supplies: BTreeMap<&str, Supply> = BTreeMap::new();
        let mut reporting = BTreeSet::new();
        for child in receiving.keys() {
            let aggregate = self.inventory.aggregates().get(child).unwrap_or(&empty);
            let mut supply = wave_supply(aggregate, target.selector.as_ref(), key_label);
            if let Some(ChildShare::Quota(quota)) = decided.per_child.get(child) {
                supply.total = supply.total.min(u64::from(quota.total));
                if let Some(label) = key_label.filter(|_| bounded) {
                    if self.selected_by_value_reported(child, key, label, &mut supply) {
                        reporting.insert(child.as_str());
                    }
                }
            } else if bounded || target.selector.is_none() {
                supply = Supply::default();
            }
            supplies.insert(child, supply);
        }
        for name in &target.names {
            let (Some(record), Some(via)) = (
                self.inventory.record(name),
                self.inventory.index().via(name),
            ) else {
                continue;
            };
            let counted = !bounded
                && target.selector.as_ref().is_some_and(|selector| {
                    relaymesh_topology::selector::matches(selector, &record.labels)
                });
            if let (false, Some(supply)) = (counted, supplies.get_mut(via)) {
                if reporting.contains(via) {
                    // Its value is among what the child reported.
                    supply.total = supply.total.saturating_add(1);
                } else {
                    add_to_supply(supply, &record.labels, key_label, 1);
                }
            }
        }
        if !wave.per_child.is_empty() {
            // The root's per-group budgets: each child gets its own number
            // and orders its subtree itself.
            return supplies
                .into_iter()
                .map(|(name, supply)| {
                    let wanted = u64::from(wave.per_child.get(name).copied().unwrap_or(0));
                    let share = Wave {
                        key_label: wave.key_label.clone(),
                        total: u32::try_from(wanted.min(supply.total)).unwrap_or(u32::MAX),
                        ..Wave::default()
                    };
                    (name.to_string(), share)
                })
                .collect();
        }
        let children: Vec<WaveChild<'_>> = supplies
            .into_iter()
            .map(|(name, supply)| WaveChild { name, supply })
            .collect();
        split_wave(key, wave, &children, self.cuts.waves.get(key))
    }

    /// A count-bounded placement's selected clusters below `child` per
    /// value of the wave's label `label`, into `supply.per_value`: the
    /// relays below chose them, so only what they report tells their
    /// values (`PlacementStatus::revision_groups`, one count per cluster,
    /// whatever its revision), never more per value than match there. An
    /// agent child is its own one cluster: its labels say, if its share is
    /// not nothing. True if the values come from the child's report.
    fn selected_by_value_reported(
        &self,
        child: &str,
        key: &str,
        label: &str,
        supply: &mut Supply,
    ) -> bool {
        if supply.total == 0 {
            supply.per_value.clear();
            return false;
        }
        let agent = self
            .inventory
            .record(child)
            .is_some_and(|record| record.role == relaymesh_protocol::Role::Agent);
        if agent {
            return false;
        }
        let matching = std::mem::take(&mut supply.per_value);
        if let Some(reported) = self.child_reported(child, key) {
            for (value, count) in reported_by_value(reported, label) {
                let most = matching.get(&value).copied().unwrap_or(0);
                let count = count.min(most);
                if count > 0 {
                    supply.per_value.insert(value, count);
                }
            }
        }
        true
    }

    /// How many clusters below this relay the last split of a rollout's
    /// wave reached (`None`: the placement does not roll out here).
    pub fn placement_wave(&self, key: &str) -> Option<u64> {
        let waves = self.cuts.waves.get(key)?;
        Some(
            waves
                .values()
                .fold(0u64, |sum, wave| sum.saturating_add(u64::from(wave.total))),
        )
    }

    /// How many children receive each placement (for status and tests).
    pub fn placement_children(&self, key: &str) -> Vec<String> {
        self.cuts
            .by_key
            .get(key)
            .map(|cut| cut.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How many clusters below this relay a placement selects, from the last
    /// split (O(children)): the quotas handed out, or the matching supply of
    /// children with no bound, plus the named clusters not counted already.
    ///
    /// The sum of [`Self::placement_parts`]' `selected`, with no map of
    /// children built: the root asks it of every placement at each status
    /// report, and the map was a sixth of its loop in a star of 5,000.
    pub fn placement_selected(&self, key: &str) -> Option<u64> {
        let (target, split) = self.split_of(key)?;
        let counted = (
            self.inventory.aggregates_version(),
            self.cuts.generation,
            self.slice.head(),
        );
        let mut cache = self.cuts.selected.borrow_mut();
        let count = || {
            let mut aggregates = Cursor::new(self.inventory.aggregates());
            split.per_child.iter().fold(0u64, |sum, (child, share)| {
                sum.saturating_add(share_selected(target, aggregates.get(child), share))
            })
        };
        let selected = match cache.get(key) {
            Some((made_from, selected)) if *made_from == counted => {
                // Every test of the workspace checks the kept count.
                debug_assert_eq!(*selected, count(), "the kept count of {key} is stale");
                *selected
            }
            _ => {
                let selected = count();
                cache.insert(key.to_string(), (counted, selected));
                selected
            }
        };
        let named = self.named_not_counted(target).count();
        Some(selected.saturating_add(u64::try_from(named).unwrap_or(u64::MAX)))
    }

    /// Each child's part of placement `key`: how many of its clusters are
    /// selected, its rollout wave and what it reported per revision. The
    /// root's rollout controller reads them for `maxUnavailablePerGroup`,
    /// whose groups are the root's children's subtrees.
    pub fn placement_parts(&self, key: &str) -> Vec<ChildPart> {
        let Some(by_child) = self.selected_by_child(key) else {
            return Vec::new();
        };
        let waves = self.cuts.waves.get(key);
        by_child
            .into_iter()
            .map(|(child, selected)| ChildPart {
                wave: waves
                    .and_then(|waves| waves.get(&child))
                    .map(|wave| wave.total),
                revisions: self
                    .child_reported(&child, key)
                    .map(|status| status.revisions.clone())
                    .unwrap_or_default(),
                child,
                selected,
            })
            .collect()
    }

    /// How many clusters below this relay placement `key` selects, per
    /// value of cluster label `label` (clusters without it under
    /// [`relaymesh_protocol::UNLABELLED`]): for a rollout grouped by that
    /// label. Without a bound, every matching cluster (from the inventory);
    /// with one, those the children report per value (the relays chose
    /// them).
    pub fn placement_selected_by_value(&self, key: &str, label: &str) -> BTreeMap<String, u64> {
        let Some(Target::Placement(target)) = self.slice.entry(key).map(|entry| &entry.target)
        else {
            return BTreeMap::new();
        };
        if target.max_clusters.is_some() || target.quota.is_some() {
            // The relays chose its clusters: their reports tell the values.
            let mut selected = BTreeMap::new();
            for child in self.placement_children(key) {
                let Some(reported) = self.child_reported(&child, key) else {
                    continue;
                };
                for (value, count) in reported_by_value(reported, label) {
                    let sum: &mut u64 = selected.entry(value).or_default();
                    *sum = sum.saturating_add(count);
                }
            }
            return selected;
        }
        let mut supply = Supply::default();
        if target.selector.is_some() {
            for aggregate in self.inventory.aggregates().values() {
                supply.merge(&wave_supply(
                    aggregate,
                    target.selector.as_ref(),
                    Some(label),
                ));
            }
        }
        for name in &target.names {
            let Some(record) = self.inventory.record(name) else {
                continue;
            };
            let counted = target.selector.as_ref().is_some_and(|selector| {
                relaymesh_topology::selector::matches(selector, &record.labels)
            });
            if !counted {
                add_to_supply(&mut supply, &record.labels, Some(label), 1);
            }
        }
        supply.per_value
    }

    /// [`Core::placement_selected`] per child, named clusters with the
    /// child they are reached through.
    fn selected_by_child(&self, key: &str) -> Option<BTreeMap<String, u64>> {
        let (target, split) = self.split_of(key)?;
        let mut by_child: BTreeMap<String, u64> = BTreeMap::new();
        let mut aggregates = Cursor::new(self.inventory.aggregates());
        for (child, share) in &split.per_child {
            let selected = share_selected(target, aggregates.get(child), share);
            by_child.insert(child.clone(), selected);
        }
        for name in self.named_not_counted(target) {
            let via = self.inventory.index().via(name).unwrap_or(name);
            let selected = by_child.entry(via.to_string()).or_default();
            // Saturating: the supplies come from children's reports.
            *selected = selected.saturating_add(1);
        }
        Some(by_child)
    }

    /// Placement `key`'s target and last split, if the root split it.
    fn split_of(&self, key: &str) -> Option<(&PlacementTarget, &Split)> {
        let entry = self.slice.entry(key)?;
        let Target::Placement(target) = &entry.target else {
            return None;
        };
        Some((target, self.cuts.previous.get(key)?))
    }

    /// The clusters `target` names that are below this relay and that its
    /// children's shares do not count already (a bounded placement's
    /// shares never count its names; an unbounded one's count those its
    /// selector matches).
    fn named_not_counted<'a>(
        &'a self,
        target: &'a PlacementTarget,
    ) -> impl Iterator<Item = &'a str> + 'a {
        let bounded = target.max_clusters.is_some() || target.quota.is_some();
        target.names.iter().filter_map(move |name| {
            let record = self.inventory.record(name)?;
            let counted = !bounded
                && target.selector.as_ref().is_some_and(|selector| {
                    relaymesh_topology::selector::matches(selector, &record.labels)
                });
            (!counted).then_some(name.as_str())
        })
    }

    /// The names placement `key` gives in `names` that are no cluster this
    /// relay knows below it (no agent of that name in its inventory), in
    /// the order given: the root's status names them, since they select
    /// nothing until such a cluster joins.
    pub fn placement_unknown_names(&self, key: &str) -> Vec<String> {
        let Some(Target::Placement(target)) = self.slice.entry(key).map(|entry| &entry.target)
        else {
            return Vec::new();
        };
        target
            .names
            .iter()
            .filter(|name| {
                self.inventory
                    .record(name)
                    .is_none_or(|record| record.role != relaymesh_protocol::Role::Agent)
            })
            .cloned()
            .collect()
    }
}

/// How many clusters a report counts per value of `label`, over every
/// revision (each cluster reports one).
pub(super) fn reported_by_value(
    reported: &relaymesh_protocol::PlacementStatus,
    label: &str,
) -> BTreeMap<String, u64> {
    let mut by_value: BTreeMap<String, u64> = BTreeMap::new();
    for group in reported
        .revision_groups
        .iter()
        .filter(|group| group.label == label)
    {
        let counts = &group.counts;
        let clusters = counts
            .waiting
            .saturating_add(counts.updating)
            .saturating_add(counts.succeeded)
            .saturating_add(counts.failed);
        let sum = by_value.entry(group.value.clone()).or_default();
        *sum = sum.saturating_add(clusters);
    }
    by_value
}

/// How many of a child's clusters its share of `target` selects: its
/// quota, or with no bound its matching supply (`aggregate` is the
/// child's).
fn share_selected(
    target: &PlacementTarget,
    aggregate: Option<&Aggregate>,
    share: &ChildShare,
) -> u64 {
    match share {
        ChildShare::Quota(quota) => u64::from(quota.total),
        ChildShare::Unbounded => aggregate.map_or(0, |aggregate| {
            aggregate.supply_total(target.selector.as_ref(), target.spread_by.as_deref())
        }),
    }
}
