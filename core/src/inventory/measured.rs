//! What a relay measures of its direct children's links (RTT, bytes, the
//! revision each acknowledged, its lag): kept here and shown by this relay,
//! never sent up (see the module documentation of `inventory`).

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::{LinkStatus, NodeRecord};

use super::Inventory;

impl Inventory {
    /// [`Inventory::take_touched`] for [`Inventory::measured`].
    pub fn take_measured_touched(&mut self) -> Option<BTreeSet<String>> {
        self.measured_touched.take()
    }

    /// What this relay measured of its direct children's links, by child
    /// (`connected` and `changed_unix_ms` are the records'; see
    /// [`Inventory::all`]).
    pub fn measured(&self) -> &BTreeMap<String, LinkStatus> {
        &self.measured
    }

    /// Changes whenever [`Inventory::measured`] does.
    pub fn measured_version(&self) -> u64 {
        self.measured_version
    }

    /// This relay's record and every record below it, its direct children's
    /// with what this relay measured of their links.
    pub fn all_measured(&self) -> impl Iterator<Item = NodeRecord> + '_ {
        self.all().map(|record| self.with_measured(record))
    }

    /// The link of `name`, with this relay's measurements of it if it is a
    /// direct child.
    pub fn measured_link(&self, name: &str) -> Option<LinkStatus> {
        self.with_measured(self.record(name)?).link
    }

    /// `record`, with the measurements of its link if it is a direct child.
    fn with_measured(&self, record: &NodeRecord) -> NodeRecord {
        let mut record = record.clone();
        if let (Some(measured), Some(link)) = (self.measured.get(&record.name), &mut record.link) {
            link.rtt_micros = measured.rtt_micros;
            link.bytes_sent = measured.bytes_sent;
            link.bytes_received = measured.bytes_received;
            link.acked_revision = measured.acked_revision;
            link.revision_lag = measured.revision_lag;
        }
        record
    }

    /// Updates what the transport measured of a direct child's link (RTT,
    /// bytes, acknowledged revision, lag). Kept here: neither persisted nor
    /// sent up.
    pub fn child_measured(&mut self, child: &str, update: impl FnOnce(&mut LinkStatus)) {
        if self.nodes.get(child).is_none_or(|(_, via)| via != child) {
            return;
        }
        // Every child is measured once a second: a known one costs no
        // allocation (its name is copied only when first measured).
        let changed = match self.measured.get_mut(child) {
            Some(measured) => {
                let before = measured.clone();
                update(measured);
                *measured != before
            }
            None => {
                let mut measured = LinkStatus::default();
                update(&mut measured);
                self.measured.insert(child.to_string(), measured);
                true
            }
        };
        if changed {
            self.measured_version += 1;
            self.measured_touched.note(child);
        }
    }
}

/// The part of a link's status that goes up the tree: connectivity and
/// bundle transfers, never the per-second measurements.
pub(super) fn reported_part(link: &LinkStatus) -> LinkStatus {
    LinkStatus {
        connected: link.connected,
        changed_unix_ms: link.changed_unix_ms,
        bundles_served: link.bundles_served,
        bundle_bytes_served: link.bundle_bytes_served,
        ..LinkStatus::default()
    }
}
