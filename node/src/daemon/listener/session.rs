//! One child's connection, stream by stream: who the peer is (and whether
//! this relay may serve it), then each stream it opens checked (revoked,
//! expired) and handed to what serves it (join, renewal, control, bundle).

use std::net::SocketAddr;

use relaymesh_protocol::limits::{MAX_BUNDLE_STREAMS, MAX_OPENING_FRAME_LEN};
use relaymesh_protocol::message::{DownMessage, Open, RenewReply};
use relaymesh_protocol::{ErrorCode, Refusal};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    admit, authenticate, control_stream, may_attach, not_admitted_here, refusal_line,
    refuse_and_close, refuse_expired, renew, revoked, serve_bundle, too_many_bundle_streams,
    unauthenticated, OPEN_TIMEOUT,
};
use crate::daemon::{unix_ms, Shared};
use crate::limits::{Limit, StreamGate};
use crate::pki::{self, Peer};
use crate::transport::{bundle_transfer, expect_frame_within, write_frame};

/// Serves `connection` until it or the relay closes.
pub(super) async fn serve_connection(
    connection: quinn::Connection,
    shared: Shared,
    shutdown: CancellationToken,
) {
    // This future lives in a task as long as its link, and a task's memory
    // is its future's largest state: what runs once per stream (opening,
    // checks, serving) is boxed for its turn, so an idle link keeps only
    // the wait for its next stream (docs/performance.md, "The heap of a
    // link").
    let Some(mut session) = Box::pin(Session::open(connection, shared)).await else {
        return;
    };
    loop {
        let stream = tokio::select! {
            stream = session.connection.accept_bi() => stream,
            () = shutdown.cancelled() => return,
        };
        let Ok((mut send, mut recv)) = stream else {
            return;
        };
        let Some(open) = Box::pin(read_opening(&mut send, &mut recv)).await else {
            continue;
        };
        if !Box::pin(session.may_open(&open, &mut send)).await {
            return;
        }
        Box::pin(session.serve(open, send, recv)).await;
    }
}

/// What is known of a connection's peer, and what it has open.
struct Session {
    connection: quinn::Connection,
    shared: Shared,
    remote: SocketAddr,
    /// The peer, if it has a certificate (a joining node has none).
    peer: Option<Peer>,
    /// This relay issued the peer's certificate, or the root granted it
    /// as a candidate parent: it may serve the peer.
    issued_here: bool,
    /// Why the root's grant did not let this relay serve the peer.
    refused_here: Option<String>,
    /// When the peer's certificate expired, if it had when it connected.
    expired_leaf: Option<u64>,
    has_control: bool,
    bundle_streams: StreamGate,
}

impl Session {
    /// Authenticates the peer; `None` (the connection closed) if its
    /// certificate is unusable.
    async fn open(connection: quinn::Connection, shared: Shared) -> Option<Self> {
        let remote = connection.remote_address();
        let (peer, issued_here) = match authenticate(&connection, &shared.identity.get()) {
            Ok(authenticated) => authenticated,
            Err(error) => {
                let address = remote.ip().to_string();
                if let Some(line) = refusal_line(&shared, &address, "unusable certificate") {
                    tracing::warn!(%remote, %error, times = line.times, over = %line.over, "unusable peer certificate");
                }
                connection.close(1u32.into(), b"unusable certificate");
                return None;
            }
        };
        if let Some(peer) = &peer {
            tracing::Span::current().record("peer", peer.name.as_str());
        }
        // A node another relay admitted may still have this one as parent,
        // if the root granted it (see `relaymesh_protocol::parents`).
        let mut refused_here = None;
        let issued_here = match (&peer, issued_here) {
            (Some(peer), false) => match may_attach(&connection, &shared, peer).await {
                Ok(()) => {
                    tracing::info!(node = %peer.name, "a candidate parent serves a node another candidate admitted");
                    true
                }
                Err(reason) => {
                    refused_here = Some(reason);
                    false
                }
            },
            (_, issued_here) => issued_here,
        };
        // A certificate that had expired when the connection was made lets
        // it renew and nothing else (see `pki::standing`). One that expires
        // while its connection is open changes nothing: TLS authenticates
        // at the handshake, and renewed certificates are used from the
        // next one on.
        let expired_leaf = match &peer {
            Some(_) => pki::connection_leaf(&connection)
                .ok()
                .flatten()
                .and_then(|leaf| pki::leaf_not_after(&leaf).ok())
                .filter(|not_after| unix_ms() / 1000 > *not_after),
            None => None,
        };
        Some(Self {
            connection,
            shared,
            remote,
            peer,
            issued_here,
            refused_here,
            expired_leaf,
            has_control: false,
            bundle_streams: StreamGate::new(MAX_BUNDLE_STREAMS),
        })
    }

    /// Why this relay does not serve `peer`.
    fn not_admitted_here(&self, peer: &Peer) -> Refusal {
        match &self.refused_here {
            Some(reason) => Refusal::new(ErrorCode::Forbidden, reason.clone()),
            None => not_admitted_here(peer),
        }
    }

