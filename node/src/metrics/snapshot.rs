//! The metrics sampled from a node's state once a second: its links, its
//! slice, its store, its alarms and its certificates. The daemon's loop
//! publishes a [`NodeSnapshot`]; a scrape encodes the latest one, so a
//! scrape never waits for the loop and the loop never waits for a scrape.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

/// What a node's state says, as of its last sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSnapshot {
    /// The node's own links: to each child, and to its parent.
    pub links: Vec<LinkSample>,
    /// Entries in the node's slice.
    pub slice_entries: u64,
    /// The slice's head revision.
    pub slice_revision: u64,
    /// Bundles in the store.
    pub bundles_stored: u64,
    /// Their bytes.
    pub bundles_stored_bytes: u64,
    /// The store's size on disk.
    pub store_size_bytes: u64,
    /// Slice entries refused for a missing, wrong or stale root signature
    /// since the node started.
    pub integrity_alarms: u64,
    /// Requests refused over a limit since the node started, by limit.
    pub limit_refusals: BTreeMap<String, u64>,
    /// When each certificate the node holds expires (`node`, `ca`), in
    /// seconds since the Unix epoch.
    pub certificate_expiry: BTreeMap<String, u64>,
}

/// One of a node's own links.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSample {
    /// The node at the other end.
    pub peer: String,
    /// `child` or `parent`.
    pub direction: &'static str,
    /// Connected now.
    pub up: bool,
    /// The smoothed round-trip time, in seconds.
    pub rtt_seconds: f64,
    /// Bytes sent on the connection open now (zero while down).
    pub sent_bytes: u64,
    /// Bytes received on it.
    pub received_bytes: u64,
    /// Connections after the first since this node started.
    pub reconnects: u64,
    /// Bundle transfers to the peer since this node started (child links).
    pub bundles_served: u64,
    /// Their payload bytes.
    pub bundle_served_bytes: u64,
}

static LATEST: Mutex<Option<NodeSnapshot>> = Mutex::new(None);

/// Makes `snapshot` what the next scrape serves.
pub fn publish(snapshot: NodeSnapshot) {
    if let Ok(mut latest) = LATEST.lock() {
        *latest = Some(snapshot);
    }
}

/// Encodes the latest snapshot at each scrape. It declares no descriptors:
/// its families are its own, and no other collector registers them.
pub(super) struct SnapshotCollector;

impl Collector for SnapshotCollector {
    fn desc(&self) -> Vec<&Desc> {
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(latest) = LATEST.lock() else {
            return Vec::new();
        };
        latest.as_ref().map(families).unwrap_or_default()
    }
}

