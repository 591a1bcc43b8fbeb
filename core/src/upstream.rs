//! The core's side of its link to its parent: the hello it opens with,
//! applying deltas and snapshots durably before acknowledging them, and
//! reporting the subtree's inventory.

use std::collections::BTreeSet;

use relaymesh_protocol::message::{DownMessage, Hello, Resume, UpMessage, Welcome};
use relaymesh_protocol::{
    InventoryUpdate, SliceChange, SliceEntry, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};

use super::downstream::split;
use super::{Action, Core, Now};
use crate::state::Mutation;

#[derive(Debug)]
pub(crate) struct Upstream {
    has_parent: bool,
    /// The parent's epoch, once it welcomed this relay on the current link.
    welcomed: Option<u64>,
    /// Where this relay stands in the parent's history (durable).
    position: Option<Resume>,
    /// Pieces of a snapshot until its last piece arrives.
    snapshot: Option<Vec<SliceEntry>>,
    /// Removals a new parent sent while a move settles, not applied (see
    /// [`Core::re_parent`]); a key the parent sends again leaves the set.
    pub deferred_removals: BTreeSet<String>,
}

impl Upstream {
    pub fn new(has_parent: bool, position: Option<Resume>) -> Self {
        Self {
            has_parent,
            welcomed: None,
            position,
            snapshot: None,
            deferred_removals: BTreeSet::new(),
        }
    }

    /// Forgets where this node stood with its parent: the next link, to a
    /// new parent, starts with a snapshot of that parent's history.
    pub fn forget_position(&mut self) {
        self.position = None;
        self.welcomed = None;
    }

    pub fn position(&self) -> Option<Resume> {
        self.position
    }

    pub fn connected(&self) -> bool {
        self.welcomed.is_some()
    }

    pub fn has_parent(&self) -> bool {
        self.has_parent
    }
}

impl Core {
    /// The hello to open the control stream to the parent with.
    pub fn hello(&self) -> Hello {
        Hello {
            min_version: MIN_PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            resume: self.resume_point(),
        }
    }

    /// Whether the parent has welcomed this relay on the current link.
    pub fn parent_connected(&self) -> bool {
        self.upstream.connected()
    }

    /// A message arrived from the parent.
    pub fn handle_parent_message(&mut self, now: Now, message: DownMessage) {
        match message {
            DownMessage::Welcome(welcome) => self.welcomed(now, welcome),
            DownMessage::Delta {
                base,
                revision,
                changes,
            } => self.apply_delta(now, base, revision, changes),
            DownMessage::Snapshot {
                revision,
                entries,
                first,
                last,
            } => self.apply_snapshot_piece(now, revision, entries, first, last),
            DownMessage::Pong { .. } => {}
            DownMessage::Refused(refusal) => {
                tracing::error!(%refusal, "parent refused this relay");
            }
            DownMessage::Query { id, node, query } => self.parent_query(now, id, node, query),
            DownMessage::Ancestors(ancestors) => {
                // Sent when the chain above changed: renew through it
                // (a changed list asks for that itself).
                if ancestors == self.ancestors {
                    self.renew_through_ancestors(now);
                }
                self.set_ancestors(now, ancestors);
            }
        }
    }

    /// The relays above this node are now `ancestors` (root first, parent
    /// last): after a relay above moved with its subtree, or after this
    /// node did. Stored and passed on to the children, whose links stay up
    /// (the entries that name one of them concern the whole subtree); the
    /// certificate is renewed at once unless this is the first list, so
    /// that its chain, and a relay's issuer chain (which the nodes joining
    /// below it check), lead through them.
    fn set_ancestors(&mut self, now: Now, ancestors: Vec<String>) {
        if ancestors == self.ancestors {
            return;
        }
        let first = self.ancestors.is_empty();
        tracing::info!(?ancestors, "the relays above this node changed");
        self.ancestors = ancestors.clone();
        self.persist(vec![Mutation::SetAncestors(ancestors)]);
        self.chain_changed();
        if !first {
            self.renew_through_ancestors(now);
        }
    }

