//! relaymesh's relay core: the decisions every relay and edge agent makes,
//! as a sans-IO state machine (as quinn-proto is to quinn).
//!
//! A [`Core`] holds a node's slice of the tree's state: the slice entries
//! its subtree needs, with their revisions and the log deltas are cut from;
//! each placement cut per child; the inventory of its subtree; the status
//! its children report, merged; and which bundles it holds, fetches and
//! served. The daemon feeds it events (a child connected, a message arrived,
//! a bundle was stored, time passed) and executes the [`Action`]s it
//! returns, in order: persist these mutations, send this message, fetch that
//! bundle. The same core runs in the `relay` daemon, in the `edge-agent`
//! (a leaf with the agent role) and, many at once, in [`simulation`].
//!
//! Ordering is the durability contract: an [`Action::Persist`] comes before
//! any action that depends on it, and the daemon makes it durable before it
//! sends an acknowledgement up.
//!
//! Deliberately not here: sockets, files, sled, tokio and clocks. The core
//! never blocks, never reads a clock (it is handed [`Now`]) and never draws
//! random numbers; what it must remember across a restart it hands out as
//! [`state::Mutation`]s and gets back as a [`state::Persisted`]. Wire types
//! live in `relaymesh-protocol`, the pure per-relay decisions it calls
//! (reach, placement split and cut, status merge) in `relaymesh-topology`.
//!
//! Where to start reading: [`Core`] and [`Action`] below, then
//! [`Core::handle_child_connected`] and [`Core::handle_parent_message`] for
//! the two sides of a link; [`state`] for what is durable; [`seal`] for the
//! root's signature every entry carries; [`simulation`] for a whole tree of
//! cores on an in-memory network with virtual time.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod renewal;
pub mod rollouts;
pub mod seal;
pub mod simulation;
pub mod state;

mod bundles;
mod cut;
mod downstream;
mod drains;
mod handover;
mod inventory;
mod labels;
mod lost;
mod moves;
mod parents;
mod placements;
mod queries;
mod report;
mod revocations;
mod root_handover;
mod slice;
mod sorted;
mod status;
mod trust;
mod upstream;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use relaymesh_protocol::limits::Limit;
use relaymesh_protocol::message::{DownMessage, Resume, UpMessage};
use relaymesh_protocol::{BundleId, NodeRecord, Refusal, Role, SliceChange, SliceEntry};

use crate::state::{Mutation, Persisted};
use bundles::Bundles;
use downstream::ChildLink;
pub use drains::{DRAIN_SETTLE, DRAIN_TIMEOUT};
pub use handover::HANDOVER_TIMEOUT;
use inventory::Inventory;
pub use placements::ChildPart;
use placements::Cuts;
use queries::Queries;
pub use queries::{
    QueryId, MAX_CACHED_ANSWERS, MAX_CACHED_BYTES, MAX_PENDING_QUERIES, QUERY_TIMEOUT,
};
pub use report::PlacementReport;
use slice::Slice;
use status::Statuses;
pub use trust::{
    CHAIN_CA_LABEL, ISSUER_ROTATED_LABEL, SIGNED_BY_LABEL, TOKEN_KEYS_LABEL, TRUSTED_CAS_LABEL,
};
use upstream::Upstream;

/// Identifies one connection of a child, as the daemon numbers them.
pub type LinkId = u64;

/// How long inventory changes wait to be coalesced before going up.
pub const INVENTORY_COALESCE: Duration = Duration::from_millis(200);

/// How many slice revisions a relay keeps in its log; a child further behind
/// gets a snapshot.
pub const DEFAULT_LOG_KEEP: u64 = 10_000;

/// How many inventory records one child may have a relay hold (its own and
/// its subtree's): the fleet DESIGN.md aims at, since one child of the root
/// may legitimately carry all of it.
pub const DEFAULT_MAX_RECORDS_PER_CHILD: usize = 1_000_000;

/// How many placements one child may report status for. A child only has
/// status for placements it was sent, so this is far above any real slice.
pub const DEFAULT_MAX_STATUS_KEYS_PER_CHILD: usize = 100_000;

/// The current time, as the core sees it: a monotonic instant for timers and
/// wall-clock milliseconds for timestamps shown to people.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// For timers.
    pub instant: Instant,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

