//! Candidate parents (see [`relaymesh_protocol::parents`]), on every side of
//! a re-parenting.
//!
//! On the node: [`Core::fail_over`] adopts a candidate its uplink reached
//! after its parent went away, and holds the node's status until the
//! root's grant names the new parent (as after a move: until then the old
//! side may still count the node). On relays above: the inventory admits
//! the new side's record once the old side lost the node, and a relay that
//! still holds the node on a side that lost it forgets it when the root's
//! grant names a parent elsewhere. At the root: the grant is re-signed
//! naming the parent the inventory shows ([`Action::SettleParents`]).

use std::collections::BTreeMap;

use relaymesh_protocol::{ErrorCode, Parents, Refusal};

use super::slice::Changed;
use super::state::Mutation;
use super::{Action, Core, Now};

impl Core {
    /// Acts on grants of candidate parents among `changed`.
    pub(super) fn apply_parents(&mut self, now: Now, changed: &[Changed]) {
        let nodes: Vec<String> = changed
            .iter()
            .filter_map(|change| {
                change
                    .key
                    .strip_prefix(relaymesh_protocol::parents::KEY_PREFIX)
                    .map(str::to_string)
            })
            .collect();
        if nodes.is_empty() {
            return;
        }
        self.sync_parents();
        let mut mutations = Vec::new();
        let mut forgot = false;
        for node in &nodes {
            if *node == self.name {
                self.release_if_current(now);
                continue;
            }
            let Some(current) = self.grant(node).and_then(|grant| grant.current) else {
                continue;
            };
            if self.links_by_name.contains_key(node.as_str()) {
                continue; // connected here: the root's word is older
            }
            if self
                .inventory
                .forget_reparented(node, &current, &mut mutations)
            {
                tracing::info!(%node, parent = %current, "forgot a node that re-parented elsewhere");
                self.forget_child_status(now, node);
                forgot = true;
            }
        }
        self.persist(mutations);
        if forgot {
            self.after_claims_changed(now);
        }
        if !self.upstream.has_parent() {
            self.settle_parents();
        }
    }

    /// Hands the inventory every grant the slice holds.
    pub(super) fn sync_parents(&mut self) {
        let parents: BTreeMap<String, Vec<String>> = self
            .slice
            .entries_with_prefix(relaymesh_protocol::parents::KEY_PREFIX)
            .filter_map(|entry| Parents::from_entry(entry)?.ok())
            .map(|grant| {
                let relays = grant.candidates.into_iter().map(|c| c.name).collect();
                (grant.node, relays)
            })
            .collect();
        self.inventory.set_parents(parents);
    }

    /// The grant of candidate parents for `node`, if the slice holds a
    /// readable one.
    pub fn grant(&self, node: &str) -> Option<Parents> {
        let entry = self.slice.entry(&Parents::key_for(node))?;
        match Parents::from_entry(entry)? {
            Ok(grant) => Some(grant),
            Err(error) => {
                tracing::error!(key = %entry.key, %error, "unreadable candidate parents");
                None
            }
        }
    }

    /// This node's uplink reached candidate `parent` after its own parent
    /// went away: the next link starts afresh under it, and this node's
    /// status waits until the root names `parent` in its grant. Unlike a
    /// move, no one is told of the leaving: the old parent is gone.
    pub fn fail_over(&mut self, now: Now, parent: &str) {
        tracing::warn!(parent, "re-parenting to a candidate parent");
        self.statuses.held = true;
        self.inventory
            .update_own(|own| own.parent = Some(parent.to_string()));
        self.upstream.forget_position();
        self.persist(vec![Mutation::ClearParentPosition]);
        self.schedule_inventory_flush(now);
    }

    /// After a restart: whether this node re-parented and the root has not
    /// yet named its new parent.
    pub(super) fn restore_parents(&mut self) {
        self.sync_parents();
        if self.pending_reparent() {
            self.statuses.held = true;
        }
    }

    /// Whether this node's parent is one of its candidates and the root's
    /// grant names another one (a parent the node was moved to on the
    /// root's order is no candidate, and waits for no grant).
    fn pending_reparent(&self) -> bool {
        let Some(parent) = self.inventory.own().parent.clone() else {
            return false;
        };
        self.grant(&self.name).is_some_and(|grant| {
            grant.allows(&parent) && grant.current.is_some_and(|current| current != parent)
        })
    }

    fn release_if_current(&mut self, now: Now) {
        if self.statuses.held && !self.pending_reparent() && !self.moving() {
            self.release_status(now);
        }
    }

    /// At the root: every grant whose node the inventory shows under
    /// another candidate than the one it names is re-signed naming it
    /// ([`Action::SettleParents`]). The record only reaches the root once
    /// every relay between the two sides admitted it.
    pub(super) fn settle_parents(&mut self) {
        let settled: Vec<Parents> = self
            .slice
            .entries_with_prefix(relaymesh_protocol::parents::KEY_PREFIX)
            .filter_map(|entry| Parents::from_entry(entry)?.ok())
            .filter_map(|grant| {
                let parent = self.inventory.record(&grant.node)?.parent.clone()?;
                let unnamed = grant.allows(&parent) && grant.current.as_ref() != Some(&parent);
                unnamed.then_some(Parents {
                    current: Some(parent),
                    ..grant
                })
            })
            .collect();
        for grant in settled {
            tracing::info!(node = %grant.node, parent = ?grant.current, "the root sees a node under a candidate parent");
            self.actions.push_back(Action::SettleParents(grant));
        }
    }

    /// A child's link ended: if the root sees it under another candidate,
    /// it is forgotten (it re-parented while its link here was still open).
    pub(super) fn forget_if_reparented(&mut self, now: Now, name: &str) {
        let Some(current) = self.grant(name).and_then(|grant| grant.current) else {
            return;
        };
        if current != self.name && self.inventory.record(name).is_some() {
            tracing::info!(child = name, parent = %current, "a child that re-parented disconnected: forgetting it");
            self.drop_child(
                now,
                name,
                Refusal::new(
                    ErrorCode::Moved,
                    format!("node {name:?} re-parented to {current:?}"),
                ),
            );
        }
    }

    /// Admits the claims whose old side lost their node (see
    /// `Inventory::admit_orphaned_claims`): after a child's report or its
    /// link went down.
    pub(super) fn admit_orphaned_claims(&mut self, now: Now) {
        let mut mutations = Vec::new();
        let admitted = self.inventory.admit_orphaned_claims(&mut mutations);
        self.persist(mutations);
        if admitted {
            self.after_claims_changed(now);
        }
    }

    fn after_claims_changed(&mut self, now: Now) {
        // A cluster that left a disconnected child no longer counts there.
        self.status_link_changed(now);
        self.snapshot_admitted_claims();
        if self.inventory.take_aggregates_changed() {
            self.schedule_recut(now);
        }
        self.schedule_inventory_flush(now);
    }
}
