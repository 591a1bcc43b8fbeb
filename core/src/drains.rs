//! Drains at the root: a cluster being drained (`relayctl drain`, the label
//! `relaymesh.dev/draining=true`) leaves every count-bounded placement,
//! which the relays place on other clusters, while its parent keeps
//! sending it the ones it had (make-before-break, `placements`). Once
//! every count-bounded placement is ready again, or after
//! [`DRAIN_TIMEOUT`], the drain is done: the core hands the root's daemon
//! the cluster's labels with the drain marked `done`, which it signs and
//! publishes, and the cluster removes its copies.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use relaymesh_protocol::{ClusterLabels, Target};
use relaymesh_topology::placement::DRAINING_LABEL;

use super::{Core, Now};

/// How long a drained cluster keeps its copies at most, when the clusters
/// replacing it do not all become ready.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How long every count-bounded placement must have been ready, after the
/// root saw the cluster's record say it is draining, before the drain is
/// done. The drained cluster's parent leaves its status out of the counts
/// in the flush that sends its record up (`Cuts::left_out_of`);
/// relays above may send the two a coalescing interval apart, so this is
/// long enough for the counts to catch up with the record, and the
/// drained cluster's copy is never what makes a placement look ready.
pub const DRAIN_SETTLE: Duration = Duration::from_secs(3);

/// The drains under way at the root, by cluster.
#[derive(Debug, Default)]
pub(crate) struct Drains {
    by_cluster: BTreeMap<String, Drain>,
}

#[derive(Debug, Clone, Copy)]
struct Drain {
    /// When the root first saw the cluster's record draining.
    seen: Instant,
    /// Since when every count-bounded placement has been ready.
    ready_since: Option<Instant>,
}

impl Core {
    /// At the root: the drains that are done now (see the module
    /// documentation), as the cluster labels to publish (unsigned), with
    /// the drain marked `done`.
    pub fn finished_drains(&mut self, now: Now) -> Vec<ClusterLabels> {
        let draining: Vec<ClusterLabels> = self
            .entries_with_prefix(relaymesh_protocol::cluster_labels::KEY_PREFIX)
            .filter_map(ClusterLabels::from_entry)
            .filter_map(Result::ok)
            .filter(|labels| labels.set.get(DRAINING_LABEL).map(String::as_str) == Some("true"))
            .collect();
        self.drains
            .by_cluster
            .retain(|cluster, _| draining.iter().any(|labels| &labels.node == cluster));
        if draining.is_empty() {
            return Vec::new();
        }
        let replaced = self.bounded_placements_ready();
        let mut done = Vec::new();
        for labels in draining {
            let seen = self.inventory_records().any(|record| {
                record.name == labels.node && record.labels.get(DRAINING_LABEL) == Some("true")
            });
            if !seen {
                continue;
            }
            let drain = self
                .drains
                .by_cluster
                .entry(labels.node.clone())
                .or_insert(Drain {
                    seen: now.instant,
                    ready_since: None,
                });
            drain.ready_since = if replaced {
                Some(drain.ready_since.unwrap_or(now.instant))
            } else {
                None
            };
            let settled = drain
                .ready_since
                .is_some_and(|since| now.instant.duration_since(since) >= DRAIN_SETTLE);
            let timed_out = now.instant.duration_since(drain.seen) >= DRAIN_TIMEOUT;
            if !settled && !timed_out {
                continue;
            }
            if timed_out && !settled {
                tracing::warn!(cluster = %labels.node, "drain timed out: removing its copies anyway");
            } else {
                tracing::info!(cluster = %labels.node, "drained: the clusters replacing it are ready; it removes its copies");
            }
            self.drains.by_cluster.remove(&labels.node);
            let mut finished = labels;
            finished
                .set
                .insert(DRAINING_LABEL.to_string(), "done".to_string());
            finished.remove.clear();
            done.push(finished);
        }
        done
    }

    /// Whether every count-bounded placement's selected clusters are all
    /// ready and nothing else is counted ready (the status from below no
    /// longer counts the drained cluster), with no re-decision pending at
    /// the root.
    fn bounded_placements_ready(&self) -> bool {
        if self.recut_pending() {
            return false;
        }
        self.entries()
            .filter(|entry| match &entry.target {
                Target::Placement(target) => target.max_clusters.is_some(),
                _ => false,
            })
            .all(|entry| {
                let selected = self.placement_selected(&entry.key).unwrap_or_default();
                let ready = self
                    .placement_status(&entry.key)
                    .map_or(0, |status| status.counts.ready);
                // Equal, not at least: while the relays below still count
                // the drained cluster's copy, ready is above selected, and
                // a drain marked done then would show READY 3/2 (CI run 73).
                ready == selected
            })
    }
}
