//! The core's side of its links to children: handshakes, deltas and
//! snapshots of the slice cut to each child's subtree, acknowledgements, and
//! the inventory children report.

use relaymesh_protocol::limits::{MAX_FRAME_LEN, MAX_ITEMS_PER_FRAME};
use relaymesh_protocol::message::{DownMessage, Hello, UpMessage, Welcome};
use std::collections::BTreeMap;
use std::time::Instant;

use relaymesh_protocol::{
    BundleId, ErrorCode, NodeRecord, Refusal, Role, SliceChange, SliceEntry, Target,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use relaymesh_topology::reach;

use super::slice::Changed;
use super::{Action, Core, LinkId, LinkStats, Now};
use relaymesh_protocol::limits::Limit;

/// What the core knows about one connected child.
#[derive(Debug)]
pub(crate) struct ChildLink {
    name: String,
    /// The revision up to which changes were sent.
    sent: u64,
    /// The revision the child acknowledged as durable.
    acked: u64,
}

impl ChildLink {
    /// The revision up to which changes were sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Revisions sent and not yet acknowledged. A child is sent only the
    /// changes that concern it, so one that acknowledged all it was sent
    /// is current although its revision is behind the head.
    fn lag(&self) -> u64 {
        self.sent.saturating_sub(self.acked)
    }
}

/// The protocol version both sides speak, if any.
pub(crate) fn negotiate(hello: &Hello) -> Option<u16> {
    let version = hello.max_version.min(PROTOCOL_VERSION);
    (version >= hello.min_version.max(MIN_PROTOCOL_VERSION)).then_some(version)
}

impl Core {
    /// A child with a verified certificate for `name` and `role` opened its
    /// control stream with `hello`. On success the core answers with a
    /// welcome and the child's slice; on refusal the daemon sends the refusal
    /// and closes the connection.
    pub fn handle_child_connected(
        &mut self,
        now: Now,
        link: LinkId,
        name: &str,
        role: Role,
        hello: Hello,
    ) -> Result<(), Refusal> {
        if !matches!(role, Role::Relay | Role::Agent) {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("a {role} certificate cannot open a child link"),
            ));
        }
        let Some(version) = negotiate(&hello) else {
            return Err(Refusal::new(
                ErrorCode::UnsupportedVersion,
                format!(
                    "child speaks protocol versions {}..={}, this relay {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}",
                    hello.min_version, hello.max_version
                ),
            ));
        };
        if let Some(old) = self.links_by_name.remove(name) {
            self.relink_child_status(name);
            self.children.remove(&old);
            self.queries_link_lost(now, old, name);
            self.actions.push_back(Action::CloseChild {
                link: old,
                refusal: Refusal::new(ErrorCode::Unavailable, "replaced by a newer connection"),
            });
        }
        let record = NodeRecord {
            name: name.to_string(),
            role,
            parent: Some(self.name.clone()),
            labels: Default::default(),
            addresses: Vec::new(),
            version: String::new(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        };
        let mut mutations = Vec::new();
        let is_new = self
            .inventory
            .child_connected(record, now.unix_ms, &mut mutations);
        self.persist(mutations);
        self.found(now, name);
        if self.inventory.take_aggregates_changed() {
            self.schedule_recut(now);
        }
        tracing::info!(child = name, %role, link, is_new, "child connected");
        self.children.insert(
            link,
            ChildLink {
                name: name.to_string(),
                sent: 0,
                acked: 0,
            },
        );
        self.links_by_name.insert(name.to_string(), link);
        self.relink_child_status(name);
        let mut ancestors = self.ancestors.clone();
        ancestors.push(self.name.clone());
        self.send_down(
            link,
            DownMessage::Welcome(Welcome {
                version,
                parent: self.name.clone(),
                epoch: self.epoch,
                ancestors,
            }),
        );
        let resume = hello.resume.filter(|resume| resume.epoch == self.epoch);
        match resume
            .and_then(|resume| Some((resume.revision, self.slice.keys_since(resume.revision)?)))
        {
            Some((base, keys)) => {
                // A placement cut anew while the child was away is in the
                // log too (`Slice::touch`): a child that acknowledged the
                // head gets an empty delta, its "up to date".
                let changes: Vec<SliceChange> =
                    keys.iter().map(|key| self.change_for(name, key)).collect();
                if let Some(child) = self.children.get_mut(&link) {
                    child.acked = base;
                }
                self.send_delta(link, base, changes);
            }
            None => self.send_snapshot(link),
        }
        self.schedule_inventory_flush(now);
        Ok(())
    }

    /// A message arrived on a child's control stream.
    pub fn handle_child_message(&mut self, now: Now, link: LinkId, message: UpMessage) {
        let Some(child) = self.children.get_mut(&link) else {
            return;
        };
        let name = child.name.clone();
        match message {
            UpMessage::Ack { revision } => {
                if revision > child.sent {
                    tracing::warn!(child = %name, revision, sent = child.sent, "child acknowledged a revision it was never sent");
                    return;
                }
                child.acked = child.acked.max(revision);
                let (acked, lag) = (child.acked, child.lag());
                self.inventory.child_measured(&name, |status| {
                    status.acked_revision = acked;
                    status.revision_lag = lag;
                });
            }
            UpMessage::Inventory(update) => {
                let before = self.relevant_keys(&name);
                let mut mutations = Vec::new();
                let outcome = self
                    .inventory
                    .apply_from_child(&name, update, &mut mutations);
                self.persist(mutations);
                if !outcome.refused.is_empty() {
                    tracing::warn!(child = %name, refused = ?outcome.refused, "child reported nodes outside its subtree");
                }
                if outcome.over_limit > 0 {
                    tracing::warn!(
                        child = %name,
                        refused = outcome.over_limit,
                        "refused inventory records from a child over its limit of records"
                    );
                    self.count_limit_refusals(
                        now,
                        Limit::InventoryRecordsPerChild,
                        outcome.over_limit,
                    );
                }
                // A node that appeared or left can change which entries the
                // child's subtree needs; a snapshot brings it up to date.
                if outcome.membership_changed && self.relevant_keys(&name) != before {
                    self.send_snapshot(link);
                }
                self.snapshot_admitted_claims();
                self.admit_orphaned_claims(now);
                if self.inventory.take_aggregates_changed() {
                    self.schedule_recut(now);
                }
                self.schedule_inventory_flush(now);
            }
            UpMessage::Ping { nonce } => self.send_down(link, DownMessage::Pong { nonce }),
            UpMessage::Status(update) => self.child_status(now, &name, update),
            UpMessage::Answer { id, answer } => self.child_answered(now, link, id, answer),
            UpMessage::Leaving { to } => self.child_leaving(now, &name, &to),
        }
    }

    /// A child's connection ended.
    pub fn handle_child_disconnected(&mut self, now: Now, link: LinkId) {
        let Some(child) = self.children.remove(&link) else {
            return;
        };
        if self.links_by_name.get(&child.name) == Some(&link) {
            self.links_by_name.remove(&child.name);
            self.relink_child_status(&child.name);
        }
        tracing::info!(child = %child.name, link, "child disconnected");
        self.queries_link_lost(now, link, &child.name);
        self.status_link_changed(now);
        let mut mutations = Vec::new();
        self.inventory
            .child_disconnected(&child.name, now.unix_ms, &mut mutations);
        self.persist(mutations);
        self.schedule_inventory_flush(now);
        self.forget_if_moving_away(now, &child.name);
        self.forget_if_reparented(now, &child.name);
        self.admit_orphaned_claims(now);
        self.schedule_lost_check(now);
    }

    /// The transport measured a child's link. The measurement stays here
    /// (see [`Core::nodes`]); nothing goes up for it.
    pub fn handle_link_stats(&mut self, _now: Now, link: LinkId, stats: LinkStats) {
        let Some(child) = self.children.get(&link) else {
            return;
        };
        let lag = child.lag();
        self.inventory.child_measured(&child.name, |status| {
            status.rtt_micros = stats.rtt.as_micros() as u64;
            status.bytes_sent = stats.bytes_sent;
            status.bytes_received = stats.bytes_received;
            status.revision_lag = lag;
        });
    }

    /// Whether `child` may fetch bundle `id`: only bundles of entries its
    /// subtree receives, so no child reads another subtree's workloads.
    pub fn may_serve_bundle(&self, child: &str, id: &BundleId) -> bool {
        self.slice
            .entries()
            .any(|entry| entry.bundles.contains(id) && self.entry_for_child(entry, child).is_some())
    }

    pub(super) fn send_changes_to_children(&mut self, now: Instant, changed: &[Changed]) {
        // Placement entries are decided again first; `before` holds what
        // each child had of them.
        let mut before: BTreeMap<String, super::cut::Cut> = BTreeMap::new();
        let mut digests = Vec::new();
        for change in changed {
            let was_placement = change
                .before
                .as_ref()
                .is_some_and(|entry| matches!(entry.target, Target::Placement(_)));
            let is_placement = self
                .slice
                .entry(&change.key)
                .is_some_and(|entry| matches!(entry.target, Target::Placement(_)));
            if was_placement || is_placement {
                // Logged already: the entry itself changed at the head.
                let (cut, _) = self.recut(now, &change.key, &mut digests);
                before.insert(change.key.clone(), cut);
            }
        }
        self.persist(digests);
        let links: Vec<(LinkId, String)> = self
            .children
            .iter()
            .map(|(link, child)| (*link, child.name.clone()))
            .collect();
        for (link, name) in links {
            let changes = changed
                .iter()
                .filter_map(|change| {
                    let now_relevant = self
                        .slice
                        .entry(&change.key)
                        .and_then(|entry| self.entry_for_child(entry, &name));
                    match now_relevant {
                        Some(entry) => Some(SliceChange::Upsert(entry)),
                        None => {
                            let was_relevant = match before.get(&change.key) {
                                Some(cut) => cut.contains_key(&name),
                                None => change
                                    .before
                                    .as_ref()
                                    .is_some_and(|entry| self.concerns(entry, &name)),
                            };
                            was_relevant.then(|| SliceChange::Remove(change.key.clone()))
                        }
                    }
                })
                .collect::<Vec<_>>();
            let Some(base) = self.children.get(&link).map(|child| child.sent) else {
                continue;
            };
            // A change that does not concern the child is not sent: an
            // empty delta on every change made each change cost every
            // child in the tree a message, a store write and an
            // acknowledgement (issue 35's storm profile). Only a child whose
            // position would leave the log is moved on, so that it resumes
            // with a delta (`Slice::keeps`).
            if changes.is_empty() && self.slice.keeps(base) {
                continue;
            }
            self.send_delta(link, base, changes);
        }
    }

    /// Sends a snapshot to every child that got a node another child held
    /// (a move): the entries for that node now go its way.
    pub(super) fn snapshot_admitted_claims(&mut self) {
        for child in self.inventory.take_admitted_claims() {
            if let Some(&link) = self.links_by_name.get(&child) {
                self.send_snapshot(link);
            }
        }
    }

    pub(super) fn concerns(&self, entry: &SliceEntry, child: &str) -> bool {
        reach(
            &entry.target,
            &self.name,
            &self.ancestors,
            self.inventory.index(),
        )
        .includes(child)
    }

    fn relevant_keys(&self, child: &str) -> Vec<String> {
        self.slice
            .entries()
            .filter(|entry| !matches!(entry.target, Target::Placement(_)))
            .filter(|entry| self.concerns(entry, child))
            .map(|entry| entry.key.clone())
            .collect()
    }

    /// What a child must be told about `key`: the entry as the child must
    /// receive it (a placement cut to its share, see
    /// [`Core::entry_for_child`]) if it concerns the child, otherwise its
    /// removal (harmless if the child never had it).
    fn change_for(&self, child: &str, key: &str) -> SliceChange {
        match self
            .slice
            .entry(key)
            .and_then(|entry| self.entry_for_child(entry, child))
        {
            Some(entry) => SliceChange::Upsert(entry),
            None => SliceChange::Remove(key.to_string()),
        }
    }

    /// Sends `changes` from `base` to the head, in frames that respect the
    /// limits; only the last frame advances the child's revision, so a child
    /// that dies midway resumes from `base` and gets them all again.
    pub(super) fn send_delta(&mut self, link: LinkId, base: u64, changes: Vec<SliceChange>) {
        let head = self.slice.head();
        let pieces = split(changes, |change| match change {
            SliceChange::Upsert(entry) => entry_size(entry),
            SliceChange::Remove(key) => key.len(),
        });
        let count = pieces.len();
        for (index, changes) in pieces.into_iter().enumerate() {
            let revision = if index + 1 == count { head } else { base };
            self.send_down(
                link,
                DownMessage::Delta {
                    base,
                    revision,
                    changes,
                },
            );
        }
        if let Some(child) = self.children.get_mut(&link) {
            child.sent = head;
        }
    }

    fn send_snapshot(&mut self, link: LinkId) {
        let Some(name) = self.children.get(&link).map(|child| child.name.clone()) else {
            return;
        };
        let entries: Vec<SliceEntry> = self
            .slice
            .entries()
            .filter_map(|entry| self.entry_for_child(entry, &name))
            .collect();
        tracing::debug!(child = %name, entries = entries.len(), "sending snapshot");
        let head = self.slice.head();
        let pieces = split(entries, entry_size);
        let count = pieces.len();
        for (index, entries) in pieces.into_iter().enumerate() {
            self.send_down(
                link,
                DownMessage::Snapshot {
                    revision: head,
                    entries,
                    first: index == 0,
                    last: index + 1 == count,
                },
            );
        }
        if let Some(child) = self.children.get_mut(&link) {
            child.sent = head;
        }
    }

    pub(super) fn send_down(&mut self, link: LinkId, message: DownMessage) {
        self.actions.push_back(Action::SendDown { link, message });
    }
}

fn entry_size(entry: &SliceEntry) -> usize {
    entry.key.len() + entry.body.len() + 32 * entry.bundles.len() + 64
}

/// Splits items into frames of at most [`MAX_ITEMS_PER_FRAME`] items and
/// about half a frame's bytes; always at least one (possibly empty) piece.
pub(crate) fn split<T>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let budget = MAX_FRAME_LEN / 2;
    let mut pieces = vec![Vec::new()];
    let mut bytes = 0;
    for item in items {
        let item_bytes = size(&item);
        let full = pieces.last().is_some_and(|piece| {
            !piece.is_empty() && (piece.len() >= MAX_ITEMS_PER_FRAME || bytes + item_bytes > budget)
        });
        if full {
            pieces.push(Vec::new());
            bytes = 0;
        }
        bytes += item_bytes;
        if let Some(piece) = pieces.last_mut() {
            piece.push(item);
        }
    }
    pieces
}
