//! At the root: the tree as its API serves it, republished after the core's
//! inventory, its link measurements or the clusters' annotations changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{now, unix_ms, Daemon};

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
        let measured_changed = last.map(|(_, measured, _)| measured) != Some(current.1);
        if !records_changed && !measured_changed && annotations.is_none() {
            return;
        }
        let Ok(mut inventory) = self.shared.inventory.write() else {
            return;
        };
        let mut keys_changed = false;
        if records_changed {
            inventory.records = self.core.inventory_records().cloned().collect();
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
