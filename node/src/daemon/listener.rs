//! The parent side of links: accept QUIC connections from children, tell
//! the loop about their control streams, serve bundles they ask for, and
//! admit joining nodes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use relaymesh_protocol::limits::MAX_BUNDLE_STREAMS;
use relaymesh_protocol::message::{
    DownMessage, JoinReply, JoinRequest, Open, RenewReply, RenewRequest, UpMessage,
};
use relaymesh_protocol::{BundleId, ErrorCode, Refusal, Role};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::refusal_log::Line;
use super::{unix_ms, BundleAccess, ChildBound, DaemonError, Event, Shared, CHILD_QUEUE};
use crate::admission::{self, TokenLedger};
use crate::identity::Identity;
use crate::limits::{Limit, HANDSHAKE_WAIT};
use crate::pki::{self, Peer};
use crate::store::BundleChunks;
use crate::transport::{bundle_transfer, read_frame, write_frame, LinkError};

/// How long a child may take to say what a new stream is for.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a bundle request waits for a bundle this relay is still fetching.
const BUNDLE_WAIT: Duration = Duration::from_secs(60);

static NEXT_LINK: AtomicU64 = AtomicU64::new(1);

mod session;

use session::serve_connection;

/// Opens the QUIC endpoint children dial.
pub(super) fn open(
    listen: &str,
    identity: &Identity,
    idle: std::time::Duration,
) -> Result<quinn::Endpoint, DaemonError> {
    let listen_error = |source| DaemonError::Listen {
        address: listen.to_string(),
        source,
    };
    let address: SocketAddr = listen.parse().map_err(|error: std::net::AddrParseError| {
        listen_error(std::io::Error::new(std::io::ErrorKind::InvalidInput, error))
    })?;
    let config = pki::quic_server_config_idle(identity, idle)?;
    let socket = std::net::UdpSocket::bind(address).map_err(listen_error)?;
    quinn::Endpoint::new(
        pki::quic_endpoint_config(identity),
        Some(config),
        socket,
        std::sync::Arc::new(quinn::TokioRuntime),
    )
    .map_err(listen_error)
}

/// Accepts connections until `shutdown`.
pub(super) async fn accept_loop(
    endpoint: quinn::Endpoint,
    shared: Shared,
    shutdown: CancellationToken,
) {
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            () = shutdown.cancelled() => break,
        };
        let Some(incoming) = incoming else { break };
        let remote = incoming.remote_address();
        // Before any handshake work: refusing costs one packet.
        let slot = match shared.connections.admit(remote.ip()) {
            Ok(slot) => slot,
            Err(limit) => {
                tracing::debug!(%remote, %limit, "refused a connection over a limit");
                shared.refusals.count(limit);
                incoming.refuse();
                continue;
            }
        };
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        let span = tracing::info_span!("link", %remote, peer = tracing::field::Empty);
        tokio::spawn(
            async move {
                // Held until the connection ends.
                let _slot = slot;
                let Some(turn) = handshake_turn(&shared).await else {
                    tracing::debug!(%remote, "refused a connection that waited too long for its handshake");
                    shared.refusals.count(Limit::Handshakes);
                    incoming.refuse();
                    return;
                };
                let handshake = incoming.await;
                drop(turn);
                match handshake {
                    // Boxed: the handshake's state and the link's are
                    // not kept side by side for the link's lifetime.
                    Ok(connection) => Box::pin(serve_connection(connection, shared, shutdown)).await,
                    // A refused handshake (no shared ALPN, a certificate from
                    // another CA, an expired one) ends here; the client sees
                    // the TLS alert.
                    Err(error) => {
                        let peer = remote.ip().to_string();
                        if let Some(line) = refusal_line(&shared, &peer, &error.to_string()) {
                            tracing::info!(%error, times = line.times, over = %line.over, "refused a connection");
                        }
                    }
                }
            }
            .instrument(span),
        );
    }
    endpoint.close(0u32.into(), b"relay shutting down");
    endpoint.wait_idle().await;
}

