//! Virtual time: a fixed base instant and how far the simulation has moved
//! on from it.

use std::time::{Duration, Instant};

use crate::Now;

/// Wall-clock milliseconds at the simulation's start (in 2027), so the
/// timestamps cores write look like real ones.
const START_UNIX_MS: u64 = 1_800_000_000_000;

#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    start: Instant,
    elapsed: Duration,
}

impl Clock {
    /// A clock at zero. `Instant` has no fixed origin, so the base is read
    /// once; nothing the cores decide depends on it, only on differences.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            elapsed: Duration::ZERO,
        }
    }

    pub fn now(&self) -> Now {
        let millis = u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX);
        Now {
            instant: self.start + self.elapsed,
            unix_ms: START_UNIX_MS.saturating_add(millis),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    pub fn advance(&mut self, by: Duration) {
        self.elapsed += by;
    }
}
