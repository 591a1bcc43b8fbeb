//! Reconnect delays: exponential backoff with full jitter, so that children
//! of a restarted relay do not all dial it in the same instant.

use std::time::Duration;

use rand::Rng;

/// Exponential backoff with full jitter (the "full jitter" of the AWS
/// architecture blog's analysis: a uniformly random wait up to the cap).
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `base` and never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The ceiling of the next wait, before jitter.
    pub fn ceiling(&self) -> Duration {
        self.base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.cap)
    }

    /// The next wait: uniform in `[0, ceiling]`; the ceiling doubles each time.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let millis = ceiling.as_millis() as u64;
        Duration::from_millis(rand::thread_rng().gen_range(0..=millis))
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(15))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_a_doubling_ceiling() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for expected_ceiling in [100, 200, 400, 800, 1000, 1000] {
            assert_eq!(backoff.ceiling(), Duration::from_millis(expected_ceiling));
            assert!(backoff.next_delay() <= Duration::from_millis(expected_ceiling));
        }
        backoff.reset();
        assert_eq!(backoff.ceiling(), Duration::from_millis(100));
    }

    #[test]
    fn delays_are_spread() {
        let mut delays = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let mut backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(10));
            delays.insert(backoff.next_delay());
        }
        assert!(delays.len() > 10, "jitter spreads reconnects: {delays:?}");
    }
}
