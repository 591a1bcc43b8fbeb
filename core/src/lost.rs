//! Clusters lost to count-bounded placements: an agent child disconnected
//! for longer than this relay's `lost_after` is labelled
//! [`LOST_LABEL`] in the record this relay keeps and reports up, so every
//! relay's split places its count-bounded placements elsewhere (as from a
//! drained cluster). Its agent, cut off, keeps running what it had; back,
//! it reports its own labels again and is an open cluster like any other.

use std::time::{Duration, Instant};

use relaymesh_protocol::Role;
use relaymesh_topology::placement::LOST_LABEL;

use super::{Core, Now};

/// When clusters count as lost, and when to look next.
#[derive(Debug, Default)]
pub(crate) struct Lost {
    /// How long a cluster may be disconnected; `None`: never lost.
    pub after: Option<Duration>,
    /// The earliest moment a disconnected cluster becomes lost.
    pub check_at: Option<Instant>,
}

impl Core {
    /// Sets how long an agent child may be disconnected before count-
    /// bounded placements treat its cluster as lost (`None`: never).
    pub fn set_lost_after(&mut self, now: Now, after: Option<Duration>) {
        self.lost.after = after;
        self.schedule_lost_check(now);
        self.mark_lost(now);
    }

    /// When the next disconnected agent child becomes lost.
    pub(super) fn schedule_lost_check(&mut self, now: Now) {
        let Some(after) = self.lost.after else {
            self.lost.check_at = None;
            return;
        };
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let next = self
            .lost_candidates()
            .into_iter()
            .map(|(_, since)| since.saturating_add(after_ms))
            .min();
        self.lost.check_at =
            next.map(|due| now.instant + Duration::from_millis(due.saturating_sub(now.unix_ms)));
    }

    /// Labels every agent child disconnected for longer than `after` lost.
    pub(super) fn mark_lost(&mut self, now: Now) {
        let Some(after) = self.lost.after else {
            return;
        };
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let due: Vec<String> = self
            .lost_candidates()
            .into_iter()
            .filter(|(_, since)| since.saturating_add(after_ms) <= now.unix_ms)
            .map(|(name, _)| name)
            .collect();
        let mut mutations = Vec::new();
        let mut changed = false;
        for child in &due {
            tracing::warn!(%child, after = ?after, "a cluster disconnected for longer than lost-after: count-bounded placements go elsewhere");
            changed |=
                self.inventory
                    .set_child_label(child, LOST_LABEL, Some("true"), &mut mutations);
        }
        self.persist(mutations);
        if changed {
            self.lost_labels_changed(now);
        }
        self.schedule_lost_check(now);
    }

    /// A child connected: it is no longer lost.
    pub(super) fn found(&mut self, now: Now, child: &str) {
        let mut mutations = Vec::new();
        let changed = self
            .inventory
            .set_child_label(child, LOST_LABEL, None, &mut mutations);
        self.persist(mutations);
        if changed {
            tracing::info!(%child, "a lost cluster is back");
            self.lost_labels_changed(now);
        }
    }

    fn lost_labels_changed(&mut self, now: Now) {
        if self.inventory.take_aggregates_changed() {
            self.schedule_recut(now);
        }
        self.schedule_inventory_flush(now);
    }

    /// Agent children that are disconnected and not yet lost, with since
    /// when (Unix milliseconds).
    fn lost_candidates(&self) -> Vec<(String, u64)> {
        self.inventory
            .direct_children()
            .into_iter()
            .filter_map(|child| {
                let record = self.inventory.record(&child)?;
                let link = record.link.as_ref()?;
                let candidate = record.role == Role::Agent
                    && !link.connected
                    && !self.links_by_name.contains_key(&child)
                    && !record.labels.contains_key(LOST_LABEL);
                candidate.then_some((child, link.changed_unix_ms))
            })
            .collect()
    }
}
