//! Moves arriving in the slice (see [`relaymesh_protocol::moves`]), on both
//! sides of them.
//!
//! On the node that moves: a move naming it hands the daemon the token
//! ([`Action::Move`]); once joined, [`Core::re_parent`] tells the old parent
//! it is leaving and holds the node's status until the root settles the
//! move. On the old parent: [`UpMessage::Leaving`] forgets the child, its
//! subtree and its status in one report up, so the relays above drop them
//! before the node shows up under its new parent.

use relaymesh_protocol::message::UpMessage;
use relaymesh_protocol::{ErrorCode, Move, MoveState, Refusal};

use super::slice::Changed;
use super::state::Mutation;
use super::{Action, Core, Now};

impl Core {
    /// Acts on a move of this node among `changed`, and keeps the
    /// inventory's list of moves (who may claim whom) current.
    pub(super) fn apply_moves(&mut self, now: Now, changed: &[Changed]) {
        if changed.iter().any(|change| {
            change
                .key
                .starts_with(relaymesh_protocol::moves::KEY_PREFIX)
        }) {
            self.sync_moves();
        }
        let key = Move::key_for(&self.name);
        if !changed.iter().any(|change| change.key == key) {
            return;
        }
        let Some(moved) = self.own_move() else {
            return;
        };
        let parent = self.inventory.own().parent.clone();
        match moved.state {
            MoveState::Moving if parent.as_deref() != Some(moved.to.as_str()) => {
                tracing::info!(to = %moved.to, from = ?parent, "the root moves this node");
                self.actions.push_back(Action::Move(moved));
            }
            MoveState::Settled if parent.as_deref() == Some(moved.to.as_str()) => {
                self.release_status(now);
            }
            _ => {}
        }
    }

    /// Hands the inventory every move the slice holds.
    pub(super) fn sync_moves(&mut self) {
        let moves = self
            .slice
            .entries()
            .filter_map(|entry| Move::from_entry(entry)?.ok())
            .map(|moved| (moved.node, moved.to))
            .collect();
        self.inventory.set_moves(moves);
    }

    /// The move of this node the slice holds, if it is readable.
    fn own_move(&self) -> Option<Move> {
        let entry = self.slice.entry(&Move::key_for(&self.name))?;
        match Move::from_entry(entry)? {
            Ok(moved) => Some(moved),
            Err(error) => {
                tracing::error!(key = %entry.key, %error, "unreadable move");
                None
            }
        }
    }

    /// Whether a node restored from its store is in the middle of a move:
    /// it already dials the new parent, which the root has not yet seen.
    pub(super) fn restore_move(&mut self) {
        self.sync_moves();
        let parent = self.inventory.own().parent.clone();
        if let Some(moved) = self.own_move() {
            if moved.state == MoveState::Moving && parent.as_deref() == Some(moved.to.as_str()) {
                self.statuses.held = true;
            }
        }
    }

    /// This node joined `parent` for a move: tells the current parent it is
    /// leaving (it forgets this node at once and closes the link), makes
    /// the next link a fresh one (the new parent's history is not the old
    /// one's) and holds this node's status until the root settles the move.
    /// The daemon then dials `parent` with the new certificate.
    pub fn re_parent(&mut self, now: Now, parent: &str) {
        self.statuses.held = true;
        self.inventory
            .update_own(|own| own.parent = Some(parent.to_string()));
        self.actions.push_back(Action::SendUp(UpMessage::Leaving {
            to: parent.to_string(),
        }));
        self.persist(vec![Mutation::ClearParentPosition]);
        self.schedule_inventory_flush(now);
    }

    /// Whether this node holds its status back while a move settles.
    pub fn status_held(&self) -> bool {
        self.statuses.held
    }

    /// Whether this node is in the middle of a move the root has not
    /// settled.
    pub(super) fn moving(&self) -> bool {
        self.own_move()
            .is_some_and(|moved| moved.state == MoveState::Moving)
    }

    pub(super) fn release_status(&mut self, now: Now) {
        if !std::mem::take(&mut self.statuses.held) {
            return;
        }
        tracing::info!("the root sees this node under its new parent; reporting status again");
        let deferred = std::mem::take(&mut self.upstream.deferred_removals);
        if !deferred.is_empty() {
            // The new parent no longer sends what it removed: a fresh
            // snapshot says what really stays.
            tracing::info!(?deferred, "asking the new parent for a fresh snapshot");
            self.resync_with_parent();
            return;
        }
        if self.upstream.connected() {
            self.flush_status(true);
        } else {
            self.statuses.dirty = true;
            self.schedule_inventory_flush(now);
        }
    }

    /// At the root: every move whose node the inventory now shows under its
    /// new parent is settled ([`Action::Settle`]). The record only reaches
    /// the root once every relay between the two parents has let go of the
    /// old side's report (see `Inventory::claims`), so the node's status,
    /// which it sends only once settled, is never counted twice.
    pub(super) fn settle_moves(&mut self) {
        let settled: Vec<Move> = self
            .slice
            .entries()
            .filter_map(|entry| Move::from_entry(entry)?.ok())
            .filter(|moved| moved.state == MoveState::Moving)
            .filter(|moved| {
                self.inventory
                    .record(&moved.node)
                    .is_some_and(|record| record.parent.as_deref() == Some(moved.to.as_str()))
            })
            .collect();
        for moved in settled {
            tracing::info!(node = %moved.node, to = %moved.to, "a move is settled");
            self.actions.push_back(Action::Settle(Move {
                state: MoveState::Settled,
                ..moved
            }));
        }
    }

    /// Whether the root moves child `name` away from this relay.
    fn moving_away(&self, name: &str) -> bool {
        let Some(entry) = self.slice.entry(&Move::key_for(name)) else {
            return false;
        };
        matches!(Move::from_entry(entry), Some(Ok(moved)) if moved.from == self.name && moved.to != self.name)
    }

    /// A child's link ended: if the root moves it away from here, it is
    /// forgotten as if it had said it leaves (its `Leaving` may have been
    /// lost with a crash), so the relays above let go of it and its new
    /// parent's claim can be admitted. Should it come back here after all,
    /// it is a new child again.
    pub(super) fn forget_if_moving_away(&mut self, now: Now, name: &str) {
        if self.moving_away(name) && self.inventory.record(name).is_some() {
            tracing::info!(
                child = name,
                "a child the root moves elsewhere disconnected: forgetting it"
            );
            self.drop_child(
                now,
                name,
                Refusal::new(ErrorCode::Moved, format!("node {name:?} moves elsewhere")),
            );
        }
    }

    /// A child leaves on the root's order: it, its subtree and its status
    /// are forgotten in one report up, and its link is closed.
    pub(super) fn child_leaving(&mut self, now: Now, name: &str, to: &str) {
        tracing::info!(child = name, to, "child moves to another parent");
        self.drop_child(
            now,
            name,
            Refusal::new(ErrorCode::Moved, format!("node {name:?} moved to {to:?}")),
        );
    }
}
