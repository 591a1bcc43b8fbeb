//! The inventory a relay holds of its subtree, and the changes it owes its
//! parent.
//!
//! What the transport measures of a direct child's link (RTT, bytes, the
//! revision it acknowledged, its lag) changes every second; it stays here,
//! with the parent that measured it, and never goes up. What goes up of a
//! link is what the inventory needs: whether the child is connected, since
//! when, and the bundle transfers completed to it (which change only when
//! the slice does). So what a relay's parent hears per second is bounded by
//! membership changes, not by the size of the subtree.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use relaymesh_protocol::{InventoryUpdate, LinkStatus, NodeRecord, Role};
use relaymesh_topology::aggregate::Aggregate;
use relaymesh_topology::{SubtreeError, SubtreeIndex};

use crate::state::{Mutation, Persisted};

#[derive(Debug)]
pub(crate) struct Inventory {
    own: Arc<NodeRecord>,
    /// Every node below this relay, with the child it lies under. Shared,
    /// so that a driver's copy of every record (the root's API has one
    /// after each change) costs a pointer per record, not a deep clone;
    /// a record changes by copy on write.
    nodes: BTreeMap<String, (Arc<NodeRecord>, String)>,
    /// The direct children among `nodes` (those under themselves), so
    /// that finding them costs O(children), not a walk of the subtree:
    /// every recut of a placement asks, twice for a bounded one, and at
    /// the root the subtree is the whole fleet.
    direct: BTreeSet<String>,
    index: SubtreeIndex,
    /// The measured part of each direct child's link (see the module
    /// documentation): shown by this relay, never sent up.
    measured: BTreeMap<String, LinkStatus>,
    /// Counts changes of the records (`all`), so a reader can tell a copy
    /// is current without comparing.
    version: u64,
    /// Counts changes of `measured`.
    measured_version: u64,
    /// The names whose record changed or went since a driver last took
    /// them (see [`Inventory::take_touched`]).
    touched: Touched,
    /// The same for `measured`: every acknowledgement moves a child's
    /// acknowledged revision.
    measured_touched: Touched,
    /// Changes not yet sent up: a record to upsert, or `None` to remove.
    pending_up: BTreeMap<String, Option<NodeRecord>>,
    /// Pieces of a child's full inventory, until its last piece arrives.
    assembling: BTreeMap<String, Vec<NodeRecord>>,
    /// The clusters below each direct child, by label set.
    aggregates: ChildAggregates,
    /// How many records each direct child has this relay hold, its own
    /// included.
    held_per_child: BTreeMap<String, usize>,
    /// The most records one child may have this relay hold.
    max_records_per_child: usize,
    /// Records a child reported of a node another child still holds, by
    /// node: a node that moved, reported by its new side before its old
    /// side forgot it, and, for a relay that moved, every node below it.
    /// Admitted once the old side lets go (never before: until then the old
    /// side's status may still count the node), parents before their
    /// children. Kept in memory only; the children report them again after
    /// a restart.
    claims: BTreeMap<String, (String, NodeRecord)>,
    /// The moves the root ordered, as node → new parent: only these make a
    /// claim (a record of a node another child holds is otherwise refused,
    /// so no child can lay claim to a node that might leave its side).
    moves: BTreeMap<String, String>,
    /// The candidate parents the root granted, as node → relays: a child
    /// whose subtree holds a candidate may claim the node too, and its
    /// claim is admitted once the side that holds the node lost it (see
    /// [`Inventory::admit_orphaned_claims`]).
    parents: BTreeMap<String, Vec<String>>,
    /// Clusters that re-parented away from a disconnected child, by that
    /// child: its last status still counts them (as offline), so the status
    /// merge leaves them out until the child is back and says so itself.
    departed: BTreeMap<String, Vec<NodeRecord>>,
    /// Children that got a claimed node since the last call of
    /// [`Inventory::take_admitted_claims`].
    admitted_claims: Vec<String>,
}

