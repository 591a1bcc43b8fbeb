//! A child's uplink: keep one connection to the nearest of its parent's
//! addresses, reconnect with jittered backoff, and open the control stream.

use std::net::SocketAddr;
use std::time::Duration;

use relaymesh_protocol::message::{DownMessage, Hello, Open, UpMessage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::{client_endpoint, expect_frame, resolve, write_frame, LinkError};
use crate::config::ParentConfig;

/// How long one dial attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the uplink tells its owner.
#[derive(Debug)]
pub enum UplinkEvent {
    /// Connected to the parent at `address`.
    Connected {
        /// The connection; the owner opens the control stream on it.
        connection: quinn::Connection,
        /// The address that answered fastest.
        address: SocketAddr,
    },
    /// The connection ended.
    Disconnected {
        /// Why, for logs.
        reason: String,
    },
}

/// Keeps a connection to the latest `parent` until `shutdown`, dialing with
/// the latest `client` configuration (both change when the node moves).
/// Every `()` received on `reconnect` drops the current connection and
/// dials again.
pub async fn run(
    parent: tokio::sync::watch::Receiver<ParentConfig>,
    client: tokio::sync::watch::Receiver<quinn::ClientConfig>,
    mut endpoints: Endpoints,
    events: mpsc::Sender<UplinkEvent>,
    mut reconnect: mpsc::Receiver<()>,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::default();
    loop {
        // The newest configuration: a renewed certificate is used from the
        // next connection on.
        let config = client.borrow().clone();
        let parent = parent.borrow().clone();
        let attempt = tokio::select! {
            attempt = connect_nearest(&parent, &config, &mut endpoints) => attempt,
            () = shutdown.cancelled() => return,
        };
        match attempt {
            Ok((connection, address)) => {
                backoff.reset();
                tracing::info!(parent = %parent.name, %address, rtt = ?connection.rtt(), "connected to parent");
                let event = UplinkEvent::Connected {
                    connection: connection.clone(),
                    address,
                };
                if events.send(event).await.is_err() {
                    return;
                }
                let reason = tokio::select! {
                    error = connection.closed() => error.to_string(),
                    Some(()) = reconnect.recv() => {
                        connection.close(0u32.into(), b"reconnect");
                        "reconnect requested".to_string()
                    }
                    () = shutdown.cancelled() => {
                        connection.close(0u32.into(), b"shutdown");
                        return;
                    }
                };
                tracing::warn!(parent = %parent.name, %reason, "parent link lost");
                if events
                    .send(UplinkEvent::Disconnected { reason })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(parent = %parent.name, %error, "cannot reach parent");
            }
        }
        let delay = backoff.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// Client endpoints by address family, opened on first use. Clones share the
/// endpoints opened before the clone: the testbed opens one and hands it to
/// thousands of hollow agents, so they share one UDP socket and its buffers
/// (a real node has one uplink and never needs that).
#[derive(Default, Clone, Debug)]
pub struct Endpoints {
    v4: Option<quinn::Endpoint>,
    v6: Option<quinn::Endpoint>,
}

impl Endpoints {
    /// Endpoints that dial with `endpoint` for its address family (the
    /// other family's is opened on first use): for a caller that built
    /// its own, e.g. the testbed's, whose socket counts what it sends.
    pub fn with_endpoint(endpoint: quinn::Endpoint) -> Result<Self, LinkError> {
        let local = endpoint.local_addr().map_err(LinkError::Endpoint)?;
        let mut endpoints = Self::default();
        match local {
            SocketAddr::V4(_) => endpoints.v4 = Some(endpoint),
            SocketAddr::V6(_) => endpoints.v6 = Some(endpoint),
        }
        Ok(endpoints)
    }

    /// The endpoint for dialing `target`.
    pub fn for_target(&mut self, target: &SocketAddr) -> Result<quinn::Endpoint, LinkError> {
        let slot = if target.is_ipv6() {
            &mut self.v6
        } else {
            &mut self.v4
        };
        if let Some(endpoint) = slot {
            return Ok(endpoint.clone());
        }
        let endpoint = client_endpoint(target)?;
        *slot = Some(endpoint.clone());
        Ok(endpoint)
    }
}

/// Dials every address of `parent` at once and keeps the connection whose
/// handshake finishes first, which is the one with the lowest round-trip
/// time; the attempts still under way are dropped, so a slow or dead address
/// never holds up a live one.
pub async fn connect_nearest(
    parent: &ParentConfig,
    client: &quinn::ClientConfig,
    endpoints: &mut Endpoints,
) -> Result<(quinn::Connection, SocketAddr), LinkError> {
    let mut targets = Vec::new();
    for address in &parent.addresses {
        match resolve(address).await {
            Ok(resolved) => targets.extend(resolved),
            Err(error) => tracing::warn!(%error, "skipping parent address"),
        }
    }
    let mut attempts = futures::stream::FuturesUnordered::new();
    for target in targets {
        let endpoint = endpoints.for_target(&target)?;
        let connecting = endpoint.connect_with(client.clone(), target, &parent.name)?;
        attempts.push(async move {
            let result = tokio::time::timeout(CONNECT_TIMEOUT, connecting).await;
            (target, result)
        });
    }
    let mut last_error = LinkError::Address {
        address: parent.addresses.join(","),
        reason: "no usable address".into(),
    };
    while let Some((target, result)) = futures::StreamExt::next(&mut attempts).await {
        match result {
            Ok(Ok(connection)) => return Ok((connection, target)),
            Ok(Err(error)) => {
                tracing::debug!(%target, %error, "parent address failed");
                last_error = error.into();
            }
            Err(_) => last_error = LinkError::Timeout(CONNECT_TIMEOUT),
        }
    }
    Err(last_error)
}

/// The two halves of an open control stream.
#[derive(Debug)]
pub struct ControlStream {
    /// Where up messages go.
    pub send: quinn::SendStream,
    /// Where down messages come from.
    pub recv: quinn::RecvStream,
    /// The parent's first message: its welcome or refusal.
    pub first: DownMessage,
}

/// Opens the control stream with `hello` and reads the parent's answer.
pub async fn open_control(
    connection: &quinn::Connection,
    hello: Hello,
) -> Result<ControlStream, LinkError> {
    let (mut send, mut recv) = connection.open_bi().await?;
    write_frame(&mut send, &Open::Control(hello)).await?;
    let first: DownMessage = expect_frame(&mut recv).await?;
    if let DownMessage::Refused(refusal) = first {
        return Err(LinkError::Refused(refusal));
    }
    Ok(ControlStream { send, recv, first })
}

/// Writes up messages from `outgoing` to `send` until the channel closes.
pub async fn pump_up(
    mut send: quinn::SendStream,
    mut outgoing: mpsc::Receiver<UpMessage>,
) -> Result<(), LinkError> {
    while let Some(message) = outgoing.recv().await {
        write_frame(&mut send, &message).await?;
    }
    let _ = send.finish();
    Ok(())
}