    fn renew_through_ancestors(&mut self, now: Now) {
        tracing::info!("the relays above this node changed: renewing its certificate now");
        self.renewal.renew_now(now);
    }

    /// This relay's issuer was signed again or the chain above it changed
    /// (the daemon says so once it holds the new certificates), or the
    /// relays above it did: tells every child, which renews its
    /// certificate through the new chain and stores the list of relays
    /// above it.
    pub fn chain_changed(&mut self) {
        let mut below = self.ancestors.clone();
        below.push(self.name.clone());
        let links: Vec<_> = self.children.keys().copied().collect();
        for link in links {
            self.send_down(link, DownMessage::Ancestors(below.clone()));
        }
    }

    /// The link to the parent ended.
    pub fn handle_parent_disconnected(&mut self, now: Now) {
        if self.upstream.welcomed.take().is_some() {
            tracing::info!("parent link lost");
        }
        self.upstream.snapshot = None;
        self.queries_parent_lost();
        self.parent_link_lost(now);
    }

    fn welcomed(&mut self, now: Now, welcome: Welcome) {
        tracing::info!(parent = %welcome.parent, version = welcome.version, "parent welcomed this relay");
        self.upstream.welcomed = Some(welcome.epoch);
        self.set_ancestors(now, welcome.ancestors);
        let records = self.inventory.full();
        let pieces = split(records, |record| 128 + record.labels.len() * 64);
        let count = pieces.len();
        for (index, records) in pieces.into_iter().enumerate() {
            self.actions.push_back(Action::SendUp(UpMessage::Inventory(
                InventoryUpdate::Full {
                    records,
                    first: index == 0,
                    last: index + 1 == count,
                },
            )));
        }
        self.inventory_flush_at = None;
        self.flush_status(true);
        self.parent_link_ready(now);
    }

    fn apply_delta(&mut self, now: Now, base: u64, revision: u64, changes: Vec<SliceChange>) {
        let Some(epoch) = self.upstream.welcomed else {
            return;
        };
        let expected = Some(Resume {
            epoch,
            revision: base,
        });
        if self.upstream.position != expected {
            tracing::warn!(
                base,
                position = ?self.upstream.position,
                "delta does not follow this relay's copy; asking for a snapshot"
            );
            self.resync_with_parent();
            return;
        }
        self.apply_from_parent(now, epoch, revision, changes);
    }

    /// Drops the link to the parent and forgets where this node stood in
    /// its history, so the next link starts with a snapshot.
    pub(super) fn resync_with_parent(&mut self) {
        self.upstream.position = None;
        self.upstream.welcomed = None;
        self.persist(vec![Mutation::ClearParentPosition]);
        self.actions.push_back(Action::ReconnectParent);
    }

    fn apply_snapshot_piece(
        &mut self,
        now: Now,
        revision: u64,
        entries: Vec<SliceEntry>,
        first: bool,
        last: bool,
    ) {
        let Some(epoch) = self.upstream.welcomed else {
            return;
        };
        if first {
            self.upstream.snapshot = Some(Vec::new());
        }
        let Some(pieces) = self.upstream.snapshot.as_mut() else {
            return; // a piece without its first: ignore until the next snapshot
        };
        pieces.extend(entries);
        if !last {
            return;
        }
        let entries = self.upstream.snapshot.take().unwrap_or_default();
        let keep: BTreeSet<&str> = entries.iter().map(|entry| entry.key.as_str()).collect();
        let mut changes: Vec<SliceChange> = self
            .slice
            .entries()
            .filter(|entry| !keep.contains(entry.key.as_str()))
            .map(|entry| SliceChange::Remove(entry.key.clone()))
            .collect();
        changes.extend(entries.into_iter().map(SliceChange::Upsert));
        tracing::debug!(
            revision,
            changes = changes.len(),
            "applying snapshot from parent"
        );
        self.apply_from_parent(now, epoch, revision, changes);
    }