/// What the core is told at start-up.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// This relay's name.
    pub name: String,
    /// Relay, or agent for an edge agent (a leaf that runs the same core).
    pub role: Role,
    /// The parent's name, `None` at the root.
    pub parent: Option<String>,
    /// The node's labels (for an agent: its cluster's labels).
    pub labels: BTreeMap<String, String>,
    /// What the node's cluster can run (agents).
    pub capacity: BTreeMap<String, String>,
    /// Where children can dial this relay.
    pub addresses: Vec<String>,
    /// The software version, reported in the inventory.
    pub version: String,
    /// How many revisions the log keeps.
    pub log_keep: u64,
    /// The root's Ed25519 public key, which every slice entry from the
    /// parent must be signed with (the identity's token key).
    pub root_key: Vec<u8>,
    /// How many inventory records one child may have this relay hold; the
    /// excess is refused and counted (`inventory-records-per-child`).
    pub max_records_per_child: usize,
    /// How many placements one child may report status for; the excess is
    /// refused and counted (`status-keys-per-child`).
    pub max_status_keys_per_child: usize,
}

/// Something the daemon must do, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Apply these mutations to the store as one atomic batch.
    Persist(Vec<Mutation>),
    /// Send a message to the parent. An `Ack` may only leave once every
    /// earlier `Persist` is durable.
    SendUp(UpMessage),
    /// Send a message to a child.
    SendDown {
        /// The child's connection.
        link: LinkId,
        /// The message.
        message: DownMessage,
    },
    /// Tell a child why, then close its connection.
    CloseChild {
        /// The child's connection.
        link: LinkId,
        /// Why.
        refusal: Refusal,
    },
    /// The parent's stream no longer matches this relay's copy: drop the
    /// connection and dial again (the next hello asks for a snapshot).
    ReconnectParent,
    /// Fetch this bundle from the parent, verify it and store it, then call
    /// [`Core::handle_bundle_stored`] or [`Core::handle_bundle_failed`].
    FetchBundle(BundleId),
    /// Delete this bundle from the store: nothing references it any more.
    DropBundle(BundleId),
    /// The root revoked a node or a token. The core has already closed the
    /// link of a revoked child and forgotten its subtree; the daemon adds
    /// the revocation to the deny list its listener and admission check,
    /// and closes any other connection whose certificates it covers.
    Revoked(relaymesh_protocol::Revocation),
    /// The root decided which mesh CAs every node trusts and which key
    /// signs under the mesh now (a rotation of its mesh CA): trust those
    /// anchors on every link, have this node's certificate signed again if
    /// a mesh CA key other than the signer signed it, and say so with
    /// [`Core::set_certificate_labels`].
    MeshTrust(relaymesh_protocol::MeshTrust),
    /// Renew this node's certificate now (the core's [`renewal`] schedule
    /// says when): ask the parent, or sign it at the root, then tell
    /// [`Core::renewal`] what was done. `refresh_server`: a relay also
    /// signs itself a new server certificate.
    RenewCertificate {
        /// Sign the listener's server certificate anew too.
        refresh_server: bool,
    },
    /// The root moves this node to another parent: join `to` with the
    /// move's token, store the new identity and parent, then call
    /// [`Core::re_parent`] and dial the new parent.
    Move(relaymesh_protocol::Move),
    /// At the root: the inventory shows a moved node under its new parent.
    /// Sign this move (now [`relaymesh_protocol::MoveState::Settled`]) and
    /// upsert it, so the node reports its status again.
    Settle(relaymesh_protocol::Move),
    /// At the root: the inventory shows a node under another of its
    /// candidate parents than its grant names. Sign this grant (naming it)
    /// and upsert it, so the node reports its status again and the side it
    /// left forgets it.
    SettleParents(relaymesh_protocol::Parents),
    /// The answer to the daemon's [`Core::query`] with this id.
    Answered {
        /// The id [`Core::query`] returned.
        query: QueryId,
        /// The answer, or why there is none.
        answer: relaymesh_protocol::query::Answer,
    },
    /// A query about this node that only its daemon can answer (an agent
    /// reading its cluster). Answer it with [`Core::handle_local_answer`]
    /// and the same id, well within [`QUERY_TIMEOUT`]; after that the core
    /// has answered it as failed itself.
    Asked {
        /// The id to answer under.
        id: QueryId,
        /// What is asked.
        query: relaymesh_protocol::query::Query,
    },
}

