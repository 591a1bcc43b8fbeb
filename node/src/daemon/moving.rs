//! Moves on the daemon's side (see [`relaymesh_protocol::moves`]).
//!
//! On the node that moves: join the new parent with the move's token (new
//! keys and certificate, as any join; a relay keeps its keys and has the
//! new parent sign its issuer key, so its subtree moves with it), store the new
//! identity and parent,
//! have the core tell the old parent it leaves, and dial the new parent once
//! the old one closed the link (or after [`LEAVE_TIMEOUT`], if it does not).
//! The store keeps everything else: the slice, bundles and what the agent
//! applied, so nothing is removed or applied again. At the root: sign a move
//! the core found settled.

use std::time::Duration;

use relaymesh_core::Now;
use relaymesh_protocol::Move;

use super::{Daemon, DaemonError, Event};
use crate::transport::join::{self, Joined};

/// How long a node that moves waits for its old parent to close the link
/// after saying it leaves, before it drops the link itself.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

impl Daemon {
    /// The root ordered this node to move: join the new parent in the
    /// background ([`Event::Moved`] comes back).
    pub(super) fn start_move(&mut self, moved: Move) {
        if self.moving {
            return;
        }
        self.moving = true;
        let identity = self.shared.identity.get();
        let mut endpoints = self.endpoints.clone();
        let events = self.shared.events.clone();
        tokio::spawn(async move {
            tracing::info!(to = %moved.to, role = %identity.role, "joining the new parent for a move");
            let result = join::join_moving(&moved.token, &identity, &mut endpoints)
                .await
                .map(Box::new)
                .map_err(|error| error.to_string());
            let _ = events.send(Event::Moved(result)).await;
        });
    }

    /// The join for a move ended: on success, adopt the new identity and
    /// parent, and leave the old one.
    pub(super) async fn finish_move(
        &mut self,
        now: Now,
        result: Result<Box<Joined>, String>,
    ) -> Result<(), DaemonError> {
        self.moving = false;
        let joined = match result {
            Ok(joined) => joined,
            Err(error) => {
                // The token is single use and short-lived: an admin moves
                // the node again (`relayctl move`) with a new one.
                tracing::error!(%error, "the move failed; staying with the current parent");
                return Ok(());
            }
        };
        let Joined {
            identity, parent, ..
        } = *joined;
        let Some(mut config) = self.store.config()? else {
            return Ok(());
        };
        config.parent = Some(parent.clone());
        self.store.set_config(&config)?;
        self.drop_candidates()?;
        self.renewal
            .replace(&self.store, identity.clone(), self.core.renewal(), now)
            .await?;
        self.tell_children_if_issuer_changed();
        self.shared.make_mut().config = std::sync::Arc::new(config);
        if let Some(dial) = &self.parent_config {
            dial.send_replace(parent.clone());
        }
        self.core.re_parent(now, &parent.name);
        tracing::info!(parent = %parent.name, "moved: leaving the old parent");
        let generation = self.parent.as_ref().map(|parent| parent.generation);
        if let Some(generation) = generation {
            let events = self.shared.events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(LEAVE_TIMEOUT).await;
                let _ = events.send(Event::LeaveTimeout { generation }).await;
            });
        }
        Ok(())
    }

    /// This relay's issuer was signed again, or the chain above it
    /// changed (it moved, or a relay above it did): its children renew
    /// their certificates now, so that their chains, and a relay child's
    /// issuer chain, lead through the new one.
    pub(super) fn tell_children_if_issuer_changed(&mut self) {
        if self.renewal.take_issuer_changed() {
            self.core.chain_changed();
        }
    }

    /// The old parent did not close the link in time: drop it, so the
    /// uplink dials the new one.
    pub(super) fn leave_timeout(&mut self, generation: u64) {
        if self.is_current(generation) {
            tracing::warn!("the old parent kept the link open after this node left; dropping it");
            let _ = self.reconnect.try_send(());
        }
    }

    /// At the root: sign a move an admin ordered and send it down to its
    /// node.
    pub(super) fn order_move(&mut self, now: Now, moved: Move) -> Result<(), String> {
        let entry = moved.to_entry().map_err(|error| error.to_string())?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| "the root cannot sign the move".to_string())?;
        self.core.upsert_local(now, entry);
        // A move gives the node one parent: it no longer fails over.
        self.grant_parents(now, &moved.node, None)
    }

    /// At the root: sign the settled move and send it down.
    pub(super) fn settle(&mut self, now: Now, moved: Move) {
        if self.publish_signed(now, moved.to_entry()) {
            tracing::info!(node = %moved.node, to = %moved.to, "settled a move");
        }
    }

    /// At the root: signs `entry` and upserts it; whether it could. An
    /// entry that does not encode is logged.
    pub(super) fn publish_signed(
        &mut self,
        now: Now,
        entry: Result<relaymesh_protocol::SliceEntry, relaymesh_protocol::codec::CodecError>,
    ) -> bool {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::error!(%error, "cannot encode a slice entry");
                return false;
            }
        };
        match self.seal(now, entry) {
            Some(entry) => {
                self.core.upsert_local(now, entry);
                true
            }
            None => false,
        }
    }
}
