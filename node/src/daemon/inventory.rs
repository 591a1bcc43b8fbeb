//! At the root: the tree as its API serves it, republished after the core's
//! inventory, its link measurements or the clusters' annotations changed.
//!
//! A publish copies every record, so it runs on a tick of its own
//! ([`PUBLISH_INTERVAL`]) rather than after every event: after every event,
//! each child's acknowledgement or report cost a copy of the whole tree, and
//! a root with 2,000 children spent half its CPU there (docs/benchmarks.md,
//! "Profiles").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

use super::{now, unix_ms, Daemon};

/// How often, at most, the API's view of the tree is refreshed: what the
/// API serves lags the core by up to this much.
pub(super) const PUBLISH_INTERVAL: Duration = Duration::from_millis(200);

/// The most of the loop's time copying the node list may take: after a
/// copy that took `t`, the next waits `t × (1 / COPY_SHARE − 1)` at least.
/// Below a few thousand nodes a copy takes well under a millisecond and the
/// tick alone sets the pace; at 5,000 one took about 25 ms, and five a
/// second were an eighth of the root's CPU (docs/benchmarks.md, Profiles).
const COPY_SHARE: u32 = 20;

/// The ticks of a root's publishes; the first is at once.
pub(super) fn publish_ticks() -> Interval {
    let mut ticks = tokio::time::interval(PUBLISH_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// The next publish tick; pending for good on a node without an API.
pub(super) async fn next_tick(ticks: &mut Option<Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

impl Daemon {
    /// Hands the API a new copy of the inventory, only of what changed
    /// since the last: the node list when a record changed, the root's
    /// measurements of its children's links (O(children)) when those did.
    pub(super) fn publish_inventory(&mut self) {
        if self.shared.config.api_listen.is_none() {
            return;
        }
        let head = self.core.head();
        let labels = match self.labels_counted {
            Some((counted_at, labels)) if counted_at == head => labels,
            _ => {
                let labels = self
                    .core
                    .prefix_version(relaymesh_protocol::cluster_labels::KEY_PREFIX);
                self.labels_counted = Some((head, labels));
                labels
            }
        };
        let current = (
            self.core.inventory_version(),
            self.core.link_measurements_version(),
            labels,
        );
        let last = self.inventory_published.replace(current);
        if last == Some(current) {
            return;
        }
        // Annotations are read again only when a `labels/` entry changed,
        // not on every change of the slice (every placement's).
        let annotations = (last.map(|(_, _, labels)| labels) != Some(current.2))
            .then(|| self.cluster_annotations())
            .filter(|annotations| {
                self.shared
                    .inventory
                    .read()
                    .map_or(true, |inventory| *inventory.annotations != *annotations)
            });
        let records_changed = last.map(|(records, _, _)| records) != Some(current.0);
        if records_changed && std::time::Instant::now() < self.inventory_not_before {
            // Published at a later tick: not marked as done.
            self.inventory_published = last;
            return;
        }
        let measured_changed = last.map(|(_, measured, _)| measured) != Some(current.1);
        if !records_changed && !measured_changed && annotations.is_none() {
            return;
        }
        let Ok(mut inventory) = self.shared.inventory.write() else {
            return;
        };
        let mut keys_changed = false;
        if records_changed {
            let started = std::time::Instant::now();
            inventory.records = self.core.inventory_records().cloned().collect();
            self.inventory_not_before =
                std::time::Instant::now() + started.elapsed() * (COPY_SHARE - 1);
            if self.shared.identity.get().token_signing_key.is_some() {
                match self.shared.store.record_issuer_keys(
                    &inventory.records,
                    unix_ms() / 1000,
                    self.core
                        .mesh_trust()
                        .filter(|trust| trust.anchors.len() > 1)
                        .map(|trust| trust.signer_key),
                ) {
                    Ok(changed) => keys_changed = changed,
                    Err(error) => {
                        tracing::error!(%error, "cannot record the relays' issuer keys")
                    }
                }
            }
        }
        if measured_changed {
            inventory.measured = Arc::new(self.core.link_measurements().clone());
        }
        if let Some(annotations) = annotations {
            inventory.annotations = Arc::new(annotations);
        }
        inventory.version += 1;
        drop(inventory);
        if keys_changed {
            self.regrant_current_keys(now());
        }
    }

    /// Every cluster's annotations, as the root set them (from its
    /// `labels/` entries): the API shows them on `Cluster` objects.
    fn cluster_annotations(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.core
            .entries_with_prefix(relaymesh_protocol::cluster_labels::KEY_PREFIX)
            .filter_map(relaymesh_protocol::ClusterLabels::from_entry)
            .filter_map(Result::ok)
            .filter(|labels| !labels.annotations.is_empty())
            .map(|labels| (labels.node, labels.annotations))
            .collect()
    }
}
