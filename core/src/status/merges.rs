//! Each placement's merged status at this relay, kept as its children
//! report (a [`Tally`] per placement): one child's report costs
//! O(log children), where merging every child again for each report cost
//! O(children) (a root with 5,000 children spent a tenth of its loop so,
//! docs/performance.md).
//!
//! How a child counts for a placement follows from its link (connected:
//! as it reported; disconnected: all offline) and from the placement's cut
//! (left out: not at all). A child's new report or link moves only that
//! child's part; a merge made before the cuts last changed (a new cut,
//! handover or drain: [`crate::placements::Cuts::generation`]) is made
//! anew on its next read.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::PlacementStatus;
use relaymesh_topology::summary::Tally;

use super::super::sorted::Cursor;
use super::super::Core;

/// The member name of this node's own cluster in a [`Tally`]: it merges
/// first, and no node is named so (names are DNS labels).
const OWN: &str = "";

/// The merges, and what they are kept from.
#[derive(Debug, Default)]
pub(crate) struct Merges {
    /// Each placement's merge, made on its first read. In a cell: reads
    /// (`&Core`) make and refresh them. Boxed: a map's node holds eleven
    /// values, and most relays hold one or two placements.
    by_key: RefCell<BTreeMap<String, Box<Merge>>>,
    /// How many children reported each placement, counted or not.
    reporters: BTreeMap<String, usize>,
    /// How many children's reports were merged anew (tests count them).
    #[cfg(test)]
    merged_anew: std::cell::Cell<u64>,
}

/// One placement's merge.
#[derive(Debug)]
struct Merge {
    /// The cuts' generation it was made at.
    generation: u64,
    /// The connected children that count, as they reported: every child
    /// that reported the placement and is in neither set below.
    live: Tally,
    /// The disconnected children that count (offline).
    offline: BTreeSet<String>,
    /// The children whose reports are left out.
    left_out: BTreeSet<String>,
}

/// How one child's report counts in a placement's merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Live,
    Offline,
    LeftOut,
}

impl Merge {
    fn new(generation: u64) -> Self {
        Self {
            generation,
            live: Tally::default(),
            offline: BTreeSet::new(),
            left_out: BTreeSet::new(),
        }
    }

    /// How a child that reported the placement counts in it now.
    fn part(&self, child: &str) -> Part {
        if self.offline.contains(child) {
            Part::Offline
        } else if self.left_out.contains(child) {
            Part::LeftOut
        } else {
            Part::Live
        }
    }

    fn insert(&mut self, child: &str, status: &PlacementStatus, part: Part) {
        match part {
            Part::Live => self.live.add(child, status),
            Part::Offline => {
                self.offline.insert(child.to_string());
            }
            Part::LeftOut => {
                self.left_out.insert(child.to_string());
            }
        }
    }

    /// Takes out a child that reported the placement, `status` as it was
    /// inserted.
    fn remove(&mut self, child: &str, status: &PlacementStatus) {
        match self.part(child) {
            Part::Live => self.live.remove(child, status),
            Part::Offline => {
                self.offline.remove(child);
            }
            Part::LeftOut => {
                self.left_out.remove(child);
            }
        }
    }
}

impl Merges {
    /// Every placement some child reported.
    pub(crate) fn reported_keys(&self) -> impl Iterator<Item = &String> {
        self.reporters.keys()
    }
}

impl Core {
    /// Runs `change` to what `child` reported, moving its parts out of the
    /// merges before and back in after.
    pub(in crate::status) fn restatus_child<R>(
        &mut self,
        child: &str,
        change: impl FnOnce(&mut Self) -> R,
    ) -> R {
        self.tally_child(child, false);
        let changed = change(self);
        self.tally_child(child, true);
        changed
    }

    fn tally_child(&mut self, child: &str, add: bool) {
        let Some(reported) = self.statuses.children.get(child) else {
            return;
        };
        let merges = &mut self.statuses.merges;
        let by_key = merges.by_key.get_mut();
        for (key, status) in reported {
            // Looked up before inserting: a report is not worth a copy of
            // each of its keys.
            let reporters = match merges.reporters.get_mut(key) {
                Some(reporters) => reporters,
                None => merges.reporters.entry(key.clone()).or_default(),
            };
            *reporters = match add {
                true => *reporters + 1,
                false => reporters.saturating_sub(1),
            };
            if *reporters == 0 {
                merges.reporters.remove(key);
                by_key.remove(key);
                continue;
            }
            let Some(merge) = by_key.get_mut(key) else {
                continue;
            };
            if merge.generation != self.cuts.generation() {
                continue;
            }
            match add {
                true => {
                    let part = part_of(&self.cuts, &self.links_by_name, child, key);
                    merge.insert(child, status, part);
                }
                false => merge.remove(child, status),
            }
        }
    }

