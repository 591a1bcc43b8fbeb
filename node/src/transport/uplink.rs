//! A child's uplink: keep one connection to the nearest of its parent's
//! addresses, reconnect with jittered backoff, and open the control stream.

use std::net::SocketAddr;
use std::time::Duration;

use relaymesh_protocol::message::{DownMessage, Hello, Open, UpMessage};
use relaymesh_protocol::Refusal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backoff::{Failure, Schedule};
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
        /// The parent it belongs to: another candidate than the configured
        /// parent after a failover (see [`Failover`]).
        parent: ParentConfig,
    },
    /// The connection ended.
    Disconnected {
        /// Why, for logs.
        reason: String,
    },
}

/// What the node learned on the control stream of the uplink's connection
/// `connection` (quinn's `stable_id`): whether the parent let it in. The
/// uplink's reconnect schedule resets on a welcome only, and backs off to
/// minutes after a refusal (see [`super::backoff`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The connection it concerns; verdicts on an older one are ignored.
    pub connection: usize,
    /// `None`: welcomed; a refusal: the uplink drops the connection.
    pub refusal: Option<Refusal>,
}

/// A node's candidate parents (see [`relaymesh_protocol::parents`]): once
/// its parent has been silent for `grace`, the uplink dials them all (the
/// parent too) and keeps the first that answers.
#[derive(Debug, Clone)]
pub struct Failover {
    /// Every candidate parent, the current one included.
    pub candidates: Vec<ParentConfig>,
    /// How long the parent may stay silent before the others are dialed.
    pub grace: Duration,
}