/// The most claims a relay keeps (see [`Inventory::claims`]) unless one
/// child may have it hold more records: moves under way at once, far more
/// than any rollout of moves needs, or one relay's whole subtree.
const MAX_CLAIMS: usize = 1024;

/// What an inventory update from a child changed.
#[derive(Debug, Default)]
pub(crate) struct InventoryOutcome {
    /// The set of nodes under the child changed (not only their records).
    pub membership_changed: bool,
    /// Records refused because the child may not speak for them.
    pub refused: Vec<String>,
    /// New records refused because the child already has this relay hold
    /// as many as it may.
    pub over_limit: u64,
}

mod aggregates;
mod claims;
mod measured;
mod touched;

use aggregates::ChildAggregates;
use measured::reported_part;
use touched::Touched;

impl Inventory {
    /// The inventory as stored. What was stored stays, even above a limit
    /// lowered since: the limit applies to records that arrive.
    pub fn restore(own: NodeRecord, persisted: &Persisted, max_records_per_child: usize) -> Self {
        let mut inventory = Self {
            own: Arc::new(own),
            nodes: BTreeMap::new(),
            direct: BTreeSet::new(),
            index: SubtreeIndex::new(),
            measured: BTreeMap::new(),
            version: 0,
            measured_version: 0,
            touched: Touched::default(),
            measured_touched: Touched::default(),
            pending_up: BTreeMap::new(),
            assembling: BTreeMap::new(),
            aggregates: ChildAggregates::default(),
            held_per_child: BTreeMap::new(),
            max_records_per_child,
            claims: BTreeMap::new(),
            moves: BTreeMap::new(),
            parents: BTreeMap::new(),
            departed: BTreeMap::new(),
            admitted_claims: Vec::new(),
        };
        // Parents come before their children when sorted by depth, which the
        // index needs; records whose chain is broken are dropped.
        let mut records: Vec<_> = persisted
            .nodes
            .values()
            .filter_map(|(record, via)| via.clone().map(|via| (record.clone(), via)))
            .collect();
        records.sort_by_key(|(record, via)| {
            let parent_of = |name: &str| {
                let node = persisted.nodes.get(name);
                node.and_then(|(record, _)| record.parent.clone())
            };
            (
                record.name != *via,
                depth(record, persisted.nodes.len(), parent_of),
            )
        });
        for (mut record, via) in records {
            // Stores written before measurements stayed local hold them.
            record.link = record.link.as_ref().map(reported_part);
            if inventory.index.admit(&via, &record).is_ok() {
                inventory.put_node(record, via);
            }
        }
        inventory
    }

    /// Counts a change of `name`'s record (or its removal).
    fn touch(&mut self, name: &str) {
        self.version += 1;
        self.touched.note(name);
    }

    /// The names whose record changed or went since the last call, for a
    /// driver that keeps a copy of [`Inventory::all_shared`] current at
    /// O(changes); `None` the first time (copy every record then).
    pub fn take_touched(&mut self) -> Option<BTreeSet<String>> {
        self.touched.take()
    }

    /// The record of `name`, this node's own included, shared.
    pub fn record_shared(&self, name: &str) -> Option<&Arc<NodeRecord>> {
        if name == self.own.name {
            return Some(&self.own);
        }
        self.nodes.get(name).map(|(record, _)| record)
    }

    /// This node's own record.
    pub fn own(&self) -> &NodeRecord {
        &self.own
    }

    pub fn index(&self) -> &SubtreeIndex {
        &self.index
    }

    /// This relay's record and every record below it, as reported up:
    /// without the measurements of its children's links.
    pub fn all(&self) -> impl Iterator<Item = &NodeRecord> {
        self.all_shared().map(|record| &**record)
    }

    /// [`Inventory::all`], shared: copying it costs a pointer per record.
    pub fn all_shared(&self) -> impl Iterator<Item = &Arc<NodeRecord>> {
        std::iter::once(&self.own).chain(self.nodes.values().map(|(record, _)| record))
    }