/// The families of `snapshot`, leaving out the ones without a sample (the
/// text encoder refuses empty families).
fn families(snapshot: &NodeSnapshot) -> Vec<MetricFamily> {
    let link = |sample: &LinkSample| {
        // In name order, as the registry's own metrics print them.
        vec![
            ("direction", sample.direction.to_string()),
            ("peer", sample.peer.clone()),
        ]
    };
    let children = || snapshot.links.iter().filter(|l| l.direction == "child");
    let per_link = |name: &str, help: &str, kind, value: &dyn Fn(&LinkSample) -> f64| {
        family(
            name,
            help,
            kind,
            snapshot.links.iter().map(|l| (link(l), value(l))).collect(),
        )
    };
    let per_child = |name: &str, help: &str, value: &dyn Fn(&LinkSample) -> f64| {
        family(
            name,
            help,
            MetricType::COUNTER,
            children()
                .map(|l| (vec![("peer", l.peer.clone())], value(l)))
                .collect(),
        )
    };
    let single = |name: &str, help: &str, kind, value: u64| {
        family(name, help, kind, vec![(Vec::new(), value as f64)])
    };
    let keyed = |name: &str, help: &str, kind, label: &'static str, map: &BTreeMap<String, u64>| {
        family(
            name,
            help,
            kind,
            map.iter()
                .map(|(key, value)| (vec![(label, key.clone())], *value as f64))
                .collect(),
        )
    };
    use MetricType::{COUNTER, GAUGE};
    [
        per_link("relaymesh_link_up", "Whether the link is connected (1) or not (0).", GAUGE, &|l| f64::from(u8::from(l.up))),
        per_link("relaymesh_link_rtt_seconds", "The link's smoothed round-trip time.", GAUGE, &|l| l.rtt_seconds),
        per_link("relaymesh_link_sent_bytes_total", "Bytes sent on the link's current connection.", COUNTER, &|l| l.sent_bytes as f64),
        per_link("relaymesh_link_received_bytes_total", "Bytes received on the link's current connection.", COUNTER, &|l| l.received_bytes as f64),
        per_link("relaymesh_link_reconnects_total", "Connections of the link after the first since the node started.", COUNTER, &|l| l.reconnects as f64),
        per_child("relaymesh_bundles_served_total", "Bundle transfers to the child since the node started.", &|l| l.bundles_served as f64),
        per_child("relaymesh_bundle_served_bytes_total", "Bundle payload bytes sent to the child since the node started.", &|l| l.bundle_served_bytes as f64),
        single("relaymesh_slice_entries", "Entries in the node's slice.", GAUGE, snapshot.slice_entries),
        single("relaymesh_slice_revision", "The slice's head revision.", GAUGE, snapshot.slice_revision),
        single("relaymesh_bundles_stored", "Bundles in the node's store.", GAUGE, snapshot.bundles_stored),
        single("relaymesh_bundles_stored_bytes", "Bytes of the bundles in the node's store.", GAUGE, snapshot.bundles_stored_bytes),
        single("relaymesh_store_size_bytes", "The store's size on disk.", GAUGE, snapshot.store_size_bytes),
        single("relaymesh_integrity_alarms_total", "Slice entries refused for a missing, wrong or stale root signature since the node started.", COUNTER, snapshot.integrity_alarms),
        keyed("relaymesh_limit_refusals_total", "Requests refused over a limit since the node started.", COUNTER, "limit", &snapshot.limit_refusals),
        keyed("relaymesh_certificate_expiry_timestamp_seconds", "When the certificate expires, in seconds since the Unix epoch.", GAUGE, "certificate", &snapshot.certificate_expiry),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// One family of `kind`, or `None` without samples.
fn family(
    name: &str,
    help: &str,
    kind: MetricType,
    samples: Vec<(Vec<(&str, String)>, f64)>,
) -> Option<MetricFamily> {
    if samples.is_empty() {
        return None;
    }
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    family.set_metric(
        samples
            .into_iter()
            .map(|(labels, value)| sample(kind, labels, value))
            .collect(),
    );
    Some(family)
}

fn sample(kind: MetricType, labels: Vec<(&str, String)>, value: f64) -> Metric {
    let mut metric = Metric::from_label(
        labels
            .into_iter()
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name(name.to_string());
                pair.set_value(value);
                pair
            })
            .collect(),
    );
    if kind == MetricType::COUNTER {
        let mut counter = Counter::default();
        counter.set_value(value);
        metric.set_counter(counter);
    } else {
        let mut gauge = Gauge::default();
        gauge.set_value(value);
        metric.set_gauge(gauge);
    }
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_without_samples_are_left_out() {
        let snapshot = NodeSnapshot::default();
        let names: Vec<String> = families(&snapshot)
            .iter()
            .map(|family| family.name().to_string())
            .collect();
        assert!(names.contains(&"relaymesh_slice_entries".to_string()));
        assert!(!names.contains(&"relaymesh_link_up".to_string()));
        assert!(!names.contains(&"relaymesh_limit_refusals_total".to_string()));
    }

    #[test]
    fn links_are_labelled_by_peer_and_direction() {
        let snapshot = NodeSnapshot {
            links: vec![LinkSample {
                peer: "edge-1".into(),
                direction: "child",
                up: true,
                bundles_served: 3,
                ..LinkSample::default()
            }],
            ..NodeSnapshot::default()
        };
        let mut text = Vec::new();
        prometheus::Encoder::encode(
            &prometheus::TextEncoder::new(),
            &families(&snapshot),
            &mut text,
        )
        .expect("encodes");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(
            text.contains("relaymesh_link_up{direction=\"child\",peer=\"edge-1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("relaymesh_bundles_served_total{peer=\"edge-1\"} 3"),
            "{text}"
        );
    }
}