    /// Applies changes and the new parent position in one durable batch,
    /// then acknowledges: the ack leaves only after the batch is durable.
    fn apply_from_parent(
        &mut self,
        now: Now,
        epoch: u64,
        revision: u64,
        changes: Vec<SliceChange>,
    ) {
        let mut changes = self.keep_signed(now, changes);
        if self.statuses.held {
            // A new parent's first snapshot can come before it has cut its
            // placements for this node: removing them would have the agent
            // prune what it runs. They wait until the move settles.
            let deferred = &mut self.upstream.deferred_removals;
            changes.retain(|change| match change {
                SliceChange::Remove(key) => {
                    deferred.insert(key.clone());
                    false
                }
                SliceChange::Upsert(entry) => {
                    deferred.remove(&entry.key);
                    true
                }
            });
        }
        let position = Resume { epoch, revision };
        let advanced = self.upstream.position != Some(position);
        self.upstream.position = Some(position);
        self.change_slice(now, changes, vec![Mutation::SetParentPosition(position)]);
        if advanced {
            self.actions
                .push_back(Action::SendUp(UpMessage::Ack { revision }));
        }
    }

    /// Drops the upserts that do not carry the root's signature, or that
    /// are older than the version held, and raises an integrity alarm for
    /// each: logged, and counted in this node's own record, which goes up.
    /// The rest of the changes apply; a refused entry keeps its old version.
    fn keep_signed(&mut self, now: Now, changes: Vec<SliceChange>) -> Vec<SliceChange> {
        let mut refused = 0;
        // During a rotation of the root's key, the old one and the new one.
        let keys = self.root_keys();
        let kept = changes
            .into_iter()
            .filter(|change| {
                let SliceChange::Upsert(entry) = change else {
                    return true;
                };
                // Signed by one of the keys, or refused with the first
                // key's reason.
                let refusal = keys
                    .iter()
                    .map(|key| crate::seal::verify(key, entry))
                    .try_fold(None, |first, verified| match verified {
                        Ok(()) => Err(()),
                        Err(error) => Ok(first.or(Some(error))),
                    });
                if let Ok(first) = refusal {
                    let error = first.map_or_else(|| "no key to verify it".to_string(), |e| e.to_string());
                    tracing::error!(key = %entry.key, %error, "integrity alarm: refused a slice entry from the parent");
                    refused += 1;
                    return false;
                }
                let held = self.slice.entry(&entry.key).map(|held| held.serial);
                if held.is_some_and(|held| held > entry.serial) {
                    tracing::error!(key = %entry.key, serial = entry.serial, ?held, "integrity alarm: the parent sent an older version of a slice entry");
                    refused += 1;
                    return false;
                }
                true
            })
            .collect();
        if refused > 0 {
            self.inventory.update_own(|own| {
                own.refused_entries = own.refused_entries.saturating_add(refused);
            });
            self.schedule_inventory_flush(now);
        }
        kept
    }

    pub(super) fn flush_inventory(&mut self, now: Now) {
        // Placements are cut for new children before they are reported up:
        // a moved node's status counts above only once its new parent has
        // sent it its placements (see `moves`).
        if self.cuts.recut_at.take().is_some() {
            self.recut_all(now.instant);
        }
        if !self.upstream.has_parent() {
            // The root reports to no one; it serves its inventory instead.
            if self.inventory.take_pending().is_some() {
                self.settle_moves();
                self.settle_parents();
            }
            self.flush_status(false);
            return;
        }
        if !self.upstream.connected() {
            return; // the full inventory sent on reconnect supersedes it
        }
        if let Some(update) = self.inventory.take_pending() {
            self.actions
                .push_back(Action::SendUp(UpMessage::Inventory(update)));
        }
        self.flush_status(false);
    }
}