    /// Changes whenever a record of [`Inventory::all`] does.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Changes this node's own record and owes it to the parent.
    pub fn update_own(&mut self, update: impl FnOnce(&mut NodeRecord)) {
        update(Arc::make_mut(&mut self.own));
        let name = self.own.name.clone();
        self.touch(&name);
        self.pending_up
            .insert(self.own.name.clone(), Some(NodeRecord::clone(&self.own)));
    }

    /// The record of a node below this relay.
    pub fn record(&self, name: &str) -> Option<&NodeRecord> {
        self.nodes.get(name).map(|(record, _)| &**record)
    }

    /// The names of this relay's direct children, connected or not.
    pub fn direct_children(&self) -> Vec<String> {
        self.direct.iter().cloned().collect()
    }

    /// The clusters below each direct child, summarised for placement.
    pub fn aggregates(&self) -> &BTreeMap<String, Aggregate> {
        self.aggregates.by_child()
    }

    /// A number that changes whenever the aggregates do.
    pub fn aggregates_version(&self) -> u64 {
        self.aggregates.version()
    }

    /// Whether the aggregates changed since the last call (and resets it).
    pub fn take_aggregates_changed(&mut self) -> bool {
        self.aggregates.take_changed()
    }

    /// Marks every direct child disconnected: after a restart, none is.
    pub fn disconnect_all_children(&mut self, unix_ms: u64, mutations: &mut Vec<Mutation>) {
        for child in self.direct_children() {
            self.set_link(&child, unix_ms, mutations, |link| link.connected = false);
        }
    }

    /// Records that `child` connected, creating its record if it is new.
    pub fn child_connected(
        &mut self,
        child: NodeRecord,
        unix_ms: u64,
        mutations: &mut Vec<Mutation>,
    ) -> bool {
        let name = child.name.clone();
        let is_new = !self.nodes.contains_key(&name);
        if is_new {
            // A node known under another child moved here (failover): the
            // other child no longer speaks for it.
            if let Some(old_via) = self.index.via(&name).map(str::to_string) {
                self.index.remove(&old_via, &name);
            }
            let _ = self.index.admit(&name, &child);
            self.put_node(child, name.clone());
        }
        self.set_link(&name, unix_ms, mutations, |link| link.connected = true);
        // Back, it reports what it holds itself.
        self.departed.remove(&name);
        is_new
    }

    pub fn child_disconnected(&mut self, child: &str, unix_ms: u64, mutations: &mut Vec<Mutation>) {
        self.set_link(child, unix_ms, mutations, |link| link.connected = false);
    }

    /// Forgets `name` and every node below it, if they lie below this relay,
    /// and owes their removal to the parent. Returns the names forgotten.
    pub fn remove_subtree(&mut self, name: &str, mutations: &mut Vec<Mutation>) -> Vec<String> {
        let Some(via) = self.index.via(name).map(str::to_string) else {
            return Vec::new();
        };
        // The nodes below `name` are those whose chain of parents reaches
        // it; they all lie under the same direct child.
        let mut doomed = vec![name.to_string()];
        let mut grew = true;
        while grew {
            grew = false;
            for candidate in self.index.under(&via) {
                let below = self.nodes.get(candidate).is_some_and(|(record, _)| {
                    record
                        .parent
                        .as_deref()
                        .is_some_and(|parent| doomed.iter().any(|name| name == parent))
                });
                if below && !doomed.iter().any(|name| name == candidate) {
                    doomed.push(candidate.to_string());
                    grew = true;
                }
            }
        }
        for name in &doomed {
            self.index.remove(&via, name);
            self.assembling.remove(name);
            self.drop_node(name);
            mutations.push(Mutation::RemoveNode(name.clone()));
            self.pending_up.insert(name.clone(), None);
        }
        self.admit_ready_claims(mutations);
        doomed
    }

