//! Reconnect delays: exponential backoff with jitter, so that children of a
//! restarted relay do not all dial it in the same instant, and so that a
//! node its parent refuses for what it is (revoked, unknown, expired) stops
//! knocking every few hundred milliseconds.
//!
//! [`Schedule`] decides the uplink's next delay from why the last attempt
//! failed ([`Failure`]); it holds no timer and draws from the random source
//! it is handed, so it is tested without sleeping. Two schedules:
//!
//! | failure | first delay | cap | jitter |
//! |---|---|---|---|
//! | transient (network down, parent restarting, timeout) | up to 200 ms | 15 s | full: uniform in `[0, ceiling]` |
//! | refused as revoked, unknown or expired | 0.5–1 s | 5 min | equal: uniform in `[ceiling/2, ceiling]` |
//!
//! The ceiling doubles with each failure of its kind. Only a welcome from
//! the parent ([`Schedule::admitted`]) resets both; a QUIC handshake alone
//! does not, since a revoked node's handshake succeeds and its control
//! stream is refused. A transient failure between two refusals does not
//! reset the refusal schedule.

use std::fmt;
use std::time::Duration;

use rand::Rng;
use relaymesh_protocol::{ErrorCode, Refusal};

use super::LinkError;

/// The first ceiling of the transient schedule.
pub const TRANSIENT_BASE: Duration = Duration::from_millis(200);
/// The cap of the transient schedule.
pub const TRANSIENT_CAP: Duration = Duration::from_secs(15);
/// The first ceiling of the refusal schedule.
pub const REFUSED_BASE: Duration = Duration::from_secs(1);
/// The cap of the refusal schedule.
pub const REFUSED_CAP: Duration = Duration::from_secs(5 * 60);

/// How a wait is drawn below its ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Uniform in `[0, ceiling]` (the "full jitter" of the AWS architecture
    /// blog's analysis): spreads a crowd of reconnecting children best.
    Full,
    /// Uniform in `[ceiling/2, ceiling]`: still spread, and every wait is
    /// at least half the ceiling, so the attempts thin out steadily.
    Equal,
}

/// Exponential backoff with jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    jitter: Jitter,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `base` and never above `cap`, with full jitter.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self::with_jitter(base, cap, Jitter::Full)
    }

    /// Backoff starting at `base`, never above `cap`, drawn by `jitter`.
    pub fn with_jitter(base: Duration, cap: Duration, jitter: Jitter) -> Self {
        Self {
            base,
            cap,
            jitter,
            attempt: 0,
        }
    }

    /// The ceiling of the next wait, before jitter.
    pub fn ceiling(&self) -> Duration {
        self.base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.cap)
    }

    /// The next wait, drawn below the ceiling; the ceiling doubles each time.
    pub fn next_delay(&mut self) -> Duration {
        self.next_delay_with(&mut rand::thread_rng())
    }

    /// [`Backoff::next_delay`], drawn from `rng`.
    pub fn next_delay_with(&mut self, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling().as_millis() as u64;
        self.attempt = self.attempt.saturating_add(1);
        let floor = match self.jitter {
            Jitter::Full => 0,
            Jitter::Equal => ceiling / 2,
        };
        Duration::from_millis(rng.gen_range(floor..=ceiling))
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(TRANSIENT_BASE, TRANSIENT_CAP)
    }
}

/// Why the last attempt to hold a link to the parent failed, as far as the
/// next delay cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Anything that may heal by itself soon: the network, a parent
    /// restarting or overloaded, a timeout, a link dropped on purpose.
    Transient,
    /// The parent refused this node for what it is; dialing again soon
    /// would be refused again.
    Refused(Refused),
}

/// What a parent refused a node as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The root revoked the node (the `Revoked` refusal on a stream, or
    /// TLS `certificate_revoked`).
    Revoked,
    /// The parent does not know or accept the node: a certificate it did
    /// not issue (`Forbidden`), none (`Unauthenticated`), or one TLS
    /// refuses (`unknown_ca`, `bad_certificate`, `certificate_unknown`,
    /// `unsupported_certificate`, `access_denied`, `certificate_required`).
    Unknown,
    /// The node's certificate is past (or before) its validity at the
    /// parent: TLS `certificate_expired`, or a `CertificateExpired`
    /// refusal past the parent's grace period. Only a new join token helps.
    Expired,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Revoked => "revoked",
            Self::Unknown => "unknown",
            Self::Expired => "expired",
        })
    }
}

