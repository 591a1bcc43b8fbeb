//! The edge agent's own metrics, beside every node's
//! (`relaymesh_node::metrics`): how long applying a placement takes, and
//! how often it fails.

use std::sync::LazyLock;

use prometheus::{Histogram, IntCounter};
use relaymesh_node::metrics::{exponential, histogram};

/// Time to apply one placement to the cluster: every object by server-side
/// apply, and the pruning of what it no longer holds.
pub static APPLY: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "relaymesh_agent_apply_seconds",
        "Time to apply one placement's objects to the cluster, pruning included.",
        exponential(0.005, 2.0, 14),
    )
});

/// Objects the cluster refused or failed to apply, and applies that could
/// not reach it.
pub static APPLY_ERRORS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "relaymesh_agent_apply_errors_total",
        "Objects the cluster failed to apply, and placement applies that failed as a whole.",
    )
});

/// Placement applies done.
pub static APPLIES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "relaymesh_agent_applies_total",
        "Placement applies done, successful or not.",
    )
});

/// Registers the agent's metrics, so they are served (at zero) before the
/// first apply.
pub fn register() {
    LazyLock::force(&APPLY);
    LazyLock::force(&APPLY_ERRORS);
    LazyLock::force(&APPLIES);
}

fn counter(name: &str, help: &str) -> IntCounter {
    let counter = IntCounter::new(name, help).expect("a constant, valid counter");
    relaymesh_node::metrics::register(Box::new(counter.clone()));
    counter
}
