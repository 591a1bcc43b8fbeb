//! The fake daemon: what each [`Action`] a core returns does in a
//! simulation, in the order the core returned them.

use relaymesh_protocol::message::{DownMessage, UpMessage};
use relaymesh_protocol::{BundleId, InventoryUpdate};

use super::{NodeId, Simulation};
use crate::{Action, LinkId};

impl Simulation {
    /// Executes one of node `id`'s actions.
    pub(super) fn execute(&mut self, id: NodeId, action: Action) {
        match action {
            Action::Persist(mutations) => {
                let keep = self.config.keep_state;
                let node = &mut self.nodes[id];
                node.traffic.persist_batches += 1;
                node.traffic.mutations += mutations.len() as u64;
                if keep {
                    for mutation in &mutations {
                        node.persisted.apply(mutation);
                    }
                }
            }
            Action::SendUp(message) => self.send_up(id, message),
            Action::SendDown { link, message } => self.send_down(id, link, message),
            Action::CloseChild { link, .. } => {
                if let Some(child) = self.child_on(id, link) {
                    self.disconnect_node(child);
                }
            }
            Action::ReconnectParent => {
                self.disconnect_node(id);
                // A refusal leaves the node disconnected, as a daemon whose
                // dial is refused stays until it retries.
                let _ = self.connect_node(id);
            }
            Action::FetchBundle(bundle) if self.hold_fetches => {
                let name = self.nodes[id].name.clone();
                self.held_fetches.push((name, bundle));
            }
            Action::FetchBundle(bundle) => self.fetch(id, bundle),
            Action::DropBundle(bundle) => {
                self.nodes[id].bundles.retain(|(held, _)| *held != bundle);
            }
            Action::Revoked(revocation) => self.nodes[id].revocations.push(revocation),
            // The simulation has no certificates: a renewal is counted,
            // asked and answered, and nothing is scheduled after it (a
            // timer would keep the tree from going quiet).
            Action::RenewCertificate { .. } => {
                let node = &mut self.nodes[id];
                node.renewals += 1;
                node.core.renewal().asked();
                node.core.renewal().answered();
            }
            Action::MeshTrust(_) => {}
            Action::Answered { query, answer } => {
                self.nodes[id].answers.insert(query, answer);
            }
            Action::Asked {
                id: query,
                query: asked,
            } => {
                self.nodes[id].asked.push((query, asked));
            }
            Action::Move(moved) => self.start_move(id, &moved.to),
            Action::Settle(moved) => self.sign_at(id, moved.to_entry()),
            Action::SettleParents(grant) => self.sign_at(id, grant.to_entry()),
        }
    }

    /// Signs `entry` as the root's daemon does and upserts it at node `id`
    /// (the root).
    fn sign_at(
        &mut self,
        id: NodeId,
        entry: Result<relaymesh_protocol::SliceEntry, relaymesh_protocol::codec::CodecError>,
    ) {
        let now = self.now();
        if let Err(error) = entry
            .map_err(|error| error.to_string())
            .and_then(|entry| self.sign(entry).map_err(|error| error.to_string()))
            .map(|entry| self.nodes[id].core.upsert_local(now, entry))
        {
            tracing::error!(%error, "cannot sign a root decision");
        }
        self.mark_ready(id);
    }

    /// Delivers a message to the parent, on the node's current link.
    fn send_up(&mut self, id: NodeId, message: UpMessage) {
        let (Some(parent), Some(link)) = (self.nodes[id].parent, self.nodes[id].link) else {
            return; // no link: the message is lost with it
        };
        let now = self.now();
        self.nodes[id].traffic.messages_to_parent += 1;
        let status_bytes = status_bytes(&message);
        self.nodes[id].traffic.status_bytes_to_parent += status_bytes;
        let parent_node = &mut self.nodes[parent];
        parent_node.traffic.status_bytes_from_children += status_bytes;
        parent_node.traffic.messages_from_children += 1;
        parent_node.traffic.inventory_records_from_children += inventory_records(&message);
        parent_node.traffic.events += 1;
        parent_node.core.handle_child_message(now, link, message);
        self.mark_ready(parent);
    }

    /// Delivers a message to the child on `link`, if that link is open.
    fn send_down(&mut self, id: NodeId, link: LinkId, mut message: DownMessage) {
        self.nodes[id].traffic.messages_to_children += 1;
        if let Some((_, alter)) = self.alteration.as_mut().filter(|(who, _)| *who == id) {
            alter(&mut message);
        }
        let Some(child) = self.child_on(id, link) else {
            return;
        };
        let now = self.now();
        let child_node = &mut self.nodes[child];
        child_node.traffic.messages_from_parent += 1;
        child_node.traffic.slice_changes_from_parent += match &message {
            DownMessage::Delta { changes, .. } => changes.len() as u64,
            DownMessage::Snapshot { entries, .. } => entries.len() as u64,
            _ => 0,
        };
        child_node.traffic.events += 1;
        child_node.core.handle_parent_message(now, message);
        self.mark_ready(child);
    }

    /// Fetches a bundle from the parent as the daemon's bundle stream does:
    /// the parent serves it only if its core allows, the child checks the
    /// bytes against the id, and the parent's transport reports the
    /// completed transfer.
    fn fetch(&mut self, id: NodeId, bundle: BundleId) {
        let now = self.now();
        let name = self.nodes[id].name.clone();
        let parent = self.nodes[id].parent;
        let bytes = parent
            .map(|parent| &self.nodes[parent])
            .filter(|parent| parent.core.may_serve_bundle(&name, &bundle))
            .and_then(|parent| parent.shared_bundle(&bundle));
        let served = bytes.as_ref().map(|bytes| bytes.len() as u64);
        let node = &mut self.nodes[id];
        node.traffic.events += 1;
        match bytes {
            Some(bytes) if bundle.matches(&bytes) => {
                node.traffic.bundles_fetched += 1;
                node.traffic.bundle_bytes_fetched += bytes.len() as u64;
                node.store_bundle(bundle, bytes);
                node.core.handle_bundle_stored(now, bundle);
            }
            _ => node.core.handle_bundle_failed(now, bundle),
        }
        self.mark_ready(id);
        if let (Some(len), Some(parent)) = (served, parent) {
            let parent_node = &mut self.nodes[parent];
            parent_node.traffic.bundles_served += 1;
            parent_node.traffic.events += 1;
            parent_node
                .core
                .handle_bundle_served(now, &name, bundle, len);
            self.mark_ready(parent);
        }
    }

    /// The child of `parent` on `link`, while that link is open.
    fn child_on(&self, parent: NodeId, link: LinkId) -> Option<NodeId> {
        self.by_link
            .get(&link)
            .copied()
            .filter(|child| self.nodes[*child].parent == Some(parent))
    }
}

/// How many inventory records `message` carries.
/// The encoded size of a status message (what it costs on the wire, frame
/// header aside); 0 for other messages.
fn status_bytes(message: &UpMessage) -> u64 {
    match message {
        UpMessage::Status(_) => {
            relaymesh_protocol::codec::encode(message).map_or(0, |bytes| bytes.len() as u64)
        }
        _ => 0,
    }
}

fn inventory_records(message: &UpMessage) -> u64 {
    match message {
        UpMessage::Inventory(InventoryUpdate::Delta { upserts, removals }) => {
            (upserts.len() + removals.len()) as u64
        }
        UpMessage::Inventory(InventoryUpdate::Full { records, .. }) => records.len() as u64,
        _ => 0,
    }
}