    /// Whether the peer may open `open` now; if not, it was refused and
    /// the connection closed. Checked per stream, not per connection: a
    /// revocation can arrive while a connection is open.
    async fn may_open(&self, open: &Open, send: &mut quinn::SendStream) -> bool {
        let denied = match (open, &self.peer) {
            (Open::Control(_) | Open::Bundle(_) | Open::Renew(_), Some(_)) => {
                revoked(&self.connection, &self.shared)
            }
            _ => None,
        };
        if let Some(reason) = denied {
            let node = self.peer.as_ref().map_or("", |peer| peer.name.as_str());
            if let Some(line) = refusal_line(&self.shared, node, "revoked") {
                tracing::warn!(%node, %reason, times = line.times, over = %line.over, "refused a revoked node");
            }
            let refusal = Refusal::new(ErrorCode::Revoked, reason);
            refuse_and_close(&self.connection, send, open, refusal).await;
            return false;
        }
        if let (Some(not_after), Some(peer)) = (self.expired_leaf, &self.peer) {
            if let Some(refusal) = refuse_expired(&self.shared, peer, open, not_after) {
                refuse_and_close(&self.connection, send, open, refusal).await;
                return false;
            }
        }
        true
    }

    /// Hands the stream to what serves `open`.
    async fn serve(&mut self, open: Open, mut send: quinn::SendStream, recv: quinn::RecvStream) {
        let peer = self.peer.clone();
        match (open, &peer) {
            (Open::Join(request), _) => {
                let shared = self.shared.clone();
                let remote = self.remote;
                tokio::spawn(async move {
                    let reply = admit(&shared, remote, &request);
                    if let Err(error) = write_frame(&mut send, &reply).await {
                        tracing::warn!(%error, "cannot answer join");
                    }
                    let _ = send.finish();
                });
            }
            (Open::Renew(request), Some(peer)) => {
                let reply = if self.issued_here {
                    renew(&self.connection, &self.shared, &request)
                } else {
                    RenewReply::Refused(self.not_admitted_here(peer))
                };
                self.log_renewal(peer, &reply);
                let _ = write_frame(&mut send, &reply).await;
                let _ = send.finish();
            }
            (Open::Control(_), Some(peer)) if !self.issued_here => {
                let refusal = self.not_admitted_here(peer);
                if let Some(line) = refusal_line(&self.shared, &peer.name, "not admitted here") {
                    tracing::warn!(node = %peer.name, %refusal, times = line.times, over = %line.over, "refused a node this relay did not admit");
                }
                let _ = write_frame(&mut send, &DownMessage::Refused(refusal)).await;
                let _ = send.finish();
            }
            (Open::Bundle(_), Some(peer)) if !self.issued_here => {
                let _ = bundle_transfer::refuse(&mut send, self.not_admitted_here(peer)).await;
            }
            (Open::Control(hello), Some(peer)) if !self.has_control => {
                self.has_control = true;
                tokio::spawn(
                    control_stream(
                        self.connection.clone(),
                        peer.clone(),
                        hello,
                        send,
                        recv,
                        self.shared.clone(),
                    )
                    .instrument(tracing::Span::current()),
                );
            }
            (Open::Bundle(request), Some(peer)) => {
                let Some(slot) = self.bundle_streams.admit() else {
                    self.shared.refusals.count(Limit::BundleStreamsPerPeer);
                    let _ = bundle_transfer::refuse(&mut send, too_many_bundle_streams()).await;
                    return;
                };
                let shared = self.shared.clone();
                let child = peer.name.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(error) = serve_bundle(&shared, child, request.id, &mut send).await {
                        tracing::warn!(bundle = %request.id, %error, "bundle transfer failed");
                    }
                });
            }
            (Open::Control(_), Some(_)) => {
                let refusal =
                    Refusal::new(ErrorCode::Malformed, "a connection has one control stream");
                let _ = write_frame(&mut send, &DownMessage::Refused(refusal)).await;
                let _ = send.finish();
            }
            (Open::Renew(_), None) => {
                let _ = write_frame(&mut send, &RenewReply::Refused(unauthenticated())).await;
                let _ = send.finish();
            }
            (Open::Control(_), None) => {
                tracing::info!("refused a control stream from a peer without a certificate");
                let _ = write_frame(&mut send, &DownMessage::Refused(unauthenticated())).await;
                let _ = send.finish();
            }
            (Open::Bundle(_), None) => {
                tracing::info!("refused a bundle request from a peer without a certificate");
                let _ = bundle_transfer::refuse(&mut send, unauthenticated()).await;
            }
        }
    }

    fn log_renewal(&self, peer: &Peer, reply: &RenewReply) {
        if let RenewReply::Refused(refusal) = reply {
            let reason = format!("renewal: {}", refusal.code);
            if let Some(line) = refusal_line(&self.shared, &peer.name, &reason) {
                tracing::warn!(node = %peer.name, %refusal, times = line.times, over = %line.over, "refused a renewal");
            }
        } else {
            tracing::info!(node = %peer.name, "renewed a child's certificate");
        }
    }
}

/// A stream's opening frame, within [`OPEN_TIMEOUT`]; `None` for a stream
/// that said nothing in time or something malformed (refused on it).
async fn read_opening(send: &mut quinn::SendStream, recv: &mut quinn::RecvStream) -> Option<Open> {
    // Whoever the peer is, an opening frame is small: a stranger (a
    // joining node) cannot make this relay allocate a large buffer.
    let opening = expect_frame_within::<Open>(recv, MAX_OPENING_FRAME_LEN);
    match tokio::time::timeout(OPEN_TIMEOUT, opening).await {
        Ok(Ok(open)) => Some(open),
        Ok(Err(error)) => {
            tracing::warn!(%error, "bad stream opening");
            let refusal = Refusal::new(ErrorCode::Malformed, error.to_string());
            let _ = write_frame(send, &DownMessage::Refused(refusal)).await;
            let _ = send.finish();
            None
        }
        Err(_) => None,
    }
}
