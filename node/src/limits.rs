//! The limits a relay puts on what peers and API clients may ask of it, and
//! the counters of what it refused.
//!
//! Every limit has a name ([`Limit`], spelled as docs/security.md and the
//! `limitRefusals` field of `Relay` objects spell it), a default, a clear
//! error for whoever hit it, and a counter. The counters end up in the
//! node's own inventory record (`NodeRecord::limit_refusals`), which goes up
//! the tree, so the root sees every refusal anywhere.
//!
//! Where each limit is enforced:
//! * connections (in all, and per source address) and joins (in progress,
//!   and per source address): the listener, with the [`ConnectionGate`],
//!   a [`StreamGate`] and the [`JoinRate`] here, before any TLS or token
//!   work;
//! * TLS handshakes at once, from everyone: the listener, with a semaphore
//!   (`daemon/listener.rs`); a connection over the bound waits its turn
//!   for up to [`HANDSHAKE_WAIT`], then is refused;
//! * bundle streams per peer: the listener, with a [`StreamGate`] per
//!   connection (the bound is `protocol::limits::MAX_BUNDLE_STREAMS`);
//! * bundle serves at once, from everyone: the listener, with a semaphore
//!   (`daemon/serving.rs`); serves over it wait rather than being refused;
//! * inventory records and status keys per child: the sans-IO core, which
//!   counts them itself;
//! * request bodies, JSON patches and unpaged lists: the root's API;
//! * API watches (per user and in all) and what one watch may queue for a
//!   client that does not read: the root's API, with the limits set here
//!   (`relaymesh_root::api::watch_limits`).
//!
//! Refusals on the IO side are counted in [`Refusals`], plain atomic
//! counters, and the daemon's loop hands them to the core once a second.
//! An event per refusal would let a flood of refused connections fill the
//! queue the loop's real work goes through; a counter costs nothing.
//!
//! No IO here: the gates take the time they are given, so they are tested
//! without sockets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The connections a relay accepts at once, from everyone.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The connections a relay accepts at once from one source address (one
/// IPv4 address, or one IPv6 /64).
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 64;

/// The joins a relay answers per minute from one source address; as many
/// may come at once.
pub const DEFAULT_JOINS_PER_MINUTE_PER_ADDRESS: u32 = 30;

/// The joins a relay works on at once, from everyone: each checks a
/// signature, signs certificates and flushes the token ledger.
pub const DEFAULT_MAX_CONCURRENT_JOINS: usize = 16;

/// The bundle serves a relay runs at once, from everyone; more wait for
/// one to end (they are queued, not refused).
pub const DEFAULT_MAX_CONCURRENT_BUNDLE_SERVES: usize = 64;

/// The TLS handshakes a relay works on at once, from everyone: each signs
/// with the relay's key and verifies a certificate chain. More wait their
/// turn for up to [`HANDSHAKE_WAIT`].
pub const DEFAULT_MAX_CONCURRENT_HANDSHAKES: usize = 64;

/// How long a new connection waits for a turn at its handshake before it
/// is refused (QUIC `CONNECTION_REFUSED`, counted as `handshakes`): inside
/// the link's idle timeout (15 s), which bounds a handshake, with time left
/// for the handshake itself. A relaymesh child gives up a dial sooner, after
/// 5 s (`transport::uplink::CONNECT_TIMEOUT`), and redials after its
/// backoff; a dial timeout past this wait changed nothing in the storm
/// (docs/performance.md). With 3 s, more children were refused and backed
/// off, and a storm's last ones came later.
pub const HANDSHAKE_WAIT: Duration = Duration::from_secs(6);

/// The API watches one user (a certificate's common name) may have open at
/// once at the root.
pub const DEFAULT_MAX_API_WATCHES_PER_USER: usize = 16;

/// The API watches the root keeps open at once, from everyone.
pub const DEFAULT_MAX_API_WATCHES: usize = 1024;

/// How many idle join buckets are kept before the full ones are forgotten.
const JOIN_BUCKETS_KEPT: usize = 4096;

pub use relaymesh_protocol::limits::Limit;