    /// Sets (`Some`) or removes (`None`) label `key` on the record of
    /// direct child `child` and owes it to the parent; whether it changed.
    pub fn set_child_label(
        &mut self,
        child: &str,
        key: &str,
        value: Option<&str>,
        mutations: &mut Vec<Mutation>,
    ) -> bool {
        let Some((record, via)) = self.nodes.get(child) else {
            return false;
        };
        if via != child {
            return false;
        }
        let mut record = NodeRecord::clone(record);
        let via = via.clone();
        let changed = match value {
            Some(value) => {
                record
                    .labels
                    .insert(key.to_string(), value.to_string())
                    .as_deref()
                    != Some(value)
            }
            None => record.labels.remove(key).is_some(),
        };
        if !changed {
            return false;
        }
        mutations.push(Mutation::PutNode {
            record: record.clone(),
            via: Some(via.clone()),
        });
        self.pending_up
            .insert(record.name.clone(), Some(record.clone()));
        self.put_node(record, via);
        true
    }

    /// Updates the bundle transfers completed to a direct child. They
    /// change only when bundles are served, and go up with the next report
    /// (not persisted here: the core keeps the totals durably).
    pub fn child_served(&mut self, child: &str, times: u64, bytes: u64) {
        if let Some((record, _)) = self.nodes.get_mut(child) {
            if record.link.is_none() {
                Arc::make_mut(record).link = Some(LinkStatus::default());
            }
            let served = record.link.as_ref().map_or((0, 0), |link| {
                (link.bundles_served, link.bundle_bytes_served)
            });
            if served != (times, bytes) {
                // Copied on write only when it changes: a driver's copy
                // may share it.
                let record = Arc::make_mut(record);
                let link = record.link.get_or_insert_with(LinkStatus::default);
                link.bundles_served = times;
                link.bundle_bytes_served = bytes;
                let record = record.clone();
                self.touch(child);
                self.pending_up.insert(child.to_string(), Some(record));
            }
        }
    }

    /// Applies an inventory update from `child`.
    pub fn apply_from_child(
        &mut self,
        child: &str,
        update: InventoryUpdate,
        mutations: &mut Vec<Mutation>,
    ) -> InventoryOutcome {
        let mut outcome = InventoryOutcome::default();
        match update {
            InventoryUpdate::Delta { upserts, removals } => {
                for record in upserts {
                    self.upsert(child, record, mutations, &mut outcome);
                }
                for name in removals {
                    if name != child && self.index.remove(child, &name) {
                        self.drop_node(&name);
                        mutations.push(Mutation::RemoveNode(name.clone()));
                        self.pending_up.insert(name.clone(), None);
                        outcome.membership_changed = true;
                    } else if self.claims.get(&name).is_some_and(|(by, _)| by == child) {
                        self.claims.remove(&name);
                    }
                }
                self.admit_ready_claims(mutations);
            }
            InventoryUpdate::Full {
                mut records,
                first,
                last,
            } => {
                let pieces = self.assembling.entry(child.to_string()).or_default();
                if first {
                    pieces.clear();
                }
                // Pieces wait here until the last: bounded like the records
                // they will become, or a child that never sends the last
                // could grow them for ever.
                let room = self.max_records_per_child.saturating_sub(pieces.len());
                if records.len() > room {
                    let excess = records.len() - room;
                    outcome.over_limit = outcome.over_limit.saturating_add(excess as u64);
                    records.truncate(room);
                }
                pieces.extend(records);
                if last {
                    let records = self.assembling.remove(child).unwrap_or_default();
                    self.replace_subtree(child, records, mutations, &mut outcome);
                }
            }
        }
        outcome
    }

    /// Takes the changes owed to the parent.
    pub fn take_pending(&mut self) -> Option<InventoryUpdate> {
        if self.pending_up.is_empty() {
            return None;
        }
        let mut upserts = Vec::new();
        let mut removals = Vec::new();
        for (name, change) in std::mem::take(&mut self.pending_up) {
            match change {
                Some(record) => upserts.push(record),
                None => removals.push(name),
            }
        }
        // Parents before children, so the parent can check each record
        // against what it already knows.
        upserts.sort_by_key(|record| depth_in(record, &self.nodes));
        Some(InventoryUpdate::Delta { upserts, removals })
    }

