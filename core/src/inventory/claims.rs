//! Claims on nodes that moved: a relay's new side claims a moved node (or a
//! moved relay's whole subtree) and holds the claim until the old side lets
//! the node go, so no node is counted on two sides at once.

use std::collections::BTreeMap;

use relaymesh_protocol::{NodeRecord, Role};

use super::{is_connected, Inventory, InventoryOutcome};
use crate::state::Mutation;

impl Inventory {
    /// Admits every claim whose node its old side has let go and whose
    /// parent the claiming side now holds: a moved relay before the nodes
    /// below it, whatever order the old side's removals came in.
    pub(super) fn admit_ready_claims(&mut self, mutations: &mut Vec<Mutation>) {
        loop {
            let ready: Vec<String> = self
                .claims
                .iter()
                .filter(|(node, (by, record))| {
                    !self.index.contains(node)
                        && record.parent.as_deref().is_some_and(|parent| {
                            parent == by || self.index.via(parent) == Some(by.as_str())
                        })
                })
                .map(|(node, _)| node.clone())
                .collect();
            if ready.is_empty() {
                return;
            }
            for name in ready {
                self.admit_claim(&name, mutations);
            }
        }
    }

    /// Admits the record another child claimed of `name`, which its old
    /// side has let go.
    pub(super) fn admit_claim(&mut self, name: &str, mutations: &mut Vec<Mutation>) {
        let Some((child, record)) = self.claims.remove(name) else {
            return;
        };
        if !self.nodes.contains_key(&child) {
            return;
        }
        let granted = self.parents.contains_key(name) && !self.moves.contains_key(name);
        if granted && !is_connected(&record) {
            // A candidate's stale record of a node that re-parented away
            // from it (it reports it from before it went down): the node is
            // not there.
            return;
        }
        let mut outcome = InventoryOutcome::default();
        self.upsert(&child, record, mutations, &mut outcome);
        if self.index.via(name) == Some(child.as_str()) {
            tracing::info!(
                node = name,
                child,
                "a moved node is now held under its new side"
            );
            self.admitted_claims.push(child);
        }
    }

    /// Sets the moves the root ordered (node → new parent).
    pub fn set_moves(&mut self, moves: BTreeMap<String, String>) {
        self.moves = moves;
        self.drop_unfounded_claims();
    }

    /// Sets the candidate parents the root granted (node → relays).
    pub fn set_parents(&mut self, parents: BTreeMap<String, Vec<String>>) {
        self.parents = parents;
        self.drop_unfounded_claims();
    }

    pub(super) fn drop_unfounded_claims(&mut self) {
        loop {
            let unfounded: Vec<String> = self
                .claims
                .iter()
                .filter(|(_, (child, record))| !self.may_claim_record(child, record))
                .map(|(node, _)| node.clone())
                .collect();
            if unfounded.is_empty() {
                return;
            }
            for node in unfounded {
                self.claims.remove(&node);
            }
        }
    }

    /// Whether `child` may claim `record`'s node: [`Inventory::may_claim`],
    /// or its parent is a node `child` claims (a relay that moves takes its
    /// subtree along).
    pub(super) fn may_claim_record(&self, child: &str, record: &NodeRecord) -> bool {
        self.may_claim(child, &record.name)
            || record
                .parent
                .as_ref()
                .and_then(|parent| self.claims.get(parent))
                .is_some_and(|(by, _)| by == child)
    }

    /// Whether `child` may claim `node`: the root moves it to `child` or to
    /// a relay below it, or names one of those among its candidate parents.
    pub(super) fn may_claim(&self, child: &str, node: &str) -> bool {
        let under_child = |relay: &String| relay == child || self.index.via(relay) == Some(child);
        self.moves.get(node).is_some_and(under_child)
            || self
                .parents
                .get(node)
                .is_some_and(|relays| relays.iter().any(under_child))
    }