/// The limits a relay runs with, as `relay run` sets them. The daemon
/// enforces the first four on its links, hands the records and status keys
/// to the core (`CoreConfig`), and the watches to the root's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, from everyone.
    pub max_connections: usize,
    /// Connections open at once from one source address.
    pub max_connections_per_address: usize,
    /// Joins answered per minute from one source address (as many may come
    /// at once).
    pub joins_per_minute_per_address: u32,
    /// Joins worked on at once, from everyone.
    pub max_concurrent_joins: usize,
    /// Inventory records one child may have this relay hold.
    pub max_records_per_child: usize,
    /// Placements one child may report status for.
    pub max_status_keys_per_child: usize,
    /// Bundle serves run at once, from everyone; more wait their turn.
    pub max_concurrent_bundle_serves: usize,
    /// TLS handshakes worked on at once, from everyone; more wait their
    /// turn, for up to [`HANDSHAKE_WAIT`].
    pub max_concurrent_handshakes: usize,
    /// API watches one user may have open at once (the root only).
    pub max_api_watches_per_user: usize,
    /// API watches open at once, from everyone (the root only).
    pub max_api_watches: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            joins_per_minute_per_address: DEFAULT_JOINS_PER_MINUTE_PER_ADDRESS,
            max_concurrent_joins: DEFAULT_MAX_CONCURRENT_JOINS,
            max_records_per_child: relaymesh_core::DEFAULT_MAX_RECORDS_PER_CHILD,
            max_status_keys_per_child: relaymesh_core::DEFAULT_MAX_STATUS_KEYS_PER_CHILD,
            max_concurrent_bundle_serves: DEFAULT_MAX_CONCURRENT_BUNDLE_SERVES,
            max_concurrent_handshakes: DEFAULT_MAX_CONCURRENT_HANDSHAKES,
            max_api_watches_per_user: DEFAULT_MAX_API_WATCHES_PER_USER,
            max_api_watches: DEFAULT_MAX_API_WATCHES,
        }
    }
}

/// Refusals counted since the daemon last took them, per limit.
#[derive(Debug, Default)]
pub struct Refusals {
    counts: [AtomicU64; Limit::ALL.len()],
}

impl Refusals {
    /// Counts one refusal by `limit`.
    pub fn count(&self, limit: Limit) {
        // Saturating: a counter that wrapped would say nothing happened.
        let _ =
            self.counts[index(limit)].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| {
                Some(count.saturating_add(1))
            });
    }

    /// The refusals counted since the last call, resetting them.
    pub fn take(&self) -> Vec<(Limit, u64)> {
        Limit::ALL
            .iter()
            .filter_map(|limit| {
                let count = self.counts[index(*limit)].swap(0, Ordering::Relaxed);
                (count > 0).then_some((*limit, count))
            })
            .collect()
    }
}

/// A limit's position in [`Limit::ALL`], and so its counter's in [`Refusals`].
fn index(limit: Limit) -> usize {
    Limit::ALL
        .iter()
        .position(|each| *each == limit)
        .unwrap_or_default()
}

/// The address limits are counted against: an IPv4 address (also when it
/// arrives IPv4-mapped on an IPv6 socket), or the /64 of an IPv6 address,
/// since one IPv6 host usually holds a whole /64 and could otherwise pick a
/// fresh address per connection.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
    }
}

/// Counts the connections open at once, in all and per source address.
#[derive(Debug)]
pub struct ConnectionGate {
    max_connections: usize,
    max_per_address: usize,
    open: Mutex<OpenConnections>,
}

#[derive(Debug, Default)]
struct OpenConnections {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// A connection's place in the [`ConnectionGate`], given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    gate: Arc<ConnectionGate>,
    source: IpAddr,
}

impl ConnectionGate {
    /// A gate with these limits.
    pub fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(Self {
            max_connections: limits.max_connections,
            max_per_address: limits.max_connections_per_address,
            open: Mutex::new(OpenConnections::default()),
        })
    }

    /// A slot for a new connection from `ip`, or the limit it would break.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Limit> {
        let source = source_of(ip);
        let mut open = lock(&self.open);
        if open.total >= self.max_connections {
            return Err(Limit::Connections);
        }
        let from_source = open.per_address.entry(source).or_default();
        if *from_source >= self.max_per_address {
            return Err(Limit::ConnectionsPerAddress);
        }
        *from_source += 1;
        open.total += 1;
        Ok(ConnectionSlot {
            gate: self.clone(),
            source,
        })
    }

    /// Connections open now, in all and from `ip`'s source address.
    pub fn open(&self, ip: IpAddr) -> (usize, usize) {
        let open = lock(&self.open);
        let from_source = open.per_address.get(&source_of(ip)).copied().unwrap_or(0);
        (open.total, from_source)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.gate.open);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_address.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.per_address.remove(&self.source);
            }
        }
    }
}

/// How many joins each source address may still start: a token bucket per
/// address that holds a minute's worth and refills evenly.
#[derive(Debug)]
pub struct JoinRate {
    per_minute: u32,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl JoinRate {
    /// At most `per_minute` joins a minute per source address, all of them
    /// at once if they come together.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The joins a minute each address may start.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Takes one join for `ip` at `now`, or says how long until one is free.
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= JOIN_BUCKETS_KEPT {
            // A full bucket is the same as none: forget those.
            buckets.retain(|_, bucket| refilled(bucket, now, capacity, per_second) < capacity);
        }
        let bucket = buckets.entry(source_of(ip)).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        bucket.tokens = refilled(bucket, now, capacity, per_second);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        if per_second <= 0.0 {
            return Err(Duration::MAX);
        }
        Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
    }
}