/// Per-link statistics the transport measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Bytes sent on the connection.
    pub bytes_sent: u64,
    /// Bytes received on the connection.
    pub bytes_received: u64,
}

/// A relay's state machine.
#[derive(Debug)]
pub struct Core {
    name: String,
    epoch: u64,
    ancestors: Vec<String>,
    slice: Slice,
    inventory: Inventory,
    bundles: Bundles,
    upstream: Upstream,
    children: BTreeMap<LinkId, ChildLink>,
    links_by_name: BTreeMap<String, LinkId>,
    inventory_flush_at: Option<Instant>,
    cuts: Cuts,
    /// At the root: placements without a bound handing over.
    root_handovers: root_handover::RootHandovers,
    /// At the root: the drains under way.
    drains: drains::Drains,
    statuses: Statuses,
    lost: lost::Lost,
    queries: Queries,
    actions: VecDeque<Action>,
    root_key: Vec<u8>,
    /// The labels this node was given (its cluster's, for an agent); the
    /// root may change them (see `labels`).
    base_labels: BTreeMap<String, String>,
    /// The agent's reconciler says its cluster has no room left for what
    /// it is sent (its replica capacity: see `labels`).
    out_of_room: bool,
    /// The agent's reconciler says its cluster's API does not answer (see
    /// `labels`).
    cluster_unreachable: bool,
    /// What the daemon last said of this node's certificates (see
    /// `trust`), as labels: the mesh CA key its chain reaches, those it
    /// trusts, the key that signed it, and a relay's issuer key.
    certificate_labels: BTreeMap<String, String>,
    /// When this node renews its certificate.
    renewal: renewal::Renewal,
    /// At the root: each staged placement's rollout.
    rollouts: rollouts::Rollouts,
}

impl Core {
    /// A core restored from its store: `persisted` is what the store loaded
    /// and `held_bundles` the bundles it holds.
    pub fn new(
        config: CoreConfig,
        persisted: Persisted,
        held_bundles: BTreeSet<BundleId>,
        now: Now,
    ) -> Self {
        let own = NodeRecord {
            name: config.name.clone(),
            role: config.role,
            parent: config.parent.clone(),
            labels: config.labels.clone().into(),
            addresses: config.addresses.clone(),
            version: config.version.clone(),
            link: None,
            capacity: config.capacity.clone(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        };
        let mut core = Self {
            name: config.name.clone(),
            epoch: persisted.epoch,
            ancestors: persisted.ancestors.clone(),
            slice: Slice::restore(&persisted, config.log_keep),
            inventory: Inventory::restore(own, &persisted, config.max_records_per_child),
            bundles: Bundles::new(
                held_bundles,
                persisted.served.clone(),
                persisted.served_totals.clone(),
            ),
            upstream: Upstream::new(config.parent.is_some(), persisted.parent_position),
            children: BTreeMap::new(),
            links_by_name: BTreeMap::new(),
            inventory_flush_at: None,
            cuts: Cuts::restored(&persisted),
            root_handovers: root_handover::RootHandovers::default(),
            drains: drains::Drains::default(),
            statuses: Statuses::new(config.max_status_keys_per_child),
            lost: lost::Lost::default(),
            queries: Queries::default(),
            actions: VecDeque::new(),
            root_key: config.root_key.clone(),
            base_labels: config.labels.clone(),
            out_of_room: false,
            cluster_unreachable: false,
            certificate_labels: BTreeMap::new(),
            renewal: renewal::Renewal::default(),
            rollouts: rollouts::Rollouts::default(),
        };
        for (child, total) in core.bundles.served_totals().clone() {
            core.inventory
                .child_served(&child, total.times, total.bytes);
        }
        core.inventory.take_aggregates_changed();
        core.recut_all_quietly(now.instant);
        let mut mutations = Vec::new();
        core.inventory
            .disconnect_all_children(now.unix_ms, &mut mutations);
        core.persist(mutations);
        core.reconcile_bundles(now);
        core.restore_move();
        core.restore_parents();
        core.relabel();
        if config.parent.is_none() {
            // A move whose node arrived while the root was down.
            core.settle_moves();
            core.settle_parents();
        }
        core
    }

    /// This relay's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The relays from the root down to this node's parent, root first, as
    /// the parent last said.
    pub fn ancestors(&self) -> &[String] {
        &self.ancestors
    }

    /// The newest local revision of the slice.
    pub fn head(&self) -> u64 {
        self.slice.head()
    }

    /// The slice's entries.
    pub fn entries(&self) -> impl Iterator<Item = &SliceEntry> {
        self.slice.entries()
    }

    /// The slice's entries whose key starts with `prefix`.
    pub fn entries_with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a SliceEntry> + 'a {
        self.slice.entries_with_prefix(prefix)
    }