impl Failure {
    /// The failure a parent's refusal on a stream means.
    pub fn of_refusal(refusal: &Refusal) -> Self {
        match refusal.code {
            ErrorCode::Revoked => Self::Refused(Refused::Revoked),
            ErrorCode::Forbidden | ErrorCode::Unauthenticated => Self::Refused(Refused::Unknown),
            ErrorCode::CertificateExpired => Self::Refused(Refused::Expired),
            _ => Self::Transient,
        }
    }

    /// The failure a dial or link error means: a refusal on a stream, or
    /// a TLS alert the parent closed the handshake with. An alert this node
    /// raised itself (it refused the parent's certificate) is transient: the
    /// parent did not refuse anything.
    pub fn of_link_error(error: &LinkError) -> Self {
        match error {
            LinkError::Refused(refusal) => Self::of_refusal(refusal),
            LinkError::Connection(error) => Self::of_connection_error(error),
            _ => Self::Transient,
        }
    }

    /// The failure a QUIC connection error means (see
    /// [`Failure::of_link_error`]).
    pub fn of_connection_error(error: &quinn::ConnectionError) -> Self {
        let quinn::ConnectionError::ConnectionClosed(close) = error else {
            return Self::Transient;
        };
        let code = u64::from(close.error_code);
        // QUIC carries a TLS alert as 0x100 + its code (RFC 9001, 4.8).
        if !(0x100..=0x1ff).contains(&code) {
            return Self::Transient;
        }
        use rustls::AlertDescription as Alert;
        match Alert::from((code - 0x100) as u8) {
            Alert::CertificateRevoked => Self::Refused(Refused::Revoked),
            Alert::CertificateExpired => Self::Refused(Refused::Expired),
            Alert::UnknownCA
            | Alert::BadCertificate
            | Alert::CertificateUnknown
            | Alert::UnsupportedCertificate
            | Alert::AccessDenied
            | Alert::CertificateRequired => Self::Refused(Refused::Unknown),
            _ => Self::Transient,
        }
    }
}

/// The uplink's reconnect schedule: a transient and a refusal backoff (see
/// the module's table).
#[derive(Debug, Clone)]
pub struct Schedule {
    transient: Backoff,
    refused: Backoff,
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            transient: Backoff::default(),
            refused: Backoff::with_jitter(REFUSED_BASE, REFUSED_CAP, Jitter::Equal),
        }
    }
}

impl Schedule {
    /// The parent welcomed this node: both schedules start over.
    pub fn admitted(&mut self) {
        self.transient.reset();
        self.refused.reset();
    }

    /// The wait before the next dial after `failure`.
    pub fn next_delay(&mut self, failure: Failure) -> Duration {
        self.next_delay_with(failure, &mut rand::thread_rng())
    }

