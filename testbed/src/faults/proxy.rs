//! The loopback UDP proxy: one listening socket for the children, one
//! upstream socket per child source address (as a NAT keeps one mapping per
//! inside address), and the faults applied to every datagram in both
//! directions.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The largest datagram forwarded (the largest a UDP socket can carry).
const MAX_DATAGRAM: usize = 65_535;

/// How many bytes a bandwidth-limited link may send at once before pacing
/// starts (the token bucket's depth).
const BURST_BYTES: f64 = 16.0 * 1024.0;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The listening socket could not be bound.
    #[error("cannot bind the proxy's listening socket: {0}")]
    Bind(#[source] io::Error),
}

/// What the proxy does to the datagrams of its link, in both directions.
/// The default forwards everything at once.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Drop every datagram.
    pub partitioned: bool,
    /// The share of datagrams dropped, 0.0–1.0.
    pub loss: f64,
    /// How long every datagram is held before it is sent on.
    pub delay: Duration,
    /// Up to this much more delay, drawn per datagram (so delayed datagrams
    /// also overtake each other).
    pub jitter: Duration,
    /// The share of datagrams sent twice, 0.0–1.0.
    pub duplicate: f64,
    /// The share of datagrams held back and sent right after the next one
    /// in the same direction, 0.0–1.0.
    pub reorder: f64,
    /// At most this many bytes a second in each direction (a token bucket);
    /// `None` is unlimited.
    pub bandwidth: Option<u64>,
}

/// Changes a running proxy's faults; cheap to clone, and usable from any
/// thread (a blocking test included).
#[derive(Debug, Clone)]
pub struct FaultHandle {
    state: Arc<Mutex<State>>,
}

impl FaultHandle {
    /// Replaces every fault at once.
    pub fn set(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The faults in force now.
    pub fn faults(&self) -> Faults {
        self.lock().faults
    }

    /// Changes some faults, keeping the others.
    pub fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut self.lock().faults);
    }

    /// Drops everything from now on.
    pub fn partition(&self) {
        self.update(|faults| faults.partitioned = true);
    }

    /// Forwards again (the other faults stay).
    pub fn heal(&self) {
        self.update(|faults| faults.partitioned = false);
    }

    /// How many datagrams were forwarded and dropped so far (copies and
    /// held datagrams count once, when sent).
    pub fn counts(&self) -> (u64, u64) {
        let state = self.lock();
        (state.forwarded, state.dropped)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain numbers behind, which
        // are as good as before it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running proxy; it stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    address: SocketAddr,
    handle: FaultHandle,
    stop: CancellationToken,
}

impl Proxy {
    /// Starts forwarding between `127.0.0.1:0` and `upstream` (the parent
    /// relay's QUIC address). `seed` makes the random choices (loss,
    /// duplication, reordering, jitter) repeatable for the same traffic.
    pub async fn start(upstream: SocketAddr, seed: u64) -> Result<Self, ProxyError> {
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .map_err(ProxyError::Bind)?;
        let address = socket.local_addr().map_err(ProxyError::Bind)?;
        let handle = FaultHandle {
            state: Arc::new(Mutex::new(State {
                faults: Faults::default(),
                random: SplitMix64(seed),
                forwarded: 0,
                dropped: 0,
            })),
        };
        let stop = CancellationToken::new();
        tokio::spawn(serve_downstream(
            Arc::new(socket),
            upstream,
            handle.clone(),
            stop.clone(),
        ));
        tracing::info!(%address, %upstream, "fault proxy started");
        Ok(Self {
            address,
            handle,
            stop,
        })
    }