fn refilled(bucket: &Bucket, now: Instant, capacity: f64, per_second: f64) -> f64 {
    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
    (bucket.tokens + elapsed * per_second).min(capacity)
}

/// Counts what is open at once: the bundle streams of one connection, or
/// the joins a relay works on.
#[derive(Debug, Clone)]
pub struct StreamGate {
    max: usize,
    open: Arc<AtomicUsize>,
}

/// A stream's place in its [`StreamGate`], given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    open: Arc<AtomicUsize>,
}

impl StreamGate {
    /// At most `max` streams at once.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A slot for one more stream, unless `max` are open.
    pub fn admit(&self) -> Option<StreamSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.max).then_some(open + 1)
            })
            .ok()
            .map(|_| StreamSlot {
                open: self.open.clone(),
            })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A poisoned lock still holds consistent counts (every update is one
/// statement), so a panic elsewhere must not stop admission.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn limits(max_connections: usize, per_address: usize) -> Limits {
        Limits {
            max_connections,
            max_connections_per_address: per_address,
            ..Limits::default()
        }
    }

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn one_address_gets_its_share_and_others_still_get_in() {
        let gate = ConnectionGate::new(&limits(100, 3));
        let held: Vec<_> = (0..3).map(|_| gate.admit(A)).collect();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(gate.admit(A).err(), Some(Limit::ConnectionsPerAddress));
        assert!(gate.admit(B).is_ok(), "another address is not affected");
        assert_eq!(gate.open(A), (3, 3));
        drop(held);
        assert_eq!(gate.open(A), (0, 0), "slots come back when dropped");
        assert!(gate.admit(A).is_ok());
    }

    #[test]
    fn the_relay_wide_limit_holds_across_addresses() {
        let gate = ConnectionGate::new(&limits(2, 10));
        let _a = gate.admit(A);
        let _b = gate.admit(B);
        let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
        assert_eq!(gate.admit(c).err(), Some(Limit::Connections));
    }

    #[test]
    fn an_ipv6_host_counts_as_its_slash_64() {
        let gate = ConnectionGate::new(&limits(100, 1));
        let one = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 1));
        let same_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 9, 9, 9, 9));
        let other_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1));
        let _held = gate.admit(one);
        assert_eq!(
            gate.admit(same_64).err(),
            Some(Limit::ConnectionsPerAddress)
        );
        assert!(gate.admit(other_64).is_ok());
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(source_of(mapped), A);
    }

    #[test]
    fn joins_come_in_a_burst_then_at_the_rate() {
        let rate = JoinRate::new(6);
        let start = Instant::now();
        for _ in 0..6 {
            assert_eq!(rate.admit(A, start), Ok(()));
        }
        let wait = rate.admit(A, start).expect_err("the burst is spent");
        assert_eq!(wait, Duration::from_secs(10), "one join per 10 s");
        assert_eq!(rate.admit(B, start), Ok(()), "per address");
        assert!(rate.admit(A, start + Duration::from_secs(9)).is_err());
        assert_eq!(rate.admit(A, start + Duration::from_secs(10)), Ok(()));
        // A long pause refills the burst, never more.
        let later = start + Duration::from_secs(3600);
        for _ in 0..6 {
            assert_eq!(rate.admit(A, later), Ok(()));
        }
        assert!(rate.admit(A, later).is_err());
    }

    #[test]
    fn idle_join_buckets_are_forgotten() {
        let rate = JoinRate::new(60);
        let start = Instant::now();
        for n in 0..JOIN_BUCKETS_KEPT as u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));
            assert!(rate.admit(ip, start).is_ok());
        }
        assert!(rate.admit(A, start + Duration::from_secs(61)).is_ok());
        assert!(lock(&rate.buckets).len() < JOIN_BUCKETS_KEPT);
    }

    #[test]
    fn stream_slots_are_bounded_and_come_back() {
        let gate = StreamGate::new(2);
        let first = gate.admit();
        let second = gate.admit();
        assert!(first.is_some() && second.is_some());
        assert!(gate.admit().is_none());
        drop(first);
        assert!(gate.admit().is_some());
    }

    #[test]
    fn refusals_are_taken_once_and_saturate() {
        let refusals = Refusals::default();
        refusals.count(Limit::ConnectionsPerAddress);
        refusals.count(Limit::ConnectionsPerAddress);
        refusals.count(Limit::ApiRequestBody);
        assert_eq!(
            refusals.take(),
            vec![
                (Limit::ConnectionsPerAddress, 2),
                (Limit::ApiRequestBody, 1)
            ]
        );
        assert!(refusals.take().is_empty());
        refusals.counts[index(Limit::Connections)].store(u64::MAX, Ordering::Relaxed);
        refusals.count(Limit::Connections);
        assert_eq!(refusals.take(), vec![(Limit::Connections, u64::MAX)]);
        let names: std::collections::BTreeSet<_> = Limit::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(names.len(), Limit::ALL.len(), "names are distinct");
    }
}
