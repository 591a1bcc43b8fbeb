//! What the loop keeps for the metrics endpoint (`--metrics-listen`): how
//! often each link reconnected and when a status change started waiting,
//! and the [`NodeSnapshot`] it publishes each second. A daemon without the
//! endpoint keeps none of it (the testbed's hollow agents run by the
//! thousand).

use std::collections::BTreeMap;
use std::time::Instant;

use relaymesh_protocol::message::UpMessage;

use super::Daemon;
use crate::metrics::{self, LinkSample, NodeSnapshot};
use crate::pki;

/// The loop's own counts for the metrics.
#[derive(Debug, Default)]
pub(super) struct MetricsSampler {
    /// Connections per child name since start.
    child_connects: BTreeMap<String, u64>,
    /// The parent's name and connections to it since start.
    parent: Option<(String, u64)>,
    /// The status version last seen, and since when a change of it waits
    /// to be sent up.
    status: (u64, Option<Instant>),
}

impl MetricsSampler {
    pub(super) fn child_connected(&mut self, name: &str) {
        *self.child_connects.entry(name.to_string()).or_default() += 1;
    }

    pub(super) fn parent_connected(&mut self, name: &str) {
        match &mut self.parent {
            Some((parent, connects)) if parent == name => *connects += 1,
            _ => self.parent = Some((name.to_string(), 1)),
        }
    }

    /// Notes the core's status version after an event: a change starts the
    /// wait that [`Self::sent_up`] ends.
    pub(super) fn status_version(&mut self, version: u64) {
        if self.status.0 != version {
            self.status.0 = version;
            self.status.1.get_or_insert_with(Instant::now);
        }
    }

    /// A message left for the parent: a status update ends the wait.
    pub(super) fn sent_up(&mut self, message: &UpMessage) {
        if let (UpMessage::Status(_), Some(since)) = (message, self.status.1.take()) {
            metrics::STATUS_DELAY.observe(since.elapsed().as_secs_f64());
        }
    }
}

impl Daemon {
    /// Publishes what the node's state says now for the next scrape.
    pub(super) fn publish_metrics(&self) {
        let Some(sampler) = &self.metrics else {
            return;
        };
        let own = self.core.own_record();
        let mut links: Vec<LinkSample> = self
            .core
            .child_links()
            .into_iter()
            .map(|(child, link)| LinkSample {
                reconnects: reconnects(sampler.child_connects.get(&child).copied()),
                peer: child,
                direction: "child",
                up: link.connected,
                rtt_seconds: link.rtt_micros as f64 / 1e6,
                sent_bytes: link.bytes_sent,
                received_bytes: link.bytes_received,
                bundles_served: link.bundles_served,
                bundle_served_bytes: link.bundle_bytes_served,
            })
            .collect();
        if let Some((name, connects)) = &sampler.parent {
            let connection = self.parent.as_ref().map(|parent| &parent.connection);
            let stats = connection.map(|connection| connection.stats());
            links.push(LinkSample {
                peer: name.clone(),
                direction: "parent",
                up: connection.is_some(),
                rtt_seconds: connection.map_or(0.0, |c| c.rtt().as_secs_f64()),
                sent_bytes: stats.as_ref().map_or(0, |s| s.udp_tx.bytes),
                received_bytes: stats.as_ref().map_or(0, |s| s.udp_rx.bytes),
                reconnects: reconnects(Some(*connects)),
                ..LinkSample::default()
            });
        }
        let bundles = self.store.bundle_sizes().unwrap_or_default();
        let identity = self.shared.identity.get();
        let certificate_expiry = [
            ("node", identity.tls_chain_der.first()),
            ("ca", Some(&identity.ca_cert_der)),
        ]
        .into_iter()
        .filter_map(|(which, der)| Some((which.to_string(), pki::leaf_not_after(der?).ok()?)))
        .collect();
        metrics::publish(NodeSnapshot {
            links,
            slice_entries: self.core.entries().count() as u64,
            slice_revision: self.core.head(),
            bundles_stored: bundles.len() as u64,
            bundles_stored_bytes: bundles.iter().map(|(_, size)| size).sum(),
            store_size_bytes: self.store.size_on_disk().unwrap_or_default(),
            integrity_alarms: own.refused_entries,
            limit_refusals: own.limit_refusals.clone(),
            certificate_expiry,
        });
    }
}

/// Connections after the first.
fn reconnects(connects: Option<u64>) -> u64 {
    connects.unwrap_or_default().saturating_sub(1)
}