/// A turn at a TLS handshake, once one of `--max-concurrent-handshakes` is
/// free, or `None` after [`HANDSHAKE_WAIT`]: a reconnect storm's handshakes
/// then take turns instead of all slowing down together.
async fn handshake_turn(shared: &Shared) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let turn = shared.handshakes.clone().acquire_owned();
    tokio::time::timeout(HANDSHAKE_WAIT, turn).await.ok()?.ok()
}

/// The peer's identity, and whether this relay issued its certificate: a
/// relay serves only the children it admitted, so a certificate another relay
/// issued (even for a name below this one) opens no link here.
fn authenticate(
    connection: &quinn::Connection,
    identity: &Identity,
) -> Result<(Option<Peer>, bool), pki::PkiError> {
    let Some(leaf) = pki::connection_leaf(connection)? else {
        return Ok((None, false));
    };
    let peer = pki::peer_of(&leaf)?;
    let issued_here = match &identity.issuer {
        Some(issuer) => {
            // The root issued what any mesh CA it trusts signed: during a
            // rotation, its children's certificates from before it.
            let mut by = vec![issuer.cert_der.as_slice()];
            if identity.is_root() {
                by.extend(identity.anchors());
            }
            // A relay whose issuer key rotated issued what its old key
            // signed too, until the rotation finishes.
            if let Some(previous) = &identity.previous_issuer {
                by.push(previous.issuer.cert_der.as_slice());
            }
            let mut issued = false;
            for signer in by {
                issued |= pki::is_issued_by(&leaf, signer)?;
            }
            issued
        }
        None => false,
    };
    Ok((Some(peer), issued_here))
}

/// Asks the loop whether `peer`, whose certificate another relay issued, may
/// have this relay as parent (see [`Event::MayAttach`]).
async fn may_attach(
    connection: &quinn::Connection,
    shared: &Shared,
    peer: &Peer,
) -> Result<(), String> {
    let chain = pki::connection_chain(connection).map_err(|error| error.to_string())?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let asked = Event::MayAttach {
        node: peer.name.clone(),
        role: peer.role,
        chain,
        reply,
    };
    if shared.events.send(asked).await.is_err() {
        return Err("the relay is stopping".into());
    }
    answer
        .await
        .map_err(|_| "the relay is stopping".to_string())?
}

/// Signs a child's renewal request for the key its connection presented.
fn renew(connection: &quinn::Connection, shared: &Shared, request: &RenewRequest) -> RenewReply {
    let identity = shared.identity.get();
    let Some(issuer) = identity.issuer.as_ref() else {
        return RenewReply::Refused(Refusal::new(
            ErrorCode::Forbidden,
            "agents have no children to renew",
        ));
    };
    let presented = match pki::connection_leaf(connection) {
        Ok(Some(leaf)) => leaf,
        _ => return RenewReply::Refused(unauthenticated()),
    };
    let above = admission::chain_above_leaf(&identity, issuer);
    let signed = pki::sign_renewal(
        issuer,
        &request.tls_csr_der,
        &presented,
        shared.node_cert_validity,
    )
    .and_then(|leaf| {
        // A relay that re-parented here has its issuer signed here too
        // (the same key: its subtree's certificates stay valid).
        let issuer_chain = match &request.issuer_csr_der {
            None => None,
            Some(csr) => {
                let peer = pki::peer_of(&presented)?;
                if peer.role != Role::Relay {
                    return Err(pki::PkiError::BadCsr {
                        reason: format!("{} {} has no issuer", peer.role, peer.name),
                    });
                }
                let cert = pki::sign_issuer_cert(issuer, csr, &peer.name)?;
                Some(std::iter::once(cert).chain(above.iter().cloned()).collect())
            }
        };
        Ok((leaf, issuer_chain))
    });
    match signed {
        Ok((leaf, issuer_chain_der)) => RenewReply::Renewed {
            tls_chain_der: std::iter::once(leaf).chain(above).collect(),
            issuer_chain_der,
            successor_der: identity
                .previous_issuer
                .as_ref()
                .map(|previous| previous.cross_der.clone()),
        },
        Err(error) => RenewReply::Refused(Refusal::new(
            ErrorCode::Malformed,
            format!("cannot renew: {error}"),
        )),
    }
}

