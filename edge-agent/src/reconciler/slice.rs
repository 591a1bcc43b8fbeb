//! Taking the slice the daemon publishes into the reconciler's state: the
//! cluster's labels and annotations as the root changed them, and per
//! placement what its entry says (spec, bundles, rollout). New and changed
//! placements become due; placements gone from a trusted slice are removed
//! from the cluster.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_node::daemon::AgentSlice;
use relaymesh_protocol::placement::KEY_PREFIX as PLACEMENT_PREFIX;
use relaymesh_protocol::PlacementBody;
use relaymesh_protocol::SliceEntry;
use relaymesh_topology::spec::EntrySpec;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::error::ReconcileError;
use super::rollout::take_rollout;
use super::state::{Placement, Reconciler, Timing};
use crate::rules::PlacementRules;

/// What changed of the cluster itself with a slice.
#[derive(Debug, Clone, Copy)]
struct Relabelled {
    /// Its labels: templates, status rules and group labels read them.
    labels: bool,
    /// Its annotations: templates read them.
    annotations: bool,
}

impl Reconciler {
    /// Takes the newest slice: new and changed placements become due,
    /// placements gone from a trusted slice are removed from the cluster.
    pub(super) async fn sync_slice(&mut self) -> Result<(), ReconcileError> {
        let slice = self.slice.borrow_and_update().clone();
        if !self.trusted {
            self.trusted = self.store.load()?.parent_position.is_some();
        }
        let relabelled = self.take_cluster_labels(&slice);
        let mut assigned = BTreeSet::new();
        let mut changed_status = Vec::new();
        for entry in slice.entries.iter() {
            if !entry.key.starts_with(PLACEMENT_PREFIX) {
                continue;
            }
            assigned.insert(entry.key.clone());
            let placement = self.placements.entry(entry.key.clone()).or_default();
            if take_entry(placement, entry, &self.labels, relabelled) {
                changed_status.push(entry.key.clone());
            }
        }
        self.check_capacity(&assigned)?;
        for key in changed_status {
            self.report(&key).await;
        }
        self.drop_unassigned(&assigned).await?;
        self.update_room()
    }

    /// Takes the cluster's labels and annotations as the root changed them
    /// (its entry in the slice) over those it registered with.
    fn take_cluster_labels(&mut self, slice: &AgentSlice) -> Relabelled {
        let labels_key = relaymesh_protocol::ClusterLabels::key_for(&self.cluster);
        let change = slice
            .entries
            .iter()
            .find(|entry| entry.key == labels_key)
            .and_then(relaymesh_protocol::ClusterLabels::from_entry)
            .and_then(Result::ok);
        let labels = change.as_ref().map_or_else(
            || self.base_labels.clone(),
            |change| change.apply(&self.base_labels),
        );
        let annotations = change.map(|change| change.annotations).unwrap_or_default();
        let relabelled = labels != self.labels;
        if relabelled {
            tracing::info!(
                ?labels,
                "the cluster's labels changed: customizing and summarizing again"
            );
            self.labels = labels;
        }
        let reannotated = annotations != self.annotations;
        if reannotated {
            tracing::info!(
                annotations = annotations.len(),
                "the cluster's annotations changed: customizing again"
            );
            self.annotations = annotations;
        }
        Relabelled {
            labels: relabelled,
            annotations: reannotated,
        }
    }

    /// Forgets the placements the slice no longer assigns, and removes
    /// from the cluster those its inventory holds, once the slice can be
    /// trusted.
    async fn drop_unassigned(&mut self, assigned: &BTreeSet<String>) -> Result<(), ReconcileError> {
        let gone: Vec<String> = self
            .placements
            .keys()
            .filter(|key| !assigned.contains(*key))
            .cloned()
            .collect();
        for key in gone {
            self.placements.remove(&key);
            self.reporter.forget(&key).await;
        }
        if self.trusted {
            for key in self.inventory.placements()?.into_keys() {
                if !assigned.contains(&key) {
                    let span = tracing::info_span!("placement", key = %key);
                    self.remove_placement(&key).instrument(span).await?;
                }
            }
        } else if assigned.is_empty() && !self.inventory.placements()?.is_empty() {
            tracing::warn!("empty slice before the first sync with the parent: pruning nothing");
        }
        Ok(())
    }
}

/// Takes slice `entry` into what the reconciler knows of its `placement`,
/// the cluster's `labels` being as they are now and `relabelled` telling
/// what of the cluster changed with this slice; it becomes due if what it
/// applies changed. Returns whether what its status reports changed.
fn take_entry(
    placement: &mut Placement,
    entry: &SliceEntry,
    labels: &BTreeMap<String, String>,
    relabelled: Relabelled,
) -> bool {
    // The body is read (and its status rules compiled) once per
    // body, not on every slice the node publishes.
    let rules_changed = placement.read_body.as_deref() != Some(entry.body.as_slice())
        && read_spec(placement, entry);
    if relabelled.labels || relabelled.annotations {
        // Templates and overrides may read them.
        placement.applied = false;
    }
    let (bundles, wave_changed) = take_rollout(placement, entry, labels);
    placement.bounded = matches!(
        &entry.target,
        relaymesh_protocol::Target::Placement(target)
            if target.max_clusters.is_some() || target.quota.is_some()
    );
    let adopt = placement.spec_adopt;
    // A changed entry, or one still waiting for its bundles.
    if placement.bundles != bundles || placement.adopt != adopt || !placement.applied {
        placement.bundles = bundles;
        placement.adopt = adopt;
        placement.failures = 0;
        placement.due = Some(Instant::now());
    }
    rules_changed || relabelled.labels || wave_changed
}

/// Reads a placement's spec from its entry's typed body: whether it
/// adopts, its rollout's times, its customization (a changed one is
/// applied again) and its status rules. A body this agent cannot read (a
/// newer root's) holds the placement back, failing with why, rather than
/// applying its objects uncustomized. Returns whether its rules changed.
fn read_spec(placement: &mut Placement, entry: &SliceEntry) -> bool {
    placement.read_body = Some(entry.body.clone());
    // `sync_slice` takes only entries under the placement prefix.
    let Some(decoded) = PlacementBody::from_entry(entry) else {
        return false;
    };
    let read = decoded
        .map_err(|error| error.to_string())
        .and_then(|body| EntrySpec::read(&body).map_err(|error| error.to_string()));
    let spec = match read {
        Ok(spec) => {
            placement.unreadable = None;
            spec
        }
        Err(error) => {
            tracing::warn!(%error, "placement body unreadable: not applied");
            placement.unreadable = Some(format!(
                "this agent cannot read the placement's spec (is the root newer?): {error}"
            ));
            placement.applied = false;
            return false;
        }
    };
    placement.spec_adopt = spec.adopt;
    placement.timing = Timing {
        min_success: spec.min_success_time,
        deadline: spec.progress_deadline,
    };
    if placement.customization != spec.customization {
        placement.customization = spec.customization;
        placement.applied = false;
    }
    let rules = PlacementRules::new(spec.status_rules, spec.status_group_by);
    if placement.rules.same_source(&rules) {
        return false;
    }
    placement.rules = rules;
    // Only what is reported changes: no pass is needed.
    true
}
