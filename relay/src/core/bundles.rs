//! Which bundles a relay holds, which it must fetch from its parent, and
//! which it may drop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use relaymesh_protocol::BundleId;

use super::{Action, Core, Now};

/// The longest wait between two attempts to fetch a bundle.
pub const MAX_FETCH_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct Bundles {
    held: BTreeSet<BundleId>,
    fetching: BTreeMap<BundleId, Fetch>,
}

#[derive(Debug, Default)]
struct Fetch {
    in_flight: bool,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Bundles {
    pub fn new(held: BTreeSet<BundleId>) -> Self {
        Self {
            held,
            fetching: BTreeMap::new(),
        }
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
        tracing::debug!(bundle = ?id, "bundle stored");
        self.reconcile_bundles(now);
    }

    /// A bundle fetch failed; it is retried with backoff.
    pub fn handle_bundle_failed(&mut self, now: Now, id: BundleId) {
        if let Some(fetch) = self.bundles.fetching.get_mut(&id) {
            fetch.in_flight = false;
            fetch.failures += 1;
            let backoff = Duration::from_millis(250)
                .saturating_mul(1 << fetch.failures.min(8))
                .min(MAX_FETCH_BACKOFF);
            fetch.retry_at = Some(now.instant + backoff);
            tracing::warn!(bundle = ?id, failures = fetch.failures, ?backoff, "bundle fetch failed");
        }
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

    /// Starts every fetch that is due, if the parent is there to ask.
    pub(super) fn retry_bundles(&mut self, now: Now) {
        if !self.upstream.connected() {
            return;
        }
        let mut due = Vec::new();
        for (id, fetch) in &mut self.bundles.fetching {
            if !fetch.in_flight && fetch.retry_at.is_none_or(|at| at <= now.instant) {
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