    /// `child`'s link came or went: its parts move between counted as it
    /// reported and counted offline.
    pub(crate) fn relink_child_status(&mut self, child: &str) {
        let Some(reported) = self.statuses.children.get(child) else {
            return;
        };
        let merges = &mut self.statuses.merges;
        for (key, status) in reported {
            let Some(merge) = merges.by_key.get_mut().get_mut(key) else {
                continue;
            };
            if merge.generation != self.cuts.generation() {
                continue;
            }
            let part = part_of(&self.cuts, &self.links_by_name, child, key);
            if merge.part(child) != part {
                merge.remove(child, status);
                merge.insert(child, status, part);
            }
        }
    }

    /// Placement `key`'s merged status below and at this node, if this node
    /// or any child reported it.
    pub(super) fn merged_key(&self, key: &str) -> Option<PlacementStatus> {
        let own = self.statuses.own.get(key).map(Box::as_ref);
        let merges = &self.statuses.merges;
        if !merges.reporters.contains_key(key) {
            // No child reported it (an agent's own cluster): nothing to
            // keep, and a million agents would each keep an empty merge.
            return own.map(|own| relaymesh_topology::summary::merge([own]));
        }
        let mut by_key = merges.by_key.borrow_mut();
        let current = |merge: &Merge| merge.generation == self.cuts.generation();
        if !by_key.get(key).is_some_and(|merge| current(merge)) {
            by_key.insert(key.to_string(), Box::new(self.merge_anew(key)));
        }
        let merge = by_key.get_mut(key)?;
        // The parts that are not kept: this node's own cluster, and the
        // disconnected children, whose offline counts leave out the
        // clusters that went elsewhere meanwhile (the inventory's, now).
        let offline: Vec<(&str, PlacementStatus)> = merge
            .offline
            .iter()
            .filter_map(|child| {
                let status = self.child_reported(child, key)?;
                Some((
                    child.as_str(),
                    PlacementStatus {
                        counts: self.offline_counts(child, key, status),
                        // Neither named as failing nor summed by rules on
                        // what they said last.
                        message: status.message.clone(),
                        ..PlacementStatus::default()
                    },
                ))
            })
            .collect();
        let live = &mut merge.live;
        let added = own.into_iter().map(|own| (OWN, own));
        let added: Vec<(&str, &PlacementStatus)> = added
            .chain(offline.iter().map(|(child, part)| (*child, part)))
            .collect();
        for (member, status) in &added {
            live.add(member, status);
        }
        let merged = live.status(|member| match member {
            OWN => own,
            // A disconnected child's offline part carries its message.
            child => self.child_reported(child, key),
        });
        for (member, status) in &added {
            live.remove(member, status);
        }
        Some(merged)
    }

    fn merge_anew(&self, key: &str) -> Merge {
        let mut merge = Merge::new(self.cuts.generation());
        let mut left_out = self.cuts.left_out_of(key).in_order();
        let mut links = Cursor::new(&self.links_by_name);
        for (child, reported) in &self.statuses.children {
            let Some(status) = reported.get(key) else {
                continue;
            };
            let part = match (left_out(child), links.contains(child)) {
                (true, _) => Part::LeftOut,
                (false, true) => Part::Live,
                (false, false) => Part::Offline,
            };
            merge.insert(child, status, part);
            #[cfg(test)]
            self.statuses
                .merges
                .merged_anew
                .set(self.statuses.merges.merged_anew.get() + 1);
        }
        merge
    }

    /// How many children's reports this node merged anew, for tests: a
    /// child's new report moves its part alone.
    #[cfg(test)]
    pub(crate) fn status_parts_merged_anew(&self) -> u64 {
        self.statuses.merges.merged_anew.get()
    }
}

/// How `child`'s report of placement `key` counts now.
fn part_of(
    cuts: &crate::placements::Cuts,
    links: &BTreeMap<String, crate::LinkId>,
    child: &str,
    key: &str,
) -> Part {
    if cuts.left_out_of(key).contains(child) {
        Part::LeftOut
    } else if links.contains_key(child) {
        Part::Live
    } else {
        Part::Offline
    }
}
