//! This node's labels as the root set them (see
//! [`relaymesh_protocol::cluster_labels`]): those it was given at join, with
//! the root's changes, reported up like any change of its record; and
//! `relaymesh.dev/full` while it runs as many placements as its capacity
//! allows, or while its agent says the cluster has no room (its replicas);
//! `relaymesh.dev/unreachable` while its agent says the cluster's API does
//! not answer; and the mesh CA its certificates rest on (see `trust`).

use relaymesh_protocol::inventory::PLACEMENTS_CAPACITY;
use relaymesh_protocol::ClusterLabels;
use relaymesh_topology::placement::{FULL_LABEL, UNREACHABLE_LABEL};

use super::slice::Changed;
use super::{Core, Now};

impl Core {
    /// Applies a change of this node's labels among `changed`.
    /// (A placement coming or going may fill or free its capacity too.)
    pub(super) fn apply_labels(&mut self, now: Now, changed: &[Changed]) {
        let key = ClusterLabels::key_for(&self.name);
        let relevant = changed.iter().any(|change| change.key == key)
            || (!changed.is_empty()
                && self
                    .inventory
                    .own()
                    .capacity
                    .contains_key(PLACEMENTS_CAPACITY));
        if relevant && self.relabel() {
            self.schedule_inventory_flush(now);
        }
    }

    /// Sets what this node says of its capacity (its record's `capacity`),
    /// and its labels again: a limit of placements may make it full.
    pub fn set_capacity(&mut self, now: Now, capacity: std::collections::BTreeMap<String, String>) {
        self.inventory.update_own(|own| own.capacity = capacity);
        self.relabel();
        self.schedule_inventory_flush(now);
    }

    /// Takes the agent's word on whether its cluster has room: none left
    /// (the replicas its placements ask for reached its capacity, or one
    /// waits for room) labels it full, so count-bounded placements go to
    /// other clusters. The agent judges this because only it reads the
    /// workloads, customized for its cluster.
    pub fn set_out_of_room(&mut self, now: Now, out_of_room: bool) {
        if self.out_of_room == out_of_room {
            return;
        }
        self.out_of_room = out_of_room;
        if self.relabel() {
            self.schedule_inventory_flush(now);
        }
    }

    /// Takes the agent's word on whether its cluster's API answers: while
    /// it does not, the node labels itself [`UNREACHABLE_LABEL`], so the
    /// root's `Cluster` says so. Only the node's own core sets it (from its
    /// own reconciler): no relay or root can say it of another cluster.
    pub fn set_cluster_unreachable(&mut self, now: Now, unreachable: bool) {
        if self.cluster_unreachable == unreachable {
            return;
        }
        self.cluster_unreachable = unreachable;
        if self.relabel() {
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
        self.inventory.update_own(|own| own.labels = labels.into());
        true
    }

    /// This node's labels: those it joined with, changed as the root says,
    /// `relaymesh.dev/full` while it holds as many placements as its
    /// capacity allows, and `relaymesh.dev/unreachable` while its agent
    /// says its cluster's API does not answer.
    pub fn labels(&self) -> std::collections::BTreeMap<String, String> {
        let mut labels = self.given_labels();
        if self.is_full() {
            labels.insert(FULL_LABEL.to_string(), "true".to_string());
        }
        if self.cluster_unreachable {
            labels.insert(UNREACHABLE_LABEL.to_string(), "true".to_string());
        }
        // Only once the root's trust exists: before, every node accepts the
        // one key it joined with.
        if self.mesh_trust().is_some() {
            labels.insert(
                super::trust::TOKEN_KEYS_LABEL.to_string(),
                self.token_keys_label(),
            );
        }
        labels.extend(
            self.certificate_labels
                .iter()
                .map(|(key, value)| (key.clone(), value.clone())),
        );
        labels
    }

    /// Whether this node holds as many placements as its capacity's
    /// `placements` allows, or its agent said it has no room.
    fn is_full(&self) -> bool {
        if self.out_of_room {
            return true;
        }
        let Some(limit) = self
            .inventory
            .own()
            .capacity
            .get(PLACEMENTS_CAPACITY)
            .and_then(|limit| limit.parse::<usize>().ok())
        else {
            return false;
        };
        let held = self
            .slice
            .entries()
            .filter(|entry| matches!(entry.target, relaymesh_protocol::Target::Placement(_)))
            .count();
        held >= limit
    }

    fn given_labels(&self) -> std::collections::BTreeMap<String, String> {
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