    /// Where children send to (give it to `--parent-address`).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The handle that changes this proxy's faults.
    pub fn handle(&self) -> FaultHandle {
        self.handle.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The faults and the random source they draw from, shared by both
/// directions so one seed decides every choice.
#[derive(Debug)]
struct State {
    faults: Faults,
    random: SplitMix64,
    forwarded: u64,
    dropped: u64,
}

/// Where one direction's datagrams go.
#[derive(Debug, Clone)]
enum Sink {
    /// The upstream socket, connected to the parent.
    Upstream(Arc<UdpSocket>),
    /// The listening socket, back to a child's address.
    Downstream(Arc<UdpSocket>, SocketAddr),
}

impl Sink {
    async fn send(&self, datagram: &[u8]) {
        let sent = match self {
            Self::Upstream(socket) => socket.send(datagram).await,
            Self::Downstream(socket, peer) => socket.send_to(datagram, peer).await,
        };
        if let Err(error) = sent {
            // A refused send (nobody listening yet, the parent restarting)
            // is what a lossy network does anyway.
            tracing::debug!(%error, "fault proxy could not send a datagram");
        }
    }
}

/// One direction of one peer's link: its reordering slot and token bucket.
#[derive(Debug)]
struct Direction {
    sink: Sink,
    handle: FaultHandle,
    held: Option<Vec<u8>>,
    /// Bytes that may leave now (negative: owed, the next one waits).
    tokens: f64,
    refilled: Instant,
}

impl Direction {
    fn new(sink: Sink, handle: FaultHandle) -> Self {
        Self {
            sink,
            handle,
            held: None,
            tokens: BURST_BYTES,
            refilled: Instant::now(),
        }
    }

    /// Applies the faults to one datagram and sends what survives, now or
    /// later.
    async fn forward(&mut self, datagram: Vec<u8>) {
        let (faults, lost, copies, hold, jitter) = {
            let mut state = self.handle.lock();
            let faults = state.faults;
            let lost = faults.partitioned || state.random.chance(faults.loss);
            let copies = if state.random.chance(faults.duplicate) {
                2
            } else {
                1
            };
            let hold = state.random.chance(faults.reorder);
            let jitter = faults.jitter.mul_f64(state.random.unit());
            if lost {
                state.dropped += 1;
            }
            (faults, lost, copies, hold, jitter)
        };
        if lost {
            return;
        }
        if hold && self.held.is_none() {
            self.held = Some(datagram);
            return;
        }
        let mut batch = vec![datagram; copies];
        batch.extend(self.held.take());
        for datagram in batch {
            self.send(&faults, jitter, datagram).await;
        }
    }

    async fn send(&mut self, faults: &Faults, jitter: Duration, datagram: Vec<u8>) {
        let now = Instant::now();
        let mut at = now + faults.delay + jitter;
        if let Some(rate) = faults.bandwidth.filter(|rate| *rate > 0) {
            let rate = rate as f64;
            let elapsed = now.duration_since(self.refilled).as_secs_f64();
            self.tokens = (self.tokens + elapsed * rate).min(BURST_BYTES);
            self.refilled = now;
            self.tokens -= datagram.len() as f64;
            if self.tokens < 0.0 {
                at = at.max(now + Duration::from_secs_f64(-self.tokens / rate));
            }
        }
        self.handle.lock().forwarded += 1;
        if at <= now {
            self.sink.send(&datagram).await;
        } else {
            let sink = self.sink.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                sink.send(&datagram).await;
            });
        }
    }
}

/// Reads the children's datagrams and hands each to its peer's upstream
/// session, opening one for a new source address.
async fn serve_downstream(
    socket: Arc<UdpSocket>,
    upstream: SocketAddr,
    handle: FaultHandle,
    stop: CancellationToken,
) {
    let mut sessions: HashMap<SocketAddr, Direction> = HashMap::new();
    let mut buffer = vec![0u8; MAX_DATAGRAM];
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            received = socket.recv_from(&mut buffer) => received,
        };
        let (length, peer) = match received {
            Ok(received) => received,
            Err(error) => {
                // On Linux an ICMP error from an earlier send_to surfaces
                // here; the socket itself is fine.
                tracing::debug!(%error, "fault proxy receive failed");
                continue;
            }
        };
        let direction = match sessions.entry(peer) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                match open_session(&socket, peer, upstream, &handle, &stop).await {
                    Ok(direction) => entry.insert(direction),
                    Err(error) => {
                        tracing::warn!(%peer, %error, "fault proxy cannot open an upstream socket");
                        continue;
                    }
                }
            }
        };
        direction.forward(buffer[..length].to_vec()).await;
    }
}

/// Opens `peer`'s upstream socket and starts relaying its replies; returns
/// the upward direction.
async fn open_session(
    downstream: &Arc<UdpSocket>,
    peer: SocketAddr,
    upstream: SocketAddr,
    handle: &FaultHandle,
    stop: &CancellationToken,
) -> io::Result<Direction> {
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(upstream).await?;
    let socket = Arc::new(socket);
    let mut down = Direction::new(Sink::Downstream(downstream.clone(), peer), handle.clone());
    let replies = socket.clone();
    let stop = stop.clone();
    tokio::spawn(async move {
        let mut buffer = vec![0u8; MAX_DATAGRAM];
        loop {
            let received = tokio::select! {
                () = stop.cancelled() => return,
                received = replies.recv(&mut buffer) => received,
            };
            match received {
                Ok(length) => down.forward(buffer[..length].to_vec()).await,
                // ECONNREFUSED while the parent is down; keep listening.
                Err(error) => tracing::debug!(%error, "fault proxy upstream receive failed"),
            }
        }
    });
    tracing::debug!(%peer, "fault proxy opened an upstream socket");
    Ok(Direction::new(Sink::Upstream(socket), handle.clone()))
}

/// A small, seedable random source (SplitMix64): the proxy needs repeatable
/// coin flips, not cryptographic quality.
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `share` (0 never, 1 always).
    fn chance(&mut self, share: f64) -> bool {
        share > 0.0 && self.unit() < share
    }
}

#[cfg(test)]
mod tests;