    /// The whole inventory, parents first, for a newly connected parent. It
    /// supersedes anything pending.
    pub fn full(&mut self) -> Vec<NodeRecord> {
        self.pending_up.clear();
        let mut records: Vec<NodeRecord> = self.all().cloned().collect();
        records.sort_by_key(|record| (record.name != self.own.name, depth_in(record, &self.nodes)));
        records
    }

    pub fn has_pending(&self) -> bool {
        !self.pending_up.is_empty()
    }

    fn upsert(
        &mut self,
        child: &str,
        mut record: NodeRecord,
        mutations: &mut Vec<Mutation>,
        outcome: &mut InventoryOutcome,
    ) {
        let existing = self.nodes.get(&record.name);
        if record.name == child {
            // A child's own link is this relay's to describe, and its role
            // and parent come from its certificate and this link: never from
            // what the child says of itself.
            record.link = existing.and_then(|(current, _)| current.link.clone());
            if let Some((current, _)) = existing {
                record.role = current.role;
                record.parent.clone_from(&current.parent);
            }
        } else if self
            .nodes
            .get(child)
            .is_some_and(|(own, _)| own.role == Role::Agent)
        {
            tracing::warn!(child, node = %record.name, "refused a node reported below an agent");
            outcome.refused.push(record.name);
            return;
        } else {
            // A child that still sends its measurements up (an older
            // version) must not make every one of them climb further.
            record.link = record.link.as_ref().map(reported_part);
        }
        let held_for_child = existing.is_some_and(|(_, via)| via == child);
        if record.name != child && !held_for_child && !self.has_room(child) {
            // Logged once per update by the caller, not once per record.
            outcome.over_limit = outcome.over_limit.saturating_add(1);
            return;
        }
        let is_new = existing.is_none();
        if let Err(error) = self.index.admit(child, &record) {
            let room = MAX_CLAIMS.max(self.max_records_per_child);
            if matches!(error, SubtreeError::OtherSubtree { .. })
                && self.may_claim_record(child, &record)
                && (self.claims.len() < room || self.claims.contains_key(&record.name))
            {
                tracing::info!(child, node = %record.name, %error, "holding a claim on a node another child still holds");
                self.claims
                    .insert(record.name.clone(), (child.to_string(), record));
                return;
            }
            tracing::warn!(child, node = %record.name, %error, "refused inventory record");
            outcome.refused.push(record.name);
            return;
        }
        if self.nodes.get(&record.name).map(|(current, _)| &**current) == Some(&record) {
            return;
        }
        outcome.membership_changed |= is_new;
        mutations.push(Mutation::PutNode {
            record: record.clone(),
            via: Some(child.to_string()),
        });
        self.pending_up
            .insert(record.name.clone(), Some(record.clone()));
        self.put_node(record, child.to_string());
    }

    fn replace_subtree(
        &mut self,
        child: &str,
        records: Vec<NodeRecord>,
        mutations: &mut Vec<Mutation>,
        outcome: &mut InventoryOutcome,
    ) {
        let before: Vec<String> = self
            .index
            .under(child)
            .filter(|name| *name != child)
            .map(str::to_string)
            .collect();
        self.index.clear_below(child);
        self.claims.retain(|_, (by, _)| by != child);
        // Records the child no longer reports go first, so that they do not
        // count against its limit while the new ones arrive.
        let reported: std::collections::BTreeSet<&str> =
            records.iter().map(|record| record.name.as_str()).collect();
        let gone: Vec<String> = before
            .iter()
            .filter(|name| !reported.contains(name.as_str()))
            .cloned()
            .collect();
        for name in &gone {
            self.drop_node(name);
        }
        let mut kept = std::collections::BTreeSet::new();
        for record in records {
            kept.insert(record.name.clone());
            let known = before.contains(&record.name) || record.name == child;
            self.upsert(child, record, mutations, outcome);
            outcome.membership_changed |= !known;
        }
        for name in before {
            if !kept.contains(&name) || !self.index.contains(&name) {
                self.drop_node(&name);
                mutations.push(Mutation::RemoveNode(name.clone()));
                self.pending_up.insert(name.clone(), None);
                outcome.membership_changed = true;
            }
        }
        self.admit_ready_claims(mutations);
    }

