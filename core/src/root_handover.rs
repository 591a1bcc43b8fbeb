//! Make-before-break at the root for placements without a bound: when a
//! Placement's clusters change, the clusters it leaves keep their copy
//! until every cluster it now selects is ready, or until
//! [`HANDOVER_TIMEOUT`].
//!
//! The root holds the whole inventory, so for a placement without a bound
//! (label selector and names, no `maxClusters`) it knows which clusters the
//! old target selected and the new one does not. It publishes the new
//! target with those clusters added to its `names` (which every relay
//! selects in addition to the label-selected ones), so they keep the entry
//! and their agents prune nothing. Once the placement's status counts every
//! selected cluster ready, it publishes the new target alone, and the
//! leaving clusters remove their copies. A bounded placement's clusters are
//! chosen by the relays below, not by the root: each relay hands its own
//! changes over (`handover`).
//!
//! The core decides; the root's daemon signs what it publishes. The
//! handovers live in memory: a root restarted during one publishes the new
//! target alone, and the leaving clusters' copies go at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use relaymesh_protocol::{NodeRecord, PlacementTarget, Role, SliceEntry, Target};

use super::{Core, Now, HANDOVER_TIMEOUT};

/// A placement's change under way.
#[derive(Debug, Clone)]
struct Handover {
    /// The entry as the spec says now, unsigned.
    base: SliceEntry,
    /// The clusters it leaves, kept until the handover ends.
    leaving: BTreeSet<String>,
    since: Instant,
}

/// The handovers under way at the root, by placement key.
#[derive(Debug, Default)]
pub(crate) struct RootHandovers {
    by_key: BTreeMap<String, Handover>,
}

impl RootHandovers {
    /// The entry placement `key`'s spec says, while it hands over.
    pub(crate) fn base(&self, key: &str) -> Option<&SliceEntry> {
        self.by_key.get(key).map(|handover| &handover.base)
    }
}

/// Whether `target` selects the cluster of `record`, as every relay
/// resolves it.
fn selects(target: &PlacementTarget, record: &NodeRecord) -> bool {
    relaymesh_topology::placement::target_selects(target, &record.name, &record.labels)
}

fn unbounded(target: &PlacementTarget) -> bool {
    target.max_clusters.is_none() && target.quota.is_none()
}

impl Core {
    /// At the root: the entry to publish for `entry` (a placement as its
    /// spec says now, unsigned), with the clusters it leaves kept in its
    /// names while a handover runs.
    pub fn hand_over(&mut self, now: Now, entry: SliceEntry) -> SliceEntry {
        let Target::Placement(new) = &entry.target else {
            return entry;
        };
        let previous = self.root_handovers.by_key.remove(&entry.key);
        let old = match &previous {
            Some(handover) => Some(handover.base.target.clone()),
            None => self
                .entries()
                .find(|held| held.key == entry.key)
                .map(|held| held.target.clone()),
        };
        let Some(Target::Placement(old)) = old else {
            return entry;
        };
        // Every rebuild comes here with every placement: only a changed
        // target (or one still handing over) is worth a look at the
        // inventory.
        if (previous.is_none() && old == *new) || !unbounded(&old) || !unbounded(new) {
            return entry;
        }
        let kept_before = previous
            .as_ref()
            .map(|handover| handover.leaving.clone())
            .unwrap_or_default();
        let leaving: BTreeSet<String> = self
            .inventory_records()
            .filter(|record| record.role == Role::Agent)
            .filter(|record| !selects(new, record))
            .filter(|record| selects(&old, record) || kept_before.contains(&record.name))
            .map(|record| record.name.clone())
            .collect();
        if leaving.is_empty() {
            return entry;
        }
        let since = previous.map_or(now.instant, |handover| handover.since);
        let mut published = entry.clone();
        if let Target::Placement(target) = &mut published.target {
            let mut names: BTreeSet<String> = target.names.iter().cloned().collect();
            names.extend(leaving.iter().cloned());
            target.names = names.into_iter().collect();
        }
        tracing::info!(placement = %entry.key, ?leaving, "placement changes its clusters: the leaving ones keep their copies until the new ones are ready");
        self.root_handovers.by_key.insert(
            entry.key.clone(),
            Handover {
                base: entry,
                leaving,
                since,
            },
        );
        published
    }

    /// At the root: ends every handover whose placement has every selected
    /// cluster ready (or that ran for [`HANDOVER_TIMEOUT`]), returning the
    /// entries to publish without the clusters they leave (unsigned).
    pub fn finished_handovers(&mut self, now: Now) -> Vec<SliceEntry> {
        let done: Vec<String> = self
            .root_handovers
            .by_key
            .iter()
            .filter(|(key, handover)| {
                let selected = self.placement_selected(key).unwrap_or_default();
                let ready = self
                    .placement_status(key)
                    .map_or(0, |status| status.counts.ready);
                let timed_out = now.instant.duration_since(handover.since) >= HANDOVER_TIMEOUT;
                if timed_out {
                    tracing::warn!(placement = %key, leaving = ?handover.leaving, "handover timed out: removing the leaving clusters' copies anyway");
                }
                (selected > 0 && ready >= selected) || timed_out
            })
            .map(|(key, _)| key.clone())
            .collect();
        done.into_iter()
            .filter_map(|key| self.root_handovers.by_key.remove(&key))
            .map(|handover| {
                tracing::info!(placement = %handover.base.key, leaving = ?handover.leaving, "the new clusters are ready: the leaving ones remove their copies");
                handover.base
            })
            .collect()
    }

    /// At the root: the clusters placement `key` is leaving, if it is
    /// handing over.
    pub fn handover_leaving(&self, key: &str) -> Vec<String> {
        self.root_handovers
            .by_key
            .get(key)
            .map(|handover| handover.leaving.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// At the root: forgets the handover of a placement that is gone.
    pub fn forget_handover(&mut self, key: &str) {
        self.root_handovers.by_key.remove(key);
    }
}
