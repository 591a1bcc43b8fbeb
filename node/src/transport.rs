//! QUIC links: framed streams, the child's uplink to its parent (dialing the
//! nearest address, reconnecting with jittered backoff), joining with a token,
//! and bundle transfer on streams of their own.
//!
//! This is IO only. What to send and when is the core's decision; the daemon
//! connects the two. Relays and edge agents use the same uplink code.

pub mod backoff;
pub mod bundle_transfer;
pub mod join;
pub mod uplink;

use std::net::SocketAddr;

use relaymesh_protocol::codec::{self, CodecError};
use relaymesh_protocol::limits::{FRAME_HEADER_LEN, MAX_FRAME_LEN};
use relaymesh_protocol::Refusal;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::pki::PkiError;

/// Why a link, or one exchange on it, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The address could not be resolved or used.
    #[error("cannot use address {address:?}: {reason}")]
    Address {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A QUIC endpoint could not be opened.
    #[error("cannot open a QUIC endpoint: {0}")]
    Endpoint(#[source] std::io::Error),
    /// The connection could not be started.
    #[error("cannot connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// The connection failed or was closed (including a refused TLS
    /// handshake: unknown CA, bad certificate).
    #[error("connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// Writing to a stream failed.
    #[error("write: {0}")]
    Write(#[from] quinn::WriteError),
    /// Reading from a stream failed.
    #[error("read: {0}")]
    Read(#[from] quinn::ReadError),
    /// The connection was lost before the peer acknowledged a stream's data.
    #[error("not acknowledged: {0}")]
    Unacknowledged(#[from] quinn::StoppedError),
    /// The stream ended in the middle of a frame or bundle.
    #[error("the stream ended early")]
    Truncated,
    /// A frame was malformed or too large.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The peer refused the request.
    #[error("refused by peer: {0}")]
    Refused(#[source] Refusal),
    /// The peer broke the protocol.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A TLS identity problem.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Nothing answered in time.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// This side could not read or keep what the stream carries (its store
    /// failed, or a bundle went away while it was being sent).
    #[error("local failure: {0}")]
    Local(String),
}

/// Writes one frame.
pub async fn write_frame<T: Serialize>(
    send: &mut quinn::SendStream,
    message: &T,
) -> Result<(), LinkError> {
    let frame = codec::encode_frame(message)?;
    send.write_all(&frame).await?;
    Ok(())
}

/// Reads one frame, or `None` if the stream ended cleanly between frames.
pub async fn read_frame<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
) -> Result<Option<T>, LinkError> {
    read_frame_within(recv, MAX_FRAME_LEN).await
}

/// Reads one frame that must be there.
pub async fn expect_frame<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
) -> Result<T, LinkError> {
    read_frame(recv).await?.ok_or(LinkError::Truncated)
}

/// Reads one frame that must be there and be at most `limit` bytes: for
/// what a peer sends before it is authenticated.
pub async fn expect_frame_within<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
    limit: usize,
) -> Result<T, LinkError> {
    read_frame_within(recv, limit)
        .await?
        .ok_or(LinkError::Truncated)
}

async fn read_frame_within<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
    limit: usize,
) -> Result<Option<T>, LinkError> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    match recv.read_exact(&mut header).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(quinn::ReadExactError::FinishedEarly(_)) => return Err(LinkError::Truncated),
        Err(quinn::ReadExactError::ReadError(error)) => return Err(error.into()),
    }
    // Checked before the payload buffer is allocated.
    let len = codec::payload_len_within(header, limit)?;
    let mut payload = vec![0u8; len];
    recv.read_exact(&mut payload)
        .await
        .map_err(|error| match error {
            quinn::ReadExactError::FinishedEarly(_) => LinkError::Truncated,
            quinn::ReadExactError::ReadError(error) => error.into(),
        })?;
    Ok(Some(codec::decode(&payload)?))
}

/// Resolves `host:port` to socket addresses.
pub async fn resolve(address: &str) -> Result<Vec<SocketAddr>, LinkError> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host(address)
        .await
        .map_err(|error| LinkError::Address {
            address: address.to_string(),
            reason: error.to_string(),
        })?
        .collect();
    if addresses.is_empty() {
        return Err(LinkError::Address {
            address: address.to_string(),
            reason: "no addresses".into(),
        });
    }
    Ok(addresses)
}

/// A client-only QUIC endpoint suited to dialing `target`'s address family.
pub fn client_endpoint(target: &SocketAddr) -> Result<quinn::Endpoint, LinkError> {
    let bind: SocketAddr = if target.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    quinn::Endpoint::client(bind).map_err(LinkError::Endpoint)
}