    fn put_node(&mut self, record: NodeRecord, via: String) {
        self.touch(&record.name);
        let unchanged = self.nodes.get(&record.name).is_some_and(|(old, old_via)| {
            old.role == record.role && old.labels == record.labels && *old_via == via
        });
        if !unchanged {
            if let Some((old, old_via)) = self.nodes.remove(&record.name) {
                self.aggregates.count(&old, &old_via, false);
                self.release_hold(&old_via);
            }
            self.aggregates.count(&record, &via, true);
            *self.held_per_child.entry(via.clone()).or_default() += 1;
        }
        if record.name == via {
            self.direct.insert(via.clone());
        } else {
            self.direct.remove(&record.name);
        }
        self.nodes
            .insert(record.name.clone(), (Arc::new(record), via));
    }

    fn drop_node(&mut self, name: &str) {
        if self.measured.remove(name).is_some() {
            self.measured_version += 1;
            self.measured_touched.note(name);
        }
        self.direct.remove(name);
        if let Some((old, via)) = self.nodes.remove(name) {
            self.touch(name);
            self.aggregates.count(&old, &via, false);
            self.release_hold(&via);
        }
    }

    /// Whether `child` may have this relay hold one more record.
    fn has_room(&self, child: &str) -> bool {
        self.held_per_child.get(child).copied().unwrap_or(0) < self.max_records_per_child
    }

    fn release_hold(&mut self, child: &str) {
        if let Some(held) = self.held_per_child.get_mut(child) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                self.held_per_child.remove(child);
            }
        }
    }

    fn set_link(
        &mut self,
        child: &str,
        unix_ms: u64,
        mutations: &mut Vec<Mutation>,
        update: impl FnOnce(&mut LinkStatus),
    ) {
        if !self.nodes.contains_key(child) {
            return;
        }
        self.touch(child);
        let Some((record, via)) = self.nodes.get_mut(child) else {
            return;
        };
        let record = Arc::make_mut(record);
        let link = record.link.get_or_insert_with(LinkStatus::default);
        let was_connected = link.connected;
        update(link);
        if link.connected != was_connected {
            link.changed_unix_ms = unix_ms;
        }
        mutations.push(Mutation::PutNode {
            record: record.clone(),
            via: Some(via.clone()),
        });
        self.pending_up
            .insert(child.to_string(), Some(record.clone()));
    }
}

/// Whether a record says its node is connected to its parent.
fn is_connected(record: &NodeRecord) -> bool {
    record.link.as_ref().is_some_and(|link| link.connected)
}

/// How many ancestors `record` has, following `parent_of`; stops at `limit`
/// so corrupt data with a cycle cannot loop.
fn depth(record: &NodeRecord, limit: usize, parent_of: impl Fn(&str) -> Option<String>) -> usize {
    let mut depth = 0;
    let mut parent = record.parent.clone();
    while let Some(name) = parent {
        depth += 1;
        if depth > limit {
            break;
        }
        parent = parent_of(&name);
    }
    depth
}

fn depth_in(record: &NodeRecord, nodes: &BTreeMap<String, (Arc<NodeRecord>, String)>) -> usize {
    depth(record, nodes.len(), |name| {
        nodes
            .get(name)
            .and_then(|(record, _)| record.parent.clone())
    })
}

#[cfg(test)]
mod tests;