/// Why a stream opened on a connection made with a certificate that had
/// expired (at `not_after`) is refused, if it is: anything but a renewal,
/// and a renewal past this relay's grace period. Revoked nodes were refused
/// before. Joining needs no certificate and goes on.
/// Answers the stream `open` opened with `refusal`, in the reply type of
/// that stream (a bundle's, a renewal's, or a control stream's), then
/// closes the whole connection: a revoked node, or an expired certificate
/// asking for more than a renewal.
async fn refuse_and_close(
    connection: &quinn::Connection,
    send: &mut quinn::SendStream,
    open: &Open,
    refusal: Refusal,
) {
    match open {
        Open::Bundle(_) => {
            let _ = bundle_transfer::refuse(send, refusal.clone()).await;
        }
        Open::Renew(_) => {
            let _ = write_frame(send, &RenewReply::Refused(refusal.clone())).await;
            let _ = send.finish();
        }
        _ => {
            let _ = write_frame(send, &DownMessage::Refused(refusal.clone())).await;
            let _ = send.finish();
        }
    }
    // Give the refusal a moment to arrive before the connection goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    connection.close(1u32.into(), refusal.message.as_bytes());
}

fn refuse_expired(shared: &Shared, peer: &Peer, open: &Open, not_after: u64) -> Option<Refusal> {
    if matches!(open, Open::Join(_)) {
        return None;
    }
    let grace = shared.expired_cert_grace;
    let (reason, message) = match pki::standing(unix_ms() / 1000, not_after, grace, false) {
        pki::Standing::Valid => return None,
        pki::Standing::RenewOnly { expired_for } => {
            if matches!(open, Open::Renew(_)) {
                tracing::info!(node = %peer.name, expired_for = %humantime::format_duration(Duration::from_secs(expired_for.as_secs())), "renewing a certificate that expired, within the grace period");
                return None;
            }
            ("expired: not renewed", pki::renew_only_message(expired_for))
        }
        pki::Standing::Denied(pki::Denial::PastGrace { expired_for, grace }) => (
            "expired: past the grace period",
            pki::past_grace_message(expired_for, grace),
        ),
        // Not asked here: the deny list was checked before.
        pki::Standing::Denied(pki::Denial::Revoked) => ("revoked", "revoked".to_string()),
    };
    if let Some(line) = refusal_line(shared, &peer.name, reason) {
        tracing::warn!(node = %peer.name, role = %peer.role, reason = %message, times = line.times, over = %line.over, "refused a node whose certificate expired");
    }
    Some(Refusal::new(ErrorCode::CertificateExpired, message))
}

/// Why the connection's certificates are on the deny list, if they are.
fn revoked(connection: &quinn::Connection, shared: &Shared) -> Option<String> {
    let chain = pki::connection_chain(connection).ok()?;
    shared.deny.read().ok()?.refuses_chain(&chain)
}

fn not_admitted_here(peer: &Peer) -> Refusal {
    Refusal::new(
        ErrorCode::Forbidden,
        format!(
            "{} {:?} was not admitted by this relay",
            peer.role, peer.name
        ),
    )
}

fn too_many_bundle_streams() -> Refusal {
    Refusal::new(
        ErrorCode::Unavailable,
        format!(
            "more than {MAX_BUNDLE_STREAMS} bundle streams at once on this connection \
             (limit bundle-streams-per-peer); retry when one has ended"
        ),
    )
}

fn unauthenticated() -> Refusal {
    Refusal::new(
        ErrorCode::Unauthenticated,
        "this connection presented no certificate; only joining is allowed",
    )
}

async fn control_stream(
    connection: quinn::Connection,
    peer: Peer,
    hello: relaymesh_protocol::message::Hello,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    shared: Shared,
) {
    let link = NEXT_LINK.fetch_add(1, Ordering::Relaxed);
    let (outgoing_tx, mut outgoing_rx) = mpsc::channel::<ChildBound>(CHILD_QUEUE);
    // Boxed for its turn: this task lives as long as the link, and the
    // registration's state (an event, a refusal's frame and wait) would
    // otherwise stay in it (docs/performance.md, "The heap of a link").
    let registered = Box::pin(register(
        link,
        &connection,
        &peer,
        hello,
        &mut send,
        outgoing_tx,
        &shared,
    ))
    .await;
    if !registered {
        return;
    }
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing_rx.recv().await {
            write_frame(&mut send, &*message).await?;
        }
        Ok::<(), LinkError>(())
    });
    let result: Result<(), LinkError> = async {
        while let Some(message) = read_frame::<UpMessage>(&mut recv).await? {
            // A place in the queue first, then the event: the wait holds
            // no event, so the link's task stays small.
            let Ok(place) = shared.events.reserve().await else {
                break;
            };
            place.send(Event::ChildMessage { link, message });
        }
        Ok(())
    }
    .await;
    if let Err(error) = result {
        tracing::info!(child = %peer.name, %error, "control stream ended");
        if matches!(error, LinkError::Codec(_)) {
            connection.close(1u32.into(), b"malformed frame");
        }
    }
    writer.abort();
    let _ = shared.events.send(Event::ChildDisconnected { link }).await;
}

