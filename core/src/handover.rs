//! Make-before-break for count-bounded placements, at every relay.
//!
//! A bounded placement's clusters are chosen by the relays, level by level,
//! so no single node knows which clusters a change moves a copy from and to.
//! What every relay does know is how its own split changed: when a recut
//! shrinks one child's share and grows another's, the relay that made that
//! decision sees both sides in its subtree. It keeps sending each shrunk
//! child what it had until every grown child reports as many clusters ready
//! as its new share, then sends the new cut (and the shrunk child's copies
//! go). A relay whose own quota its children cannot fill (a cluster below
//! it left the selection, and its parent has not yet placed the remainder
//! elsewhere) keeps what it had too: the replacement is in another subtree,
//! and the ancestor that grows that subtree holds this one's share until it
//! is ready. Every hold ends after [`HANDOVER_TIMEOUT`] at the latest.
//!
//! While a child is held with a share that dropped to nothing, what it
//! reports of the placement is left out of this relay's merged status: the
//! placement's counts are those of the clusters it now selects, as its
//! `selected` count is.
//!
//! The holds live in memory: a relay restarted during a handover decides
//! again without them, and the shrunk children's copies go at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use relaymesh_protocol::{PlacementTarget, SliceEntry, Target};

use super::cut::Cut;
use super::Core;

/// How long children whose share shrank keep what they had at most, when
/// the clusters replacing them do not all become ready.
pub const HANDOVER_TIMEOUT: Duration = Duration::from_secs(300);

/// One placement's handover at this relay.
#[derive(Debug, Clone)]
pub(crate) struct Hold {
    since: Instant,
    /// The children whose share grew, with how many ready clusters each
    /// must report.
    growers: BTreeMap<String, u64>,
    /// The children whose share dropped to nothing, kept meanwhile.
    dropped: BTreeSet<String>,
}

/// The handovers under way at this relay, by placement key.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    by_key: BTreeMap<String, Hold>,
}

impl Holds {
    /// When the oldest handover times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.by_key
            .values()
            .map(|hold| hold.since + HANDOVER_TIMEOUT)
            .min()
    }

    /// Whether placement `key` is handing over here.
    pub fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// The children kept for placement `key` with nothing of it left in
    /// the new cut, if it is handing over: their statuses are no longer
    /// the placement's.
    pub fn dropped_in(&self, key: &str) -> Option<&BTreeSet<String>> {
        self.by_key.get(key).map(|hold| &hold.dropped)
    }

    /// The children kept for placement `key` with nothing of it left.
    fn dropped_of(&self, key: &str) -> BTreeSet<String> {
        self.by_key
            .get(key)
            .map(|hold| hold.dropped.clone())
            .unwrap_or_default()
    }

    pub fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }
}

impl Core {
    /// After a bounded placement was split again into `per_child` (from
    /// what each child had in `old`): keeps the shrunk children's old
    /// entries while the handover lasts (see the module documentation).
    /// Returns the children kept so.
    pub(super) fn hold_shrunk(
        &mut self,
        now: Instant,
        key: &str,
        target: &PlacementTarget,
        decided_total: u64,
        old: &Cut,
        per_child: &mut BTreeMap<String, SliceEntry>,
    ) -> BTreeSet<String> {
        let dropped_before = self.cuts.holds.dropped_of(key);
        let held = self.decide_hold(now, key, target, decided_total, old, per_child);
        if dropped_before != self.cuts.holds.dropped_of(key) {
            self.status_parts_changed();
        }
        held
    }

    fn decide_hold(
        &mut self,
        now: Instant,
        key: &str,
        target: &PlacementTarget,
        decided_total: u64,
        old: &Cut,
        per_child: &mut BTreeMap<String, SliceEntry>,
    ) -> BTreeSet<String> {
        let previous = self.cuts.holds.by_key.remove(key);
        let weight = |entry: Option<&SliceEntry>, child: &str| -> u64 {
            match entry.map(|entry| &entry.target) {
                Some(Target::Placement(target)) => self.share_of(target, child),
                _ => 0,
            }
        };
        let mut growers = previous
            .as_ref()
            .map(|hold| hold.growers.clone())
            .unwrap_or_default();
        let mut shrunk = BTreeSet::new();
        let mut dropped = BTreeSet::new();
        for child in self.inventory.direct_children() {
            let before = weight(old.get(&child).map(|entry| &**entry), &child);
            let after = weight(per_child.get(&child), &child);
            if after > before {
                growers.insert(child.clone(), after);
            } else if after == 0 {
                growers.remove(&child);
            } else if let Some(want) = growers.get_mut(&child) {
                *want = after;
            }
            if after < before {
                if after == 0 {
                    dropped.insert(child.clone());
                }
                shrunk.insert(child);
            }
        }
        if shrunk.is_empty() {
            return BTreeSet::new();
        }
        let since = previous.map_or(now, |hold| hold.since);
        // Below the root: a quota this relay cannot fill is being placed
        // elsewhere by a relay above, which holds this one meanwhile.
        let short = target
            .quota
            .as_ref()
            .is_some_and(|quota| u64::from(quota.total) > decided_total);
        let waiting: Vec<&String> = growers
            .iter()
            .filter(|(child, want)| self.child_ready(child, key) < **want)
            .map(|(child, _)| child)
            .collect();
        if !short && waiting.is_empty() {
            tracing::info!(
                placement = key,
                ?shrunk,
                "the clusters replacing them are ready: shrunk children drop their copies"
            );
            return BTreeSet::new();
        }
        if now.duration_since(since) >= HANDOVER_TIMEOUT {
            tracing::warn!(
                placement = key,
                ?shrunk,
                ?waiting,
                short,
                "handover timed out: shrunk children drop their copies anyway"
            );
            return BTreeSet::new();
        }
        tracing::debug!(
            placement = key,
            ?shrunk,
            ?waiting,
            short,
            "children whose share shrank keep their copies until the new ones are ready"
        );
        for child in &shrunk {
            if let Some(had) = old.get(child) {
                per_child.insert(child.clone(), SliceEntry::clone(had));
            }
        }
        self.cuts.holds.by_key.insert(
            key.to_string(),
            Hold {
                since,
                growers,
                dropped,
            },
        );
        shrunk
    }

    /// How many clusters below `child` a cut with `target` asks for: its
    /// quota and the named clusters it reaches.
    fn share_of(&self, target: &PlacementTarget, child: &str) -> u64 {
        let quota = target
            .quota
            .as_ref()
            .map_or(0, |quota| u64::from(quota.total));
        let named = target
            .names
            .iter()
            .filter(|name| self.inventory.index().via(name) == Some(child))
            .count();
        quota.saturating_add(u64::try_from(named).unwrap_or(u64::MAX))
    }

    /// How many clusters `child` reports ready for placement `key` (none
    /// while its link is down: what it said last may be stale).
    fn child_ready(&self, child: &str, key: &str) -> u64 {
        if !self.links_by_name.contains_key(child) {
            return 0;
        }
        self.child_reported(child, key)
            .map_or(0, |status| status.counts.ready)
    }
}
