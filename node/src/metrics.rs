//! Prometheus metrics: one registry per process, served on
//! `--metrics-listen` in the classic text format (docs/metrics.md lists
//! every metric).
//!
//! The registry is global because a process runs one node (a relay, the
//! root or an edge agent), as Prometheus's own clients assume; the
//! testbed's hollow agents share it, and nothing serves theirs. Names
//! follow Prometheus's conventions: the `relaymesh_` prefix, base units
//! (seconds, bytes), `_total` on counters. Labels stay bounded: a node
//! labels only its own links by peer, and the root never labels by
//! cluster.

mod args;
mod instruments;
mod serve;
mod snapshot;

use std::sync::LazyLock;

use prometheus::{Encoder as _, Registry, TextEncoder};

pub use args::MetricsArgs;
pub use instruments::{exponential, histogram, STATUS_DELAY, STORE_FLUSH};
pub use serve::{serve, MetricsError, CONTENT_TYPE};
pub use snapshot::{publish, LinkSample, NodeSnapshot};

/// The process's registry: every relaymesh metric is registered here.
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let registry = Registry::new();
        // The sampled families (links, slice, store, certificates) come
        // from the snapshot the daemon publishes; registering twice is the
        // only way this fails, and this runs once.
        let _ = registry.register(Box::new(snapshot::SnapshotCollector));
        registry
    });
    &REGISTRY
}

/// Registers `collector` in the process's registry; a second registration
/// of the same metric (a second node in one process, as in tests) keeps the
/// first and is not an error.
pub fn register(collector: Box<dyn prometheus::core::Collector>) {
    match registry().register(collector) {
        Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
        Err(error) => tracing::error!(%error, "a metric could not be registered"),
    }
}

/// Everything registered, in Prometheus's text format (version 0.0.4).
pub fn encode() -> String {
    let families = registry().gather();
    let mut text = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&families, &mut text) {
        tracing::error!(%error, "metrics could not be encoded");
    }
    String::from_utf8(text).unwrap_or_default()
}
