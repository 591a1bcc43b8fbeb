//! Which bundles a relay holds, which it must fetch from its parent, which it
//! may drop, and which it served to each child.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use relaymesh_protocol::limits::MAX_BUNDLE_STREAMS;
use relaymesh_protocol::BundleId;

use super::{Action, Core, Now};
use crate::state::{Mutation, Served};

/// The longest wait between two attempts to fetch a bundle.
pub const MAX_FETCH_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct Bundles {
    pub(crate) held: BTreeSet<BundleId>,
    fetching: BTreeMap<BundleId, Fetch>,
    /// Completed transfers of each held bundle to each child.
    served: BTreeMap<(BundleId, String), Served>,
    /// Completed transfers to each child, in all.
    served_totals: BTreeMap<String, Served>,
}

#[derive(Debug, Default)]
struct Fetch {
    in_flight: bool,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Bundles {
    pub fn new(
        held: BTreeSet<BundleId>,
        served: BTreeMap<(BundleId, String), Served>,
        served_totals: BTreeMap<String, Served>,
    ) -> Self {
        Self {
            held,
            fetching: BTreeMap::new(),
            served,
            served_totals,
        }
    }

    /// Completed transfers to each child, in all.
    pub fn served_totals(&self) -> &BTreeMap<String, Served> {
        &self.served_totals
    }

    pub fn next_retry(&self) -> Option<Instant> {
        self.fetching
            .values()
            .filter(|fetch| !fetch.in_flight)
            .filter_map(|fetch| fetch.retry_at)
            .min()
    }
}

impl Core {
    /// A bundle was fetched, verified and stored.
    pub fn handle_bundle_stored(&mut self, now: Now, id: BundleId) {
        self.bundles.fetching.remove(&id);
        self.bundles.held.insert(id);
        tracing::debug!(bundle = %id, "bundle stored");
        self.reconcile_bundles(now);
    }

    /// A bundle fetch failed; it is retried with backoff.
    pub fn handle_bundle_failed(&mut self, now: Now, id: BundleId) {
        if let Some(fetch) = self.bundles.fetching.get_mut(&id) {
            fetch.in_flight = false;
            fetch.failures = fetch.failures.saturating_add(1);
            let backoff = Duration::from_millis(250)
                .saturating_mul(1 << fetch.failures.min(8))
                .min(MAX_FETCH_BACKOFF);
            fetch.retry_at = Some(now.instant + backoff);
            tracing::warn!(bundle = ?id, failures = fetch.failures, ?backoff, "bundle fetch failed");
        }
        // Its stream is free again: a fetch waiting for one may start.
        self.retry_bundles(now);
    }

    /// The transport finished serving bundle `id` to `child`: the child
    /// acknowledged all `bytes` of it. Counted per link and per bundle, and
    /// persisted, so "a bundle crosses each link once" can be checked against
    /// what the application did rather than what the wire carried.
    pub fn handle_bundle_served(&mut self, now: Now, child: &str, id: BundleId, bytes: u64) {
        let key = (id, child.to_string());
        let bundle_total = self
            .bundles
            .served
            .get(&key)
            .copied()
            .unwrap_or_default()
            .plus(bytes);
        let link_total = self
            .bundles
            .served_totals
            .get(child)
            .copied()
            .unwrap_or_default()
            .plus(bytes);
        self.bundles
            .served_totals
            .insert(child.to_string(), link_total);
        tracing::debug!(%child, bundle = %id, bytes, times = bundle_total.times, "bundle served");
        let mut mutations = vec![Mutation::RecordServed {
            child: child.to_string(),
            bundle: id,
            bundle_total,
            link_total,
        }];
        if self.bundles.held.contains(&id) {
            self.bundles.served.insert(key, bundle_total);
        } else {
            // Dropped while it was being served: keep only the link's totals.
            mutations.push(Mutation::ForgetServed(id));
        }
        self.persist(mutations);
        self.inventory
            .child_served(child, link_total.times, link_total.bytes);
        self.schedule_inventory_flush(now);
    }

    /// Whether a bundle is held here.
    pub fn holds_bundle(&self, id: &BundleId) -> bool {
        self.bundles.held.contains(id)
    }

    /// Drops bundles nothing references and starts fetching referenced ones
    /// this relay lacks.
    pub(super) fn reconcile_bundles(&mut self, now: Now) {
        let referenced = self.slice.referenced_bundles();
        let unreferenced: Vec<BundleId> = self
            .bundles
            .held
            .iter()
            .filter(|id| !referenced.contains_key(id))
            .copied()
            .collect();
        for id in unreferenced {
            self.bundles.held.remove(&id);
            let before = self.bundles.served.len();
            self.bundles.served.retain(|(served, _), _| *served != id);
            if self.bundles.served.len() != before {
                self.persist(vec![Mutation::ForgetServed(id)]);
            }
            self.actions.push_back(Action::DropBundle(id));
        }
        self.bundles
            .fetching
            .retain(|id, fetch| fetch.in_flight || referenced.contains_key(id));
        for id in referenced.keys() {
            if !self.bundles.held.contains(id) && !self.bundles.fetching.contains_key(id) {
                self.bundles.fetching.insert(*id, Fetch::default());
            }
        }
        self.retry_bundles(now);
    }

    /// Starts every fetch that is due, if the parent is there to ask, but
    /// never more than [`MAX_BUNDLE_STREAMS`] at once: the parent refuses
    /// more streams than that on one connection.
    pub(super) fn retry_bundles(&mut self, now: Now) {
        if !self.upstream.connected() {
            return;
        }
        let in_flight = self
            .bundles
            .fetching
            .values()
            .filter(|fetch| fetch.in_flight)
            .count();
        let mut free = MAX_BUNDLE_STREAMS.saturating_sub(in_flight);
        let mut due = Vec::new();
        for (id, fetch) in &mut self.bundles.fetching {
            if free == 0 {
                break;
            }
            if !fetch.in_flight && fetch.retry_at.is_none_or(|at| at <= now.instant) {
                free -= 1;
                fetch.in_flight = true;
                fetch.retry_at = None;
                due.push(*id);
            }
        }
        for id in due {
            self.actions.push_back(Action::FetchBundle(id));
        }
    }

    pub(super) fn parent_link_ready(&mut self, now: Now) {
        self.retry_bundles(now);
    }

    pub(super) fn parent_link_lost(&mut self, _now: Now) {
        // Fetches in flight fail with the connection and come back through
        // handle_bundle_failed; nothing new starts until the parent is back.
    }
}
