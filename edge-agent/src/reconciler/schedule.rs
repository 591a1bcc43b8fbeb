//! When a placement gets its next pass: what a pass asks for ([`Action`]),
//! how long a failing one waits ([`backoff`]), and how closely drift may
//! trigger passes ([`DRIFT_SPACING`]).

use std::time::Duration;

/// The first retry after a failure; doubled per failure up to
/// [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The shortest time between two passes of one placement triggered by
/// drift, so a field the cluster normalizes cannot make a hot loop.
pub const DRIFT_SPACING: Duration = Duration::from_millis(500);

/// What to do with a placement after reconciling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long.
    Requeue(Duration),
    /// Reconcile again when something changes.
    AwaitChange,
}

/// The backoff after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    MIN_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