/// Hands a new child's link to the daemon's loop; `false` if it refused the
/// child (told why on `send`, then the connection closed) or is gone.
async fn register(
    link: super::LinkId,
    connection: &quinn::Connection,
    peer: &Peer,
    hello: relaymesh_protocol::message::Hello,
    send: &mut quinn::SendStream,
    outgoing: mpsc::Sender<ChildBound>,
    shared: &Shared,
) -> bool {
    let (reply_tx, reply_rx) = oneshot::channel();
    let connected = Event::ChildConnected {
        link,
        peer: peer.clone(),
        hello,
        connection: connection.clone(),
        outgoing,
        reply: reply_tx,
    };
    if shared.events.send(connected).await.is_err() {
        return false;
    }
    match reply_rx.await {
        Ok(Ok(())) => true,
        Ok(Err(refusal)) => {
            let reason = refusal.code.to_string();
            if let Some(line) = refusal_line(shared, &peer.name, &reason) {
                tracing::warn!(child = %peer.name, %refusal, times = line.times, over = %line.over, "refused child");
            }
            let _ = write_frame(send, &DownMessage::Refused(refusal.clone())).await;
            let _ = send.finish();
            // Give the refusal a moment to arrive before the connection goes.
            tokio::time::sleep(Duration::from_millis(200)).await;
            connection.close(1u32.into(), refusal.message.as_bytes());
            false
        }
        Err(_) => false,
    }
}

async fn serve_bundle(
    shared: &Shared,
    child: String,
    id: BundleId,
    send: &mut quinn::SendStream,
) -> Result<(), LinkError> {
    let (reply_tx, reply_rx) = oneshot::channel();
    let child_name = child.clone();
    let asked = shared
        .events
        .send(Event::BundleAccess {
            child,
            id,
            reply: reply_tx,
        })
        .await;
    let access = match (asked, reply_rx.await) {
        (Ok(()), Ok(access)) => access,
        _ => BundleAccess::Denied,
    };
    if access == BundleAccess::Denied {
        let refusal = Refusal::new(
            ErrorCode::Forbidden,
            format!("bundle {id} is not part of this child's slice"),
        );
        return bundle_transfer::refuse(send, refusal).await;
    }
    let mut stored = shared.bundles_stored.clone();
    let wait = async {
        loop {
            if let Some(chunks) = shared.store.bundle_chunks(&id).ok().flatten() {
                return Some(chunks);
            }
            if stored.changed().await.is_err() {
                return None;
            }
        }
    };
    let Some(chunks) = tokio::time::timeout(BUNDLE_WAIT, wait).await.ok().flatten() else {
        bundle_transfer::serve(send, id, None::<BundleChunks>).await?;
        return Ok(());
    };
    // Relay-wide bound: wait for a turn rather than refuse.
    let _permit = match shared.serving.permit().await {
        Some(permit) => permit,
        None => return Err(LinkError::Local("the relay is stopping".into())),
    };
    // One copy in memory for every serve of this bundle running now; one
    // that does not fit the budget is read from the store chunk by chunk as
    // the stream takes it.
    let store = shared.store.clone();
    let load = async move {
        let read = tokio::task::spawn_blocking(move || store.bundle(&id)).await;
        match read {
            Ok(Ok(Some(bytes))) => Ok(Bytes::from(bytes)),
            Ok(Ok(None)) => Err(format!("bundle {id} was removed while it was served")),
            Ok(Err(error)) => Err(error.to_string()),
            Err(error) => Err(error.to_string()),
        }
    };
    let served = match shared.serving.share(id, chunks.len(), load).await {
        Ok(Some(bundle)) => bundle_transfer::serve(send, id, Some(bundle)).await?,
        Ok(None) => bundle_transfer::serve(send, id, Some(chunks)).await?,
        Err(error) => {
            let _ = send.reset(0u32.into());
            return Err(LinkError::Local(error));
        }
    };
    if let Some(bytes) = served {
        let _ = shared
            .events
            .send(Event::BundleServed {
                child: child_name,
                id,
                bytes,
            })
            .await;
    }
    Ok(())
}