    /// [`Schedule::next_delay`], drawn from `rng`.
    pub fn next_delay_with(&mut self, failure: Failure, rng: &mut impl Rng) -> Duration {
        match failure {
            Failure::Transient => self.transient.next_delay_with(rng),
            Failure::Refused(_) => self.refused.next_delay_with(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

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

    const REVOKED: Failure = Failure::Refused(Refused::Revoked);

    /// The delays of `n` failures of one kind in a row.
    fn delays(schedule: &mut Schedule, failure: Failure, n: usize, rng: &mut StdRng) -> Vec<u64> {
        (0..n)
            .map(|_| schedule.next_delay_with(failure, rng).as_millis() as u64)
            .collect()
    }

    #[test]
    fn refusals_back_off_to_minutes_and_grow_every_time() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut schedule = Schedule::default();
        let refused = delays(&mut schedule, REVOKED, 14, &mut rng);
        // Ceilings 1 s, 2 s, 4 s … 256 s, then the 300 s cap: every delay
        // is at least half its ceiling.
        let ceilings = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300, 300];
        for (delay, ceiling) in refused.iter().zip(ceilings) {
            let ceiling = ceiling * 1000;
            assert!(
                (ceiling / 2..=ceiling).contains(delay),
                "{delay} ms outside [{}, {ceiling}]: {refused:?}",
                ceiling / 2
            );
        }
        assert!(refused[4] >= 8_000, "the fifth refusal waits 8 s at least");
        assert!(refused[9..].iter().all(|delay| *delay >= 150_000));
        assert!(refused.iter().all(|delay| *delay <= 300_000));
    }

    #[test]
    fn a_welcome_resets_the_refusal_schedule() {
        let mut rng = StdRng::seed_from_u64(8);
        let mut schedule = Schedule::default();
        delays(&mut schedule, REVOKED, 10, &mut rng);
        schedule.admitted();
        let again = schedule.next_delay_with(REVOKED, &mut rng);
        assert!(again <= REFUSED_BASE, "{again:?}");
    }

    #[test]
    fn transient_failures_keep_the_short_schedule_beside_refusals() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut schedule = Schedule::default();
        delays(&mut schedule, REVOKED, 6, &mut rng);
        // A network failure amid refusals: still the short schedule.
        let transient = delays(&mut schedule, Failure::Transient, 12, &mut rng);
        assert!(transient[0] <= 200, "{transient:?}");
        assert!(
            transient.iter().all(|delay| *delay <= 15_000),
            "{transient:?}"
        );
        // …and the refusals go on where they were (the seventh: 32–64 s).
        let seventh = schedule.next_delay_with(REVOKED, &mut rng);
        assert!(seventh >= Duration::from_secs(32), "{seventh:?}");
        // A welcome resets the transient schedule too.
        schedule.admitted();
        let after = schedule.next_delay_with(Failure::Transient, &mut rng);
        assert!(after <= TRANSIENT_BASE, "{after:?}");
    }

    #[test]
    fn refusals_are_told_apart_from_transient_failures() {
        let refused = |code| Failure::of_refusal(&Refusal::new(code, "why"));
        assert_eq!(refused(ErrorCode::Revoked), REVOKED);
        assert_eq!(
            refused(ErrorCode::Forbidden),
            Failure::Refused(Refused::Unknown)
        );
        assert_eq!(
            refused(ErrorCode::Unauthenticated),
            Failure::Refused(Refused::Unknown)
        );
        for transient in [
            ErrorCode::Unavailable,
            ErrorCode::Moved,
            ErrorCode::Internal,
            ErrorCode::Malformed,
        ] {
            assert_eq!(refused(transient), Failure::Transient, "{transient}");
        }
        let link = LinkError::Refused(Refusal::new(ErrorCode::Revoked, "gone"));
        assert_eq!(Failure::of_link_error(&link), REVOKED);
        let timeout = LinkError::Timeout(Duration::from_secs(5));
        assert_eq!(Failure::of_link_error(&timeout), Failure::Transient);
    }

    fn closed_by_peer(code: quinn_proto::TransportErrorCode) -> quinn::ConnectionError {
        quinn::ConnectionError::ConnectionClosed(quinn_proto::ConnectionClose {
            error_code: code,
            frame_type: None,
            reason: bytes::Bytes::new(),
        })
    }

    #[test]
    fn tls_alerts_from_the_parent_are_refusals() {
        let alert = |alert: rustls::AlertDescription| {
            let code = quinn_proto::TransportErrorCode::crypto(u8::from(alert));
            Failure::of_link_error(&LinkError::Connection(closed_by_peer(code)))
        };
        use rustls::AlertDescription as Alert;
        assert_eq!(
            alert(Alert::CertificateExpired),
            Failure::Refused(Refused::Expired)
        );
        assert_eq!(alert(Alert::CertificateRevoked), REVOKED);
        assert_eq!(alert(Alert::UnknownCA), Failure::Refused(Refused::Unknown));
        assert_eq!(
            alert(Alert::BadCertificate),
            Failure::Refused(Refused::Unknown)
        );
        assert_eq!(alert(Alert::HandshakeFailure), Failure::Transient);
        // Not an alert: a parent that went away.
        let gone = closed_by_peer(quinn_proto::TransportErrorCode::PROTOCOL_VIOLATION);
        assert_eq!(Failure::of_connection_error(&gone), Failure::Transient);
        assert_eq!(
            Failure::of_connection_error(&quinn::ConnectionError::TimedOut),
            Failure::Transient
        );
        assert_eq!(
            Failure::of_connection_error(&quinn::ConnectionError::LocallyClosed),
            Failure::Transient
        );
    }
}
