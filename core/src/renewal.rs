//! When this node renews its certificate, decided here and executed by the
//! driver (which asks the parent, or signs at the root):
//!
//! - two thirds of the time the certificate has left, counted from when it
//!   was installed, so a node that restarts late in a certificate's life
//!   still renews before it ends;
//! - after a failure, again within a minute (sooner when little is left);
//! - at once when the relays above changed, and once more after an answer
//!   that was asked for before the change;
//! - a relay's own server certificate (which its children check) is signed
//!   anew at least once a day, even while it cannot renew its own.
//!
//! The driver is told with [`crate::Action::RenewCertificate`] and answers
//! with one of [`Renewal::asked`], [`Renewal::retry`] or
//! [`Renewal::installed`].

use std::time::{Duration, Instant};

use crate::Now;

/// How soon a failed renewal is tried again, at most.
pub const RETRY: Duration = Duration::from_secs(60);

/// How often a relay signs itself a new server certificate.
pub const SERVER_CERT_REFRESH: Duration = Duration::from_secs(24 * 60 * 60);

/// The renewal schedule of one node.
#[derive(Debug, Default)]
pub struct Renewal {
    /// When to renew next; `None` while the driver executes a renewal, and
    /// before the first certificate is installed.
    due: Option<Instant>,
    /// A request is on its way to the parent.
    asking: bool,
    /// A renewal was asked for while one was on its way: its answer may
    /// come from before the change, so ask again after it.
    again: bool,
    /// When the current certificate ends (Unix seconds).
    expires_unix: u64,
    /// When the server certificate was last signed.
    server_signed: Option<Instant>,
}

impl Renewal {
    /// A certificate ending at `expires_unix` is in use from `now` (a
    /// renewal, a move's join, a new trust, or the start): renew at two
    /// thirds of the time it has left, or at once if that was asked for
    /// while it was on its way.
    pub fn installed(&mut self, now: Now, expires_unix: u64) {
        self.expires_unix = expires_unix;
        let wait = Duration::from_secs(self.left(now) / 3 * 2).max(Duration::from_secs(1));
        // A certificate valid past what a clock can count is never renewed.
        self.due = now.instant.checked_add(wait);
        if std::mem::take(&mut self.again) {
            self.due = Some(now.instant);
        }
    }

    /// Renew at once; if a request is on its way, once more after it.
    pub fn renew_now(&mut self, now: Now) {
        if self.asking {
            self.again = true;
        } else {
            self.due = Some(now.instant);
        }
    }

    /// Renew at once with what the node asks for now (a new parent to sign
    /// it), whatever is on its way.
    pub fn due_now(&mut self, now: Now) {
        self.due = Some(now.instant);
    }

    /// The driver sent a request to the parent; nothing is due until it is
    /// answered.
    pub fn asked(&mut self) {
        self.asking = true;
        self.due = None;
    }

    /// The parent answered (the driver then installs the certificate, or
    /// retries).
    pub fn answered(&mut self) {
        self.asking = false;
    }

    /// The renewal failed or could not be asked: again within [`RETRY`]
    /// (a tenth of the time left, if less), or at once if `now_again` or
    /// if a renewal was asked for while this one was on its way.
    pub fn retry(&mut self, now: Now, now_again: bool) {
        let again = std::mem::take(&mut self.again) || now_again;
        let wait = RETRY.min(Duration::from_secs(self.left(now) / 10).max(Duration::from_secs(1)));
        self.due = Some(if again {
            now.instant
        } else {
            now.instant + wait
        });
    }

    /// The server certificate was signed at `now`.
    pub fn server_signed(&mut self, now: Now) {
        self.server_signed = Some(now.instant);
    }

    /// When the core should start a renewal.
    pub fn deadline(&self) -> Option<Instant> {
        if self.asking {
            None
        } else {
            self.due
        }
    }

    /// Starts the renewal due at `now`, if one is: whether the server
    /// certificate is to be signed anew too.
    pub(crate) fn start(&mut self, now: Now) -> Option<bool> {
        if self.deadline().is_none_or(|due| due > now.instant) {
            return None;
        }
        self.due = None;
        Some(
            self.server_signed
                .is_none_or(|signed| now.instant.duration_since(signed) >= SERVER_CERT_REFRESH),
        )
    }

    fn left(&self, now: Now) -> u64 {
        self.expires_unix.saturating_sub(now.unix_ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, seconds: u64) -> Now {
        Now {
            instant: start + Duration::from_secs(seconds),
            unix_ms: 1_000_000_000 + seconds * 1000,
        }
    }

    #[test]
    fn renews_at_two_thirds_of_the_time_left_and_retries_within_a_minute() {
        let start = Instant::now();
        let mut renewal = Renewal::default();
        assert_eq!(renewal.deadline(), None, "nothing before a certificate");
        renewal.installed(at(start, 0), 1_000_000 + 3_000);
        renewal.server_signed(at(start, 0));
        assert_eq!(renewal.deadline(), Some(start + Duration::from_secs(2_000)));
        assert_eq!(renewal.start(at(start, 1_999)), None);
        assert_eq!(renewal.start(at(start, 2_000)), Some(false));
        assert_eq!(renewal.deadline(), None, "started: the driver answers");
        renewal.asked();
        renewal.answered();
        renewal.retry(at(start, 2_000), false);
        assert_eq!(renewal.deadline(), Some(start + Duration::from_secs(2_060)));
        // 200 s left: a tenth of it.
        renewal.retry(at(start, 2_800), false);
        assert_eq!(renewal.deadline(), Some(start + Duration::from_secs(2_820)));
    }

    #[test]
    fn a_change_while_asking_renews_again_after_the_answer() {
        let start = Instant::now();
        let mut renewal = Renewal::default();
        renewal.installed(at(start, 0), 1_000_000 + 3_000);
        assert!(renewal.start(at(start, 2_000)).is_some());
        renewal.asked();
        renewal.renew_now(at(start, 2_001));
        assert_eq!(renewal.deadline(), None, "one request at a time");
        renewal.answered();
        renewal.installed(at(start, 2_002), 1_000_000 + 9_000);
        assert_eq!(
            renewal.deadline(),
            Some(start + Duration::from_secs(2_002)),
            "asked again at once"
        );
        renewal.installed(at(start, 2_003), 1_000_000 + 9_000);
        assert_eq!(
            renewal.deadline(),
            Some(start + Duration::from_secs(2_003 + 4_664)),
            "then two thirds of what is left"
        );
    }

    #[test]
    fn the_server_certificate_is_signed_anew_once_a_day() {
        let start = Instant::now();
        let mut renewal = Renewal::default();
        renewal.installed(at(start, 0), 1_000_000 + 10 * 86_400);
        renewal.server_signed(at(start, 0));
        renewal.due_now(at(start, 86_399));
        assert_eq!(renewal.start(at(start, 86_399)), Some(false));
        renewal.retry(at(start, 86_399), false);
        assert_eq!(renewal.start(at(start, 86_459)), Some(true));
    }
}