    /// Admits every claim on a node with candidate parents whose holding
    /// side lost it (the node, or a relay between it and this one, is
    /// disconnected) while the claiming side has it connected: the node
    /// re-parented because its parent went away, which then cannot let go
    /// of it. Returns whether any was admitted.
    pub fn admit_orphaned_claims(&mut self, mutations: &mut Vec<Mutation>) -> bool {
        let orphaned: Vec<String> = self
            .claims
            .iter()
            .filter(|(node, (_, record))| {
                self.parents.contains_key(*node)
                    && is_connected(record)
                    && self.index.via(node).is_some()
                    && self.lost(node)
            })
            .map(|(node, _)| node.clone())
            .collect();
        for node in &orphaned {
            tracing::info!(
                node,
                "the side holding a node lost it; admitting its new side"
            );
            self.note_departure(node);
            // Forgetting the old record admits the claim (see
            // `remove_subtree`).
            self.remove_subtree(node, mutations);
        }
        !orphaned.is_empty()
    }

    /// Forgets `node` if this relay holds it on a side that lost it while
    /// the root sees it under `current`, a relay on another side: the node
    /// re-parented there. Returns whether it was forgotten.
    pub fn forget_reparented(
        &mut self,
        node: &str,
        current: &str,
        mutations: &mut Vec<Mutation>,
    ) -> bool {
        let Some(via) = self.index.via(node).map(str::to_string) else {
            return false;
        };
        let elsewhere = current != via && self.index.via(current) != Some(via.as_str());
        if !elsewhere || current == self.own.name || !self.lost(node) {
            return false;
        }
        self.note_departure(node);
        !self.remove_subtree(node, mutations).is_empty()
    }

    /// Remembers that cluster `node`, or every cluster below relay `node`,
    /// left the child it is held under while that child's side lost it (see
    /// [`Inventory::departed`]).
    pub(super) fn note_departure(&mut self, node: &str) {
        let Some(via) = self.index.via(node).map(str::to_string) else {
            return;
        };
        if self
            .nodes
            .get(&via)
            .is_none_or(|(own, _)| is_connected(own))
        {
            return;
        }
        let leaving: Vec<NodeRecord> = self
            .index
            .under(&via)
            .filter_map(|name| self.nodes.get(name).map(|(record, _)| &**record))
            .filter(|record| record.role == Role::Agent && self.lies_below(&record.name, node))
            .cloned()
            .collect();
        self.departed.entry(via).or_default().extend(leaving);
    }

    /// Whether `name` is `node` or lies below it, following the records'
    /// parents (bounded, so a cycle in corrupt data cannot loop).
    pub(super) fn lies_below(&self, name: &str, node: &str) -> bool {
        let mut current = name;
        for _ in 0..=self.nodes.len() {
            if current == node {
                return true;
            }
            match self
                .record(current)
                .and_then(|record| record.parent.as_deref())
            {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }

    /// The clusters that re-parented away from direct child `child` while
    /// it was disconnected (see [`Inventory::departed`]).
    pub fn departed(&self, child: &str) -> &[NodeRecord] {
        self.departed.get(child).map_or(&[], Vec::as_slice)
    }

    /// Whether the record of `node` says it is cut off from this relay: it,
    /// or a node between it and this relay, is disconnected.
    pub(super) fn lost(&self, node: &str) -> bool {
        let mut name = node.to_string();
        for _ in 0..=self.nodes.len() {
            let Some((record, via)) = self.nodes.get(&name) else {
                return true;
            };
            if !is_connected(record) {
                return true;
            }
            if name == *via {
                return false;
            }
            match &record.parent {
                Some(parent) => name = parent.clone(),
                None => return true,
            }
        }
        true
    }

    /// The children that got a claimed node (see [`Inventory::claims`])
    /// since the last call: which entries their subtrees need changed.
    pub fn take_admitted_claims(&mut self) -> Vec<String> {
        std::mem::take(&mut self.admitted_claims)
    }
}