    /// A version of the entries under `prefix`: it changes whenever one of
    /// them does (their count and the newest revision among them).
    pub fn prefix_version(&self, prefix: &str) -> (usize, u64) {
        self.slice.prefix_version(prefix)
    }

    /// The slice's entry under `key`, if any.
    pub fn entry(&self, key: &str) -> Option<&SliceEntry> {
        self.slice.entry(key)
    }

    /// This node's own inventory record.
    pub fn own_record(&self) -> &NodeRecord {
        self.inventory.own()
    }

    /// Every node this relay knows: itself and its subtree. The links of
    /// its direct children carry what this relay measured of them (RTT,
    /// bytes, acknowledged revision, lag); deeper nodes' links carry only
    /// what their parents report up (connectivity, bundle transfers), their
    /// measurements being zero: not reported, since they stay with the
    /// parent that measured them.
    pub fn nodes(&self) -> Vec<NodeRecord> {
        self.inventory.all_measured().collect()
    }

    /// Every node this relay knows, as reported up the tree: [`Core::nodes`]
    /// without the measurements of the direct children's links, which are
    /// [`Core::link_measurements`]. Borrowed, for a driver that publishes a
    /// copy only when [`Core::inventory_version`] moved.
    pub fn inventory_records(&self) -> impl Iterator<Item = &NodeRecord> {
        self.inventory.all()
    }

    /// [`Core::inventory_records`], shared: a copy of them all costs a
    /// pointer per record (a record changes by copy on write).
    pub fn inventory_records_shared(&self) -> impl Iterator<Item = &std::sync::Arc<NodeRecord>> {
        self.inventory.all_shared()
    }

    /// The names among [`Core::inventory_records`] that changed or went
    /// since the last call: a driver keeps its copy current at O(changes)
    /// with [`Core::inventory_record_shared`]. `None` the first time: copy
    /// them all then.
    pub fn take_inventory_changes(&mut self) -> Option<std::collections::BTreeSet<String>> {
        self.inventory.take_touched()
    }

    /// The children whose [`Core::link_measurements`] changed or went
    /// since the last call; `None` the first time (copy them all then).
    pub fn take_link_measurement_changes(&mut self) -> Option<std::collections::BTreeSet<String>> {
        self.inventory.take_measured_touched()
    }

    /// One of [`Core::inventory_records`] by name, shared.
    pub fn inventory_record_shared(&self, name: &str) -> Option<&std::sync::Arc<NodeRecord>> {
        self.inventory.record_shared(name)
    }

    /// What this relay measured of its direct children's links, by child:
    /// RTT, bytes, acknowledged revision and lag (its `connected` and
    /// `changed_unix_ms` are not set; the records have them).
    pub fn link_measurements(&self) -> &BTreeMap<String, relaymesh_protocol::LinkStatus> {
        self.inventory.measured()
    }

    /// This relay's direct children, connected or not, each with its link
    /// as its record has it and this relay measured it.
    pub fn child_links(&self) -> Vec<(String, relaymesh_protocol::LinkStatus)> {
        self.inventory
            .direct_children()
            .into_iter()
            .filter_map(|name| {
                let link = self.inventory.measured_link(&name)?;
                Some((name, link))
            })
            .collect()
    }

    /// A number that changes whenever [`Core::inventory_records`] do.
    pub fn inventory_version(&self) -> u64 {
        self.inventory.version()
    }

