//! Which replica of a replicated root is the leader: the one whose lease
//! holds the leader key in etcd. A thread per replica campaigns (tries to
//! take the key every half second) and, once it holds the key,
//! renews the lease every second.
//!
//! - A leader steps down ([`Role::Lost`]) when etcd says its lease ended;
//!   while etcd cannot be reached it keeps trying (see `lead`).
//! - A leader that stops cleanly revokes its lease, so a standby takes over
//!   at once rather than after [`LEASE_TTL_SECS`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relaymesh_apiserver::etcd::Etcd;
use tokio::sync::watch;

/// The key the leader holds, bound to its lease.
pub const LEADER_KEY: &[u8] = b"r/leader";

/// How long a leader's lease lasts without renewal: how long the root's
/// children wait for a new leader after the old one died.
pub const LEASE_TTL_SECS: u64 = 3;

/// How often the leader renews its lease.
const RENEW_EVERY: Duration = Duration::from_millis(1000);

/// How often a standby tries to take the leader key.
const CAMPAIGN_EVERY: Duration = Duration::from_millis(500);

/// Where a replica stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Another replica leads (or none yet).
    Standby,
    /// This replica holds the leader key.
    Leader,
    /// This replica led and lost its lease: it must stop leading now.
    Lost,
}

/// A campaign for the leader key; dropping it ends it (and revokes the
/// lease of a leader).
pub struct Election {
    role: watch::Receiver<Role>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Election {
    /// Starts campaigning as `me`.
    pub fn start(etcd: Etcd, me: String) -> Self {
        let (tx, role) = watch::channel(Role::Standby);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("election".into())
                .spawn(move || campaign(&etcd, &me, &tx, &stop))
                .ok()
        };
        Self { role, stop, thread }
    }

    /// The role's changes.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn campaign(etcd: &Etcd, me: &str, role: &watch::Sender<Role>, stop: &AtomicBool) {
    let span = tracing::info_span!("election", replica = %me);
    let _entered = span.enter();
    while !stop.load(Ordering::Relaxed) {
        let lease = match etcd.grant_lease(LEASE_TTL_SECS) {
            Ok(lease) => lease,
            Err(error) => {
                tracing::warn!(%error, "cannot campaign for the leader key");
                std::thread::sleep(CAMPAIGN_EVERY);
                continue;
            }
        };
        match etcd.claim(LEADER_KEY, me.as_bytes(), lease) {
            Ok(true) => {
                tracing::info!("this replica leads the root");
                let _ = role.send(Role::Leader);
                lead(etcd, lease, stop);
                if stop.load(Ordering::Relaxed) {
                    let _ = etcd.revoke_lease(lease);
                    return;
                }
                tracing::error!("this replica lost the root's leader lease");
                let _ = role.send(Role::Lost);
                return;
            }
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "cannot campaign for the leader key"),
        }
        let _ = etcd.revoke_lease(lease);
        std::thread::sleep(CAMPAIGN_EVERY);
    }
}

/// Renews `lease` until told to stop or until it cannot be renewed in
/// time; a margin of one renewal before the lease's end.
fn lead(etcd: &Etcd, lease: i64, stop: &AtomicBool) {
    let mut renewed = Instant::now();
    let late = Duration::from_secs(LEASE_TTL_SECS);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(RENEW_EVERY / 4);
        if renewed.elapsed() < RENEW_EVERY {
            continue;
        }
        // Only etcd's word ends a leadership: without a quorum no other
        // replica can take the key either, and etcd extends every lease
        // when its quorum returns; a leader cut off alone is refused by
        // the mirror's guarded writes meanwhile.
        match etcd.keep_alive(lease) {
            Ok(0) => return,
            Ok(_) => renewed = Instant::now(),
            Err(error) if renewed.elapsed() >= late => {
                tracing::warn!(%error, "cannot renew the leader lease");
            }
            Err(_) => {}
        }
    }
}