struct StoreLedger<'a>(&'a Shared);

impl TokenLedger for StoreLedger<'_> {
    fn claim(&self, id: [u8; 16], not_after_unix: u64) -> Result<bool, String> {
        self.0
            .store
            .claim_token(id, not_after_unix, unix_ms() / 1000)
            .map_err(|error| error.to_string())
    }

    fn is_revoked(&self, id: &[u8; 16]) -> bool {
        // A poisoned lock means a panic elsewhere: refuse rather than admit.
        self.0
            .deny
            .read()
            .map_or(true, |deny| deny.refuses_token(id))
    }
}

fn admit(shared: &Shared, remote: SocketAddr, request: &JoinRequest) -> JoinReply {
    // Before the token is even read: a refused join costs nothing more.
    if let Err(wait) = shared.joins.admit(remote.ip(), Instant::now()) {
        shared.refusals.count(Limit::JoinsPerAddress);
        let per_minute = shared.joins.per_minute();
        tracing::debug!(%remote, node = %request.name, "refused a join over the limit");
        return JoinReply::Refused(Refusal::new(
            ErrorCode::Unavailable,
            format!(
                "too many joins from {}: at most {per_minute} a minute per address \
                 (limit joins-per-address); retry in {}s",
                remote.ip(),
                // Rounded up: retrying on time must find a join free.
                (wait.as_secs_f64().ceil() as u64).max(1)
            ),
        ));
    }
    let Some(_in_progress) = shared.joins_in_progress.admit() else {
        shared.refusals.count(Limit::Joins);
        tracing::debug!(%remote, node = %request.name, "refused a join: too many in progress");
        return JoinReply::Refused(Refusal::new(
            ErrorCode::Unavailable,
            "this relay is working on as many joins as it takes at once (limit joins); \
             retry in a few seconds",
        ));
    };
    let ledger = StoreLedger(shared);
    let validity = shared.node_cert_validity;
    match admission::admit(
        &shared.identity.get(),
        request,
        unix_ms() / 1000,
        &ledger,
        validity,
    ) {
        Ok(grant) => {
            tracing::info!(node = %request.name, role = %request.role, "admitted a node");
            JoinReply::Accepted(grant)
        }
        Err(refusal) => {
            let reason = format!("join: {}", refusal.code);
            if let Some(line) = refusal_line(shared, &request.name, &reason) {
                tracing::warn!(node = %request.name, role = %request.role, %refusal, times = line.times, over = %line.over, "refused a join");
            }
            JoinReply::Refused(refusal)
        }
    }
}

/// A refusal's log line: how many refusals it stands for, and over how
/// long since the previous line about the same peer and reason.
struct RefusalLine {
    times: u64,
    over: humantime::FormattedDuration,
}

/// Whether to log that `peer` (the name its certificate or join request
/// claims, or its address) was refused for `reason`: the first time, then
/// once per interval at most, with a count (see [`super::refusal_log`]).
fn refusal_line(shared: &Shared, peer: &str, reason: &str) -> Option<RefusalLine> {
    let line = match shared.refusal_log.lock() {
        Ok(mut log) => log.refused(peer, reason, Instant::now()),
        // A panic elsewhere: log rather than lose the refusal.
        Err(_) => Line::First,
    };
    let (times, over) = match line {
        Line::First => (1, Duration::ZERO),
        Line::Again { times, over } => (times, over),
        Line::Quiet => return None,
    };
    Some(RefusalLine {
        times,
        over: humantime::format_duration(Duration::from_secs(over.as_secs())),
    })
}
