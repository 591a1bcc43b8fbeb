//! The metrics every node updates where things happen (a flush, a status
//! sent up), as opposed to the ones sampled from the core each second
//! ([`super::snapshot`]).

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts};

/// How long the store took to make a batch of writes durable (sled's flush,
/// and at a replicated root its mirror): the latency every acknowledgement
/// waits for.
pub static STORE_FLUSH: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "relaymesh_store_flush_seconds",
        "Time to make the store's pending writes durable.",
        exponential(0.0005, 2.0, 14),
    )
});

/// How long a change of this node's placement status waited before it was
/// sent to the parent: at an agent from its cluster's change, at a relay
/// from its child's report. A leaf's change reaches the root after the sum
/// of these along its path.
pub static STATUS_DELAY: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "relaymesh_status_delay_seconds",
        "Time from a placement status change at this node to its report to the parent.",
        exponential(0.001, 2.0, 15),
    )
});

/// Registers the node's instruments, so they are served (at zero) before
/// anything happened.
pub(super) fn touch() {
    LazyLock::force(&STORE_FLUSH);
    LazyLock::force(&STATUS_DELAY);
}

/// A histogram registered in the process's registry.
///
/// # Panics
///
/// If `name` or `buckets` are invalid: both are constants of this program.
pub fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    let histogram = Histogram::with_opts(opts).expect("a constant, valid histogram");
    super::register(Box::new(histogram.clone()));
    histogram
}

/// `count` bucket bounds from `start`, each `factor` times the one before.
pub fn exponential(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |bound| Some(bound * factor))
        .take(count)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_grow_by_the_factor() {
        assert_eq!(exponential(0.5, 2.0, 4), vec![0.5, 1.0, 2.0, 4.0]);
    }

    #[test]
    fn observations_are_served() {
        STORE_FLUSH.observe(0.002);
        let text = crate::metrics::encode();
        assert!(text.contains("# TYPE relaymesh_store_flush_seconds histogram"));
        assert!(text.contains("relaymesh_store_flush_seconds_count"));
    }
}