    /// A number that changes whenever [`Core::link_measurements`] do.
    pub fn link_measurements_version(&self) -> u64 {
        self.inventory.measured_version()
    }

    /// Counts `count` refusals by `limit` in this node's own inventory
    /// record, which goes up the tree: the daemon calls it for the limits its
    /// links and API enforce (the core counts its own).
    pub fn count_limit_refusals(&mut self, now: Now, limit: Limit, count: u64) {
        if count == 0 {
            return;
        }
        self.inventory.update_own(|own| {
            let counter = own
                .limit_refusals
                .entry(limit.as_str().to_string())
                .or_default();
            *counter = counter.saturating_add(count);
        });
        self.schedule_inventory_flush(now);
    }

    /// Whether `id` is referenced by this relay's slice (so it is, or will
    /// be, held here).
    pub fn references_bundle(&self, id: &BundleId) -> bool {
        self.slice.entries().any(|entry| entry.bundles.contains(id))
    }

    /// Adds or replaces an entry at this relay (the root's API does this).
    pub fn upsert_local(&mut self, now: Now, entry: SliceEntry) {
        self.change_slice(now, vec![SliceChange::Upsert(entry)], Vec::new());
    }

    /// Removes an entry at this relay.
    pub fn remove_local(&mut self, now: Now, key: &str) {
        self.change_slice(now, vec![SliceChange::Remove(key.to_string())], Vec::new());
    }

    /// The next action to execute, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Core::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.inventory_flush_at,
            self.bundles.next_retry(),
            self.cuts.recut_at,
            self.cuts.holds.deadline(),
            self.lost.check_at,
            self.queries.next_expiry(),
            self.renewal.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs whatever is due at `now`.
    pub fn handle_timeout(&mut self, now: Now) {
        if self.inventory_flush_at.is_some_and(|at| at <= now.instant) {
            self.inventory_flush_at = None;
            self.flush_inventory(now);
        }
        let handover_over = self
            .cuts
            .holds
            .deadline()
            .is_some_and(|at| at <= now.instant);
        if handover_over || self.cuts.recut_at.is_some_and(|at| at <= now.instant) {
            self.cuts.recut_at = None;
            self.recut_all(now.instant);
            // A disconnected child's status of a placement it lost.
            self.schedule_inventory_flush(now);
        }
        if self.lost.check_at.is_some_and(|at| at <= now.instant) {
            self.mark_lost(now);
        }
        self.retry_bundles(now);
        self.expire_queries(now);
        if let Some(refresh_server) = self.renewal.start(now) {
            self.actions
                .push_back(Action::RenewCertificate { refresh_server });
        }
    }

    /// This node's renewal schedule, which the driver tells what it did
    /// (see [`renewal`]).
    pub fn renewal(&mut self) -> &mut renewal::Renewal {
        &mut self.renewal
    }

    /// Applies changes to the slice, then tells children and the bundle
    /// tracker. `extra` mutations are persisted in the same batch (the
    /// parent position that goes with a delta).
    fn change_slice(&mut self, now: Now, changes: Vec<SliceChange>, extra: Vec<Mutation>) {
        let mut mutations = Vec::new();
        let changed = self.slice.apply(changes, &mut mutations);
        mutations.extend(extra);
        self.persist(mutations);
        if !changed.is_empty() {
            // A revoked child is cut off before anything else is sent.
            self.apply_revocations(now, &changed);
            self.apply_moves(now, &changed);
            self.apply_parents(now, &changed);
            self.apply_labels(now, &changed);
            self.apply_trust(now, &changed);
            self.send_changes_to_children(now.instant, &changed);
            self.reconcile_bundles(now);
        }
    }

    fn persist(&mut self, mutations: Vec<Mutation>) {
        if !mutations.is_empty() {
            self.actions.push_back(Action::Persist(mutations));
        }
    }

    fn schedule_inventory_flush(&mut self, now: Now) {
        let pending = self.inventory.has_pending() || self.statuses.dirty;
        if pending && self.inventory_flush_at.is_none() {
            self.inventory_flush_at = Some(now.instant + INVENTORY_COALESCE);
        }
    }

    fn resume_point(&self) -> Option<Resume> {
        self.upstream.position()
    }
}

#[cfg(test)]
mod tests;
