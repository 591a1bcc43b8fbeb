//! This node's labels as the root set them (see
//! [`relaymesh_protocol::cluster_labels`]): those it was given at join, with
//! the root's changes, reported up like any change of its record.

use relaymesh_protocol::ClusterLabels;

use super::slice::Changed;
use super::{Core, Now};

impl Core {
    /// Applies a change of this node's labels among `changed`.
    pub(super) fn apply_labels(&mut self, now: Now, changed: &[Changed]) {
        let key = ClusterLabels::key_for(&self.name);
        if changed.iter().any(|change| change.key == key) && self.relabel() {
            self.schedule_inventory_flush(now);
        }
    }

    /// Sets this node's labels from the slice; whether they changed.
    pub(super) fn relabel(&mut self) -> bool {
        let labels = self.labels();
        if self.inventory.own().labels == labels {
            return false;
        }
        tracing::info!(?labels, "the root changed this node's labels");
        self.inventory.update_own(|own| own.labels = labels);
        true
    }

    /// This node's labels: those it joined with, changed as the root says.
    pub fn labels(&self) -> std::collections::BTreeMap<String, String> {
        let change = self
            .slice
            .entry(&ClusterLabels::key_for(&self.name))
            .and_then(ClusterLabels::from_entry);
        match change {
            Some(Ok(change)) => change.apply(&self.base_labels),
            Some(Err(error)) => {
                tracing::error!(%error, "unreadable cluster labels");
                self.base_labels.clone()
            }
            None => self.base_labels.clone(),
        }
    }
}
