//! How often the listener logs that it refused a peer: the first refusal of
//! a peer for a reason at once, then at most one line per peer and reason
//! per interval, saying how many refusals it stands for.
//!
//! A refused node (a revoked relay, an agent with an expired certificate)
//! keeps dialing; without this, its parent wrote a WARN per attempt. The
//! map is keyed by what the peer claims (its certificate's name, or its
//! address when it has none that TLS accepted) and the refusal's reason,
//! and holds at most [`RefusalLog::new`]'s `capacity` entries: when full,
//! the entry logged longest ago is forgotten, so a peer cycling names grows
//! nothing (a forgotten peer's next refusal is logged as a first one).
//!
//! No IO and no clock: the caller hands in `now`.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How long the listener stays quiet about a refused peer after a line,
/// unless `relay run --refusal-log-interval` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// How many peers and reasons the listener remembers.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Whether to log a refusal, and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The first refusal of this peer for this reason (or the first since
    /// it was forgotten): log it.
    First,
    /// The interval passed since the last line: log one standing for
    /// `times` refusals (this one included) over `over`.
    Again {
        /// Refusals since the last line, this one included.
        times: u64,
        /// Time since the last line.
        over: Duration,
    },
    /// Within the interval: counted, not logged.
    Quiet,
}

/// What was last logged of one peer and reason.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// When the last line was written.
    logged: Instant,
    /// A tie-breaker for entries logged at the same instant.
    serial: u64,
    /// Refusals since then, not logged.
    quiet: u64,
}

/// The refusals logged lately, per peer and reason.
#[derive(Debug)]
pub struct RefusalLog {
    interval: Duration,
    capacity: usize,
    entries: HashMap<(String, String), Entry>,
    /// The entries by when they were last logged: the oldest is forgotten
    /// first.
    by_age: BTreeSet<(Instant, u64, (String, String))>,
    next_serial: u64,
}

impl RefusalLog {
    /// A log writing at most one line per peer and reason per `interval`,
    /// remembering at most `capacity` (at least one) of them.
    pub fn new(interval: Duration, capacity: usize) -> Self {
        Self {
            interval,
            capacity: capacity.max(1),
            entries: HashMap::new(),
            by_age: BTreeSet::new(),
            next_serial: 0,
        }
    }

    /// `peer` was refused for `reason` at `now`: whether to log it.
    pub fn refused(&mut self, peer: &str, reason: &str, now: Instant) -> Line {
        let key = (peer.to_string(), reason.to_string());
        let Some(entry) = self.entries.get_mut(&key) else {
            if self.entries.len() >= self.capacity {
                self.forget_oldest();
            }
            self.insert(key, now);
            return Line::First;
        };
        let since = now.saturating_duration_since(entry.logged);
        if since < self.interval {
            entry.quiet = entry.quiet.saturating_add(1);
            return Line::Quiet;
        }
        let times = entry.quiet.saturating_add(1);
        let old = (entry.logged, entry.serial, key.clone());
        self.by_age.remove(&old);
        self.insert(key, now);
        Line::Again { times, over: since }
    }

    /// How many peers and reasons are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn insert(&mut self, key: (String, String), now: Instant) {
        let serial = self.next_serial;
        self.next_serial += 1;
        self.by_age.insert((now, serial, key.clone()));
        self.entries.insert(
            key,
            Entry {
                logged: now,
                serial,
                quiet: 0,
            },
        );
    }

    fn forget_oldest(&mut self) {
        if let Some((_, _, key)) = self.by_age.pop_first() {
            self.entries.remove(&key);
        }
    }
}

impl Default for RefusalLog {
    fn default() -> Self {
        Self::new(DEFAULT_INTERVAL, DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn refusals_within_an_interval_make_one_line_then_a_count() {
        let mut log = RefusalLog::new(MINUTE, 16);
        let start = Instant::now();
        assert_eq!(log.refused("eu", "revoked", start), Line::First);
        // Ten attempts a second for the rest of the minute: all quiet.
        let quiet = (1..600)
            .map(|tenth| log.refused("eu", "revoked", start + Duration::from_millis(100 * tenth)))
            .filter(|line| *line == Line::Quiet)
            .count();
        assert_eq!(quiet, 599);
        assert_eq!(
            log.refused("eu", "revoked", start + MINUTE),
            Line::Again {
                times: 600,
                over: MINUTE
            }
        );
        // The count starts over from that line.
        let later = start + MINUTE + Duration::from_secs(1);
        assert_eq!(log.refused("eu", "revoked", later), Line::Quiet);
        assert_eq!(
            log.refused("eu", "revoked", start + 3 * MINUTE),
            Line::Again {
                times: 2,
                over: 2 * MINUTE
            }
        );
    }

    #[test]
    fn each_peer_and_reason_has_its_own_line() {
        let mut log = RefusalLog::new(MINUTE, 16);
        let now = Instant::now();
        assert_eq!(log.refused("eu", "revoked", now), Line::First);
        assert_eq!(log.refused("us", "revoked", now), Line::First);
        assert_eq!(log.refused("eu", "forbidden", now), Line::First);
        assert_eq!(log.refused("eu", "revoked", now), Line::Quiet);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn the_map_stays_bounded_and_forgets_the_oldest() {
        let mut log = RefusalLog::new(MINUTE, 100);
        let start = Instant::now();
        assert_eq!(log.refused("old", "revoked", start), Line::First);
        for n in 0..10_000u64 {
            let at = start + Duration::from_millis(n + 1);
            assert_eq!(
                log.refused(&format!("node-{n}"), "revoked", at),
                Line::First
            );
            assert!(log.len() <= 100);
        }
        assert_eq!(log.len(), 100);
        assert_eq!(log.by_age.len(), 100);
        // "old" was forgotten: its next refusal is a first line again,
        // while one of the newest is still remembered.
        let now = start + Duration::from_secs(11);
        assert_eq!(log.refused("node-9999", "revoked", now), Line::Quiet);
        assert_eq!(log.refused("old", "revoked", now), Line::First);
        assert_eq!(log.len(), 100);
    }

    #[test]
    fn a_line_moves_a_peer_to_the_newest() {
        let mut log = RefusalLog::new(Duration::from_secs(1), 2);
        let start = Instant::now();
        log.refused("a", "revoked", start);
        log.refused("b", "revoked", start + Duration::from_millis(10));
        // a logs again, so b is now the oldest and goes first.
        assert!(matches!(
            log.refused("a", "revoked", start + Duration::from_secs(2)),
            Line::Again { times: 1, .. }
        ));
        log.refused("c", "revoked", start + Duration::from_secs(2));
        assert_eq!(
            log.refused("a", "revoked", start + Duration::from_millis(2500)),
            Line::Quiet
        );
        assert_eq!(
            log.refused("b", "revoked", start + Duration::from_millis(2500)),
            Line::First
        );
    }
}
