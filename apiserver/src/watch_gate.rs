//! How many watches are open at once on the whole server, per user and in
//! all, held to the [`WatchLimits`] the extension set ([`WatchGate`]): a
//! watch takes a [`WatchSlot`] before it sends anything and gives it back
//! when it ends, however it ends (timeout, shutdown, a client that went
//! away, a client too slow to keep). The server makes one gate, every
//! connection's context holds it, and watches take slots from it; it
//! imports none of them. No IO here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::limits::{ApiLimit, WatchLimits};

/// Counts the watches open, in all and per user.
#[derive(Debug)]
pub(crate) struct WatchGate {
    limits: WatchLimits,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_user: HashMap<String, usize>,
}

/// A watch's place in the [`WatchGate`], given back when dropped.
#[derive(Debug)]
pub(crate) struct WatchSlot {
    gate: Arc<WatchGate>,
    user: String,
}

/// Why a watch was refused: the limit it would break, and how many were
/// open against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    /// [`ApiLimit::WatchesPerUser`] or [`ApiLimit::Watches`].
    pub(crate) limit: ApiLimit,
    /// The limit's value.
    pub(crate) max: usize,
}

impl WatchGate {
    /// A gate with these limits.
    pub(crate) fn new(limits: WatchLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// A slot for one more watch of `user`, or the limit it would break.
    pub(crate) fn admit(self: &Arc<Self>, user: &str) -> Result<WatchSlot, Refused> {
        let mut open = lock(&self.open);
        let of_user = open.per_user.get(user).copied().unwrap_or(0);
        if of_user >= self.limits.per_user {
            return Err(Refused {
                limit: ApiLimit::WatchesPerUser,
                max: self.limits.per_user,
            });
        }
        if open.total >= self.limits.total {
            return Err(Refused {
                limit: ApiLimit::Watches,
                max: self.limits.total,
            });
        }
        open.total += 1;
        open.per_user.insert(user.to_string(), of_user + 1);
        Ok(WatchSlot {
            gate: self.clone(),
            user: user.to_string(),
        })
    }

    /// Watches open now, in all and of `user`.
    #[cfg(test)]
    pub(crate) fn open(&self, user: &str) -> (usize, usize) {
        let open = lock(&self.open);
        (open.total, open.per_user.get(user).copied().unwrap_or(0))
    }
}

impl WatchSlot {
    /// Whose watch this is.
    pub(crate) fn user(&self) -> &str {
        &self.user
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.gate.open);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_user.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.per_user.remove(&self.user);
            }
        }
    }
}

/// A poisoned lock still holds consistent counts (every update is done
/// under it, without panicking code in between).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_user_gets_their_share_and_others_still_watch() {
        let gate = WatchGate::new(WatchLimits {
            per_user: 2,
            total: 100,
        });
        let held: Vec<_> = (0..2).map(|_| gate.admit("vera")).collect();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(
            gate.admit("vera").err(),
            Some(Refused {
                limit: ApiLimit::WatchesPerUser,
                max: 2
            })
        );
        assert!(gate.admit("otto").is_ok(), "another user is not affected");
        assert_eq!(gate.open("vera"), (2, 2));
        drop(held);
        assert_eq!(gate.open("vera"), (0, 0), "slots come back when dropped");
        assert!(gate.admit("vera").is_ok());
    }

    #[test]
    fn the_total_holds_across_users() {
        let gate = WatchGate::new(WatchLimits {
            per_user: 10,
            total: 2,
        });
        let _a = gate.admit("a");
        let _b = gate.admit("b");
        assert_eq!(
            gate.admit("c").err().map(|refused| refused.limit),
            Some(ApiLimit::Watches)
        );
        drop(_a);
        assert!(gate.admit("c").is_ok());
    }

    #[test]
    fn unlimited_never_refuses() {
        let gate = WatchGate::new(WatchLimits::UNLIMITED);
        let held: Vec<_> = (0..1000).map(|_| gate.admit("agent")).collect();
        assert!(held.iter().all(Result::is_ok));
    }
}