/// Keeps a connection to the latest `parent` until `shutdown`, dialing with
/// the latest `client` configuration (both change when the node moves).
/// Every `()` received on `reconnect` drops the current connection and
/// dials again. With the latest `failover`, a parent silent for longer than
/// its grace period is replaced by the nearest candidate that answers.
/// The owner tells, on `verdicts`, whether the parent welcomed or refused
/// it on each connection; the delay before the next dial follows from that
/// and from how dials fail ([`Schedule`]).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    parent: tokio::sync::watch::Receiver<ParentConfig>,
    client: tokio::sync::watch::Receiver<quinn::ClientConfig>,
    failover: tokio::sync::watch::Receiver<Option<Failover>>,
    mut endpoints: Endpoints,
    events: mpsc::Sender<UplinkEvent>,
    mut reconnect: mpsc::Receiver<()>,
    mut verdicts: mpsc::Receiver<Verdict>,
    shutdown: CancellationToken,
) {
    let mut schedule = Schedule::default();
    // Since when nothing was heard from the parent, while there is no link.
    let mut silent_since: Option<tokio::time::Instant> = None;
    loop {
        // The newest configuration: a renewed certificate is used from the
        // next connection on.
        let config = client.borrow().clone();
        let parent = parent.borrow().clone();
        let failover = failover.borrow().clone();
        let candidates = failover
            .as_ref()
            .filter(|failover| silent_since.is_some_and(|since| since.elapsed() >= failover.grace))
            .map(|failover| {
                failover
                    .candidates
                    .iter()
                    .map(|candidate| (candidate.clone(), config.clone()))
                    .collect::<Vec<_>>()
            });
        // While the grace period runs, the parent alone is dialed, and for
        // no longer than the grace period has left.
        let grace_left = failover
            .as_ref()
            .zip(silent_since)
            .map(|(failover, since)| {
                (since + failover.grace).saturating_duration_since(tokio::time::Instant::now())
            });
        let dial = async {
            if let Some(candidates) = &candidates {
                return connect_nearest_of(candidates, &mut endpoints).await;
            }
            let parent_only = connect_nearest(&parent, &config, &mut endpoints);
            let attempt = match grace_left {
                Some(left) => tokio::time::timeout(left, parent_only)
                    .await
                    .unwrap_or(Err(LinkError::Timeout(left))),
                None => parent_only.await,
            };
            attempt.map(|(connection, address)| (connection, address, parent.clone()))
        };
        let attempt = tokio::select! {
            attempt = dial => attempt,
            () = shutdown.cancelled() => return,
        };
        // Why this round ends: decides the next delay.
        let (failure, reason) = match attempt {
            Ok((connection, address, reached)) => {
                if reached.name != parent.name {
                    tracing::warn!(from = %parent.name, to = %reached.name, "the parent was silent for longer than the grace period; re-parenting to the nearest candidate");
                }
                tracing::info!(parent = %reached.name, %address, rtt = ?connection.rtt(), "connected to parent");
                let event = UplinkEvent::Connected {
                    connection: connection.clone(),
                    address,
                    parent: reached.clone(),
                };
                if events.send(event).await.is_err() {
                    return;
                }
                let id = connection.stable_id();
                let watch = watch_connection(&connection, failover.is_some());
                tokio::pin!(watch);
                let (reason, heard, mut refusal) = loop {
                    tokio::select! {
                        // First: a refusal the owner reported just before
                        // it closed the connection is what ended it.
                        biased;
                        Some(verdict) = verdicts.recv() => {
                            if verdict.connection != id {
                                continue;
                            }
                            let Some(refusal) = verdict.refusal else {
                                schedule.admitted();
                                continue;
                            };
                            connection.close(0u32.into(), b"refused");
                            let reason = refusal.to_string();
                            break (reason, tokio::time::Instant::now(), Some(refusal));
                        }
                        (error, heard) = &mut watch => break (error.to_string(), heard, None),
                        Some(()) = reconnect.recv() => {
                            connection.close(0u32.into(), b"reconnect");
                            let now = tokio::time::Instant::now();
                            break ("reconnect requested".to_string(), now, None);
                        }
                        () = shutdown.cancelled() => {
                            connection.close(0u32.into(), b"shutdown");
                            return;
                        }
                    }
                };
                // A verdict sent as the link went down.
                while let Ok(verdict) = verdicts.try_recv() {
                    match verdict {
                        Verdict { connection, .. } if connection != id => {}
                        Verdict { refusal: None, .. } => schedule.admitted(),
                        Verdict {
                            refusal: Some(late),
                            ..
                        } => refusal = refusal.or(Some(late)),
                    }
                }
                silent_since = Some(heard);
                if events
                    .send(UplinkEvent::Disconnected {
                        reason: reason.clone(),
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                let failure = refusal
                    .as_ref()
                    .map_or(Failure::Transient, Failure::of_refusal);
                match refusal {
                    Some(refusal) => (failure, Lost::Refused(reached.name, refusal.to_string())),
                    None => (failure, Lost::Link(reached.name, reason)),
                }
            }
            Err(error) => {
                silent_since.get_or_insert_with(tokio::time::Instant::now);
                (
                    Failure::of_link_error(&error),
                    Lost::Unreachable(parent.name.clone(), error.to_string()),
                )
            }
        };
        let mut delay = schedule.next_delay(failure);
        if let (Some(failover), Some(since)) = (&failover, silent_since) {
            // Never sleep past the end of the grace period.
            let left =
                (since + failover.grace).saturating_duration_since(tokio::time::Instant::now());
            if !left.is_zero() {
                delay = delay.min(left);
            }
        }
        reason.log(failure, delay);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// How a round of the uplink ended, for its log line: the parent's name and
/// what was said.
enum Lost {
    /// The parent refused this node on its control stream.
    Refused(String, String),
    /// An established link went down.
    Link(String, String),
    /// No address of the parent (or any candidate) could be dialed.
    Unreachable(String, String),
}

impl Lost {
    /// One line per round, saying when the next dial is; a refusal as
    /// revoked, unknown or expired says so.
    fn log(&self, failure: Failure, delay: Duration) {
        let next_attempt_ms = delay.as_millis() as u64;
        let next_attempt_in = humantime::format_duration(Duration::from_millis(next_attempt_ms));
        match (self, failure) {
            (
                Self::Refused(parent, reason) | Self::Unreachable(parent, reason),
                Failure::Refused(refused),
            ) => {
                tracing::warn!(%parent, %refused, %reason, next_attempt_ms, "refused by the parent ({refused}); next attempt in {next_attempt_in}")
            }
            (Self::Refused(parent, reason), Failure::Transient) => {
                tracing::warn!(%parent, %reason, next_attempt_ms, "refused by the parent; next attempt in {next_attempt_in}")
            }
            (Self::Link(parent, reason), _) => {
                tracing::warn!(%parent, %reason, next_attempt_ms, "parent link lost")
            }
            (Self::Unreachable(parent, error), Failure::Transient) => {
                tracing::warn!(%parent, %error, next_attempt_ms, "cannot reach parent")
            }
        }
    }
}

/// Waits until `connection` ends; returns why and when the parent was last
/// heard from. With `sample`, the datagrams received are counted every
/// [`SAMPLE`], so that moment is known however the link ended (the daemon
/// may close it itself once its control stream fails); without, an idle
/// timeout means nothing was heard for [`crate::pki::IDLE_TIMEOUT`].
async fn watch_connection(
    connection: &quinn::Connection,
    sample: bool,
) -> (quinn::ConnectionError, tokio::time::Instant) {
    let mut heard = tokio::time::Instant::now();
    let mut received = connection.stats().udp_rx.datagrams;
    let mut ticks = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            error = connection.closed() => {
                if !sample {
                    if matches!(error, quinn::ConnectionError::TimedOut) {
                        heard = tokio::time::Instant::now()
                            .checked_sub(crate::pki::IDLE_TIMEOUT)
                            .unwrap_or(heard);
                    } else {
                        heard = tokio::time::Instant::now();
                    }
                }
                return (error, heard);
            }
            _ = ticks.tick(), if sample => {
                let now_received = connection.stats().udp_rx.datagrams;
                if now_received != received {
                    received = now_received;
                    heard = tokio::time::Instant::now();
                }
            }
        }
    }
}

/// How often a node with candidate parents notes whether its parent spoke.
const SAMPLE: Duration = Duration::from_secs(1);

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
    let (connection, address, _) =
        connect_nearest_of(&[(parent.clone(), client.clone())], endpoints).await?;
    Ok((connection, address))
}

/// [`connect_nearest`] over several parents at once, each dialed with its
/// own client configuration: every address of every parent is dialed, and
/// the first handshake to finish wins. Returns the connection, the address
/// and the parent that answered.
pub async fn connect_nearest_of(
    parents: &[(ParentConfig, quinn::ClientConfig)],
    endpoints: &mut Endpoints,
) -> Result<(quinn::Connection, SocketAddr, ParentConfig), LinkError> {
    let mut attempts = futures::stream::FuturesUnordered::new();
    for (index, (parent, client)) in parents.iter().enumerate() {
        for address in &parent.addresses {
            let resolved = match resolve(address).await {
                Ok(resolved) => resolved,
                Err(error) => {
                    tracing::warn!(parent = %parent.name, %error, "skipping parent address");
                    continue;
                }
            };
            for target in resolved {
                let endpoint = endpoints.for_target(&target)?;
                let connecting = endpoint.connect_with(client.clone(), target, &parent.name)?;
                attempts.push(async move {
                    let result = tokio::time::timeout(CONNECT_TIMEOUT, connecting).await;
                    (index, target, result)
                });
            }
        }
    }
    let mut last_error = LinkError::Address {
        address: parents
            .iter()
            .flat_map(|(parent, _)| parent.addresses.iter().cloned())
            .collect::<Vec<_>>()
            .join(","),
        reason: "no usable address".into(),
    };
    while let Some((index, target, result)) = futures::StreamExt::next(&mut attempts).await {
        match result {
            Ok(Ok(connection)) => return Ok((connection, target, parents[index].0.clone())),
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
