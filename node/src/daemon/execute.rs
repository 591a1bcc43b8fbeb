//! Carries out what the core asks for, in order: store writes (batched,
//! and flushed before an acknowledgement leaves), messages to the parent
//! and the children, bundle fetches and removals, renewals, moves and
//! answers.

use relaymesh_core::Action;
use relaymesh_protocol::message::UpMessage;

use super::{asked, now, Daemon, DaemonError};

impl Daemon {
    pub(super) async fn execute(&mut self) -> Result<(), DaemonError> {
        // Consecutive writes go to the store as one batch (in order, and
        // before any action after them: an acknowledgement flushes them).
        let mut writes = Vec::new();
        while let Some(action) = self.core.poll_action() {
            if !matches!(action, Action::Persist(_)) && !writes.is_empty() {
                self.store
                    .apply_off_runtime(std::mem::take(&mut writes))
                    .await?;
                self.dirty = true;
            }
            match action {
                Action::Persist(mutations) => writes.extend(mutations),
                Action::SendUp(message) => {
                    if matches!(message, UpMessage::Ack { .. }) && self.dirty {
                        // The durability contract: nothing is acknowledged
                        // before it would survive a crash.
                        self.store.flush_async().await?;
                        self.dirty = false;
                    }
                    let sender = self
                        .parent
                        .as_ref()
                        .and_then(|parent| parent.outgoing.as_ref());
                    if let Some(sender) = sender {
                        if let Some(metrics) = &mut self.metrics {
                            metrics.sent_up(&message);
                        }
                        if sender.try_send(message).is_err() {
                            tracing::warn!("parent link is backed up; reconnecting");
                            let _ = self.reconnect.try_send(());
                        }
                    }
                }
                Action::SendDown { link, message } => {
                    if self.dirty && self.store.mirrored() {
                        // A replicated root: a child may see nothing the
                        // next leader would not know (serials only grow,
                        // nothing is applied twice).
                        self.store.flush_async().await?;
                        self.dirty = false;
                    }
                    if let Some(child) = self.children.get(&link) {
                        if child.outgoing.try_send(Box::new(message)).is_err() {
                            tracing::warn!(link, "child link is backed up; closing it");
                            child.connection.close(1u32.into(), b"backed up");
                        }
                    }
                }
                Action::CloseChild { link, refusal } => {
                    self.close_child(link, &refusal);
                }
                Action::ReconnectParent => {
                    let _ = self.reconnect.try_send(());
                }
                Action::FetchBundle(id) => self.fetch_bundle(id),
                Action::DropBundle(id) => {
                    tracing::debug!(bundle = %id, "dropping unreferenced bundle");
                    // Awaited in order: a fetch of the same bundle the core
                    // asks for later starts after the removal.
                    self.store.remove_bundle_off_runtime(id).await?;
                }
                Action::Revoked(revocation) => self.revoked(&revocation),
                Action::RenewCertificate { refresh_server } => {
                    let parent = self.parent.as_ref().map(|parent| parent.connection.clone());
                    let events = self.shared.events.clone();
                    self.renewal
                        .due(
                            &self.store,
                            parent,
                            &events,
                            refresh_server,
                            self.core.renewal(),
                            now(),
                        )
                        .await?;
                }
                Action::MeshTrust(trust) => self.adopt_mesh_trust(now(), &trust).await?,
                Action::Answered { query, answer } => {
                    if let Some(reply) = self.queries.remove(&query) {
                        let _ = reply.send(answer);
                    }
                }
                Action::Move(moved) => self.start_move(moved),
                Action::Settle(moved) => self.settle(now(), moved),
                Action::SettleParents(grant) => self.settle_parents(now(), grant),
                Action::Asked { id, query } => {
                    let answerer = self.hooks.as_ref().and_then(|hooks| hooks.queries.as_ref());
                    let name = self.core.name().to_string();
                    let handed = asked::hand_over(&name, answerer, &self.shared.events, id, query);
                    if let asked::Handed::Answer(answer) = handed {
                        self.core.handle_local_answer(now(), id, answer);
                    }
                }
            }
        }
        if !writes.is_empty() {
            self.store.apply_off_runtime(writes).await?;
            self.dirty = true;
        }
        Ok(())
    }
}
