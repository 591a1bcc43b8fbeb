//! The relay daemon: drives the sans-IO [`Core`] with QUIC links, the sled
//! store and, at the root, the HTTPS API.
//!
//! One task owns the core and the store and runs the loop: take an event
//! (from a link task, the uplink, a bundle fetch, the API, a timer), feed it
//! to the core, and execute the actions it returns in order. Link tasks only
//! move frames; nothing outside the loop decides anything.

mod agent_hooks;
mod asked;
mod bundles;
mod children;
mod event;
mod execute;
mod inventory;
pub mod labels;
mod listener;
mod metrics_sampler;
mod moving;
mod options;
mod parent_link;
mod parents;
mod refusal_log;
mod renewal;
mod root_requests;
pub mod root_services;
mod rotation;
mod sealing;
mod serving;
mod shared;
mod signals;
mod startup;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use relaymesh_core::{Core, LinkId, Now};
use relaymesh_protocol::message::{DownMessage, UpMessage};
use relaymesh_protocol::SliceEntry;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::pki::{self, PkiError};
use crate::store::{Store, StoreError};
use crate::transport::uplink::{self, UplinkEvent};

use agent_hooks::{from_reconciler, FromReconciler};
pub use agent_hooks::{AgentHooks, AgentSlice};
pub(crate) use event::{BundleAccess, Event};
pub use options::{Root, RunOptions, DEFAULT_PARENT_GRACE, DEFAULT_REFUSAL_LOG_INTERVAL};
pub(crate) use shared::{Shared, SharedState};
pub use signals::{cancel_on_signals, shutdown_signal};

/// How often link statistics are sampled and the API's view refreshed.
pub const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// How many messages may wait for a slow child before its link is reset (it
/// resumes from its last acknowledged revision when it reconnects).
pub const CHILD_QUEUE: usize = 4096;

/// Verdicts on the parent's connections waiting for the uplink: one or two
/// per connection, taken as they come.
const VERDICT_QUEUE: usize = 8;

/// The most events the loop handles before it carries out what they
/// asked for (sends, store writes) and republishes the inventory: events
/// already queued when one arrives join its batch, so that under a burst
/// (a reconnect storm, a fleet acknowledging a revision) those costs are
/// paid once per batch, not once per event. Nothing waits for a batch to
/// fill: an event alone is carried out at once.
const EVENT_BATCH: usize = 64;

/// Why the daemon could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The data directory holds no identity.
    #[error("{dir} is not initialized: run `relay init` or `relay join` first")]
    NotInitialized {
        /// The data directory.
        dir: String,
    },
    /// The store failed; the daemon stops rather than acknowledge state it
    /// could not make durable.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// TLS configuration could not be built from the stored identity.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// A listener could not be opened.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration has an API address, but this program does not
    /// serve the root's API (only `relay` does).
    #[error("this node is configured as the root (an API address), but this program cannot serve the root's API")]
    NoRootServices,
}

struct ChildHandle {
    connection: quinn::Connection,
    outgoing: mpsc::Sender<ChildBound>,
}

/// What the loop queues for a child's writer. Boxed: a queue allocates
/// its slots 32 at a time, and 32 unboxed messages were 4.9 KB on every
/// link, idle or not (heaptrack, docs/performance.md).
pub(crate) type ChildBound = Box<DownMessage>;

struct ParentHandle {
    generation: u64,
    connection: quinn::Connection,
    outgoing: Option<mpsc::Sender<UpMessage>>,
}

/// Runs the relay whose store is in `data_dir` until `shutdown` is
/// cancelled.
pub async fn run(data_dir: &Path, shutdown: CancellationToken) -> Result<(), DaemonError> {
    let options = RunOptions::default();
    run_with_store(
        data_dir,
        Store::open_existing(data_dir)?,
        shutdown,
        None,
        options,
    )
    .await
}

pub use asked::{AskedQuery, ASKED_QUEUE};

/// Runs the relay whose store is already open (so a caller that changed its
/// configuration does not open the directory twice), with `options` (the
/// certificate lifetime and limits `relay run` was given).
pub async fn run_with_store(
    data_dir: &Path,
    store: Store,
    shutdown: CancellationToken,
    hooks: Option<AgentHooks>,
    options: RunOptions,
) -> Result<(), DaemonError> {
    let name = store
        .identity()?
        .map(|identity| identity.name)
        .unwrap_or_default();
    run_store(data_dir, store, shutdown, hooks, options)
        .instrument(tracing::info_span!("relay", node = %name))
        .await
}

async fn run_store(
    data_dir: &Path,
    store: Store,
    shutdown: CancellationToken,
    hooks: Option<AgentHooks>,
    options: RunOptions,
) -> Result<(), DaemonError> {
    let (Some(identity), Some(config)) = (store.identity()?, store.config()?) else {
        return Err(DaemonError::NotInitialized {
            dir: data_dir.display().to_string(),
        });
    };
    let core = startup::open_core(&store, &identity, &config, &options)?;
    let (events_tx, events_rx) = mpsc::channel(CHILD_QUEUE);
    let (stored_tx, stored_rx) = watch::channel(0u64);
    let (status_tx, status_rx) = watch::channel(0u64);
    let shared = startup::shared_state(
        identity,
        &config,
        &store,
        &core,
        &options,
        startup::SharedChannels {
            events: events_tx.clone(),
            bundles_stored: stored_rx,
            placement_status: status_rx,
        },
    );
    tracing::info!(
        root = config.parent.is_none(),
        head = core.head(),
        "relay starting"
    );

    let mut tasks = tokio::task::JoinSet::new();
    let mut server = None;
    if let Some(listen) = config.listen.as_ref().filter(|_| !options.standby) {
        let endpoint = listener::open(listen, &shared.identity.get(), options.link_idle_timeout)?;
        server = Some(endpoint.clone());
        tracing::info!(address = %listen, "accepting children");
        tasks.spawn(
            listener::accept_loop(endpoint, shared.clone(), shutdown.clone())
                .instrument(tracing::Span::current()),
        );
    }
    let (reconnect_tx, reconnect_rx) = mpsc::channel(1);
    let (verdicts_tx, verdicts_rx) = mpsc::channel(VERDICT_QUEUE);
    let candidates = store.candidates()?;
    let (client_tx, client) = watch::channel(pki::quic_client_config_among(
        &shared.identity.get(),
        &candidates,
    )?);
    let uplink = startup::spawn_uplink(
        &mut tasks,
        &config,
        &options,
        &candidates,
        startup::UplinkChannels {
            client,
            reconnect: reconnect_rx,
            verdicts: verdicts_rx,
            events: events_tx.clone(),
        },
        &shutdown,
    );
    if let Some(api_listen) = &config.api_listen {
        let serve = startup::start_root(api_listen, &options, &shared, &shutdown).await?;
        tasks.spawn(serve.instrument(tracing::Span::current()));
    }

    let mut core = core;
    let renewal = renewal::Renewal::new(
        shared.identity.clone(),
        options.node_cert_validity,
        client_tx,
        server,
        candidates.clone(),
        core.renewal(),
        now(),
    )
    .with_link_idle_timeout(options.link_idle_timeout);
    let mut daemon = Daemon {
        core,
        store,
        shared,
        children: BTreeMap::new(),
        parent: None,
        generation: 0,
        reconnect: reconnect_tx,
        verdicts: verdicts_tx,
        stored: stored_tx,
        status: status_tx,
        dirty: false,
        hooks,
        published: None,
        inventory_published: None,
        labels_counted: None,
        rotating_published: inventory::Recorded::Never,
        queries: BTreeMap::new(),
        parent_config: uplink.parent_config,
        endpoints: options.endpoints.clone(),
        moving: false,
        renewal,
        candidates,
        failover: uplink.failover,
        metrics: options
            .metrics
            .then(metrics_sampler::MetricsSampler::default),
    };
    daemon.rehome_if_needed();
    // A node that stopped between storing the root's trust and adopting it
    // adopts it now; every node reports its chain's mesh CA.
    if let Some(trust) = daemon.core.mesh_trust() {
        daemon.adopt_mesh_trust(now(), &trust).await?;
    }
    daemon.report_mesh_ca(now());
    let result = daemon.run(events_rx, shutdown.clone()).await;
    if let Err(DaemonError::Store(error)) = &result {
        // Fail-stop: the core has moved on in memory, and sled keeps an IO
        // error for good, so nothing after this could be made durable. A
        // restart (once the data directory takes writes again) resumes
        // from what was flushed, which covers everything acknowledged.
        tracing::error!(
            %error,
            "the store cannot write: stopping, acknowledging nothing more; \
             restart once the data directory is writable"
        );
    }
    shutdown.cancel();
    for child in daemon.children.values() {
        child.connection.close(0u32.into(), b"relay shutting down");
    }
    if matches!(result, Err(DaemonError::Store(_))) {
        // Neither a last flush nor the link tasks' goodbyes: sled may wait
        // for ever on a log it can no longer write (seen with a file-size
        // limit), and the process must exit for a supervisor to restart it.
        return result;
    }
    daemon.store.flush_async().await?;
    while tasks.join_next().await.is_some() {}
    tracing::info!("relay stopped");
    result
}

struct Daemon {
    core: Core,
    store: Store,
    shared: Shared,
    children: BTreeMap<LinkId, ChildHandle>,
    parent: Option<ParentHandle>,
    generation: u64,
    reconnect: mpsc::Sender<()>,
    /// Tells the uplink whether the parent welcomed or refused this node.
    verdicts: mpsc::Sender<uplink::Verdict>,
    stored: watch::Sender<u64>,
    /// Publishes [`Core::status_version`].
    status: watch::Sender<u64>,
    /// Mutations were applied but not yet flushed.
    dirty: bool,
    /// An edge agent's reconciler, if this node is an agent.
    hooks: Option<AgentHooks>,
    /// The head and bundle count last published to the reconciler.
    published: Option<(u64, u64)>,
    /// The core's inventory and link measurement versions, and the version
    /// of its `labels/` entries, last published to the API.
    inventory_published: Option<(u64, u64, (usize, u64))>,
    /// The slice's head when the `labels/` entries were last counted, and
    /// what they counted: the count walks those entries, so it is taken
    /// again only when the slice changed.
    labels_counted: Option<(u64, (usize, u64))>,
    /// The mesh CA rotation when the relays' issuer keys were last
    /// recorded: a change records them all again, not only the changed
    /// records'.
    rotating_published: inventory::Recorded,
    /// This node's certificate and when to renew it.
    renewal: renewal::Renewal,
    /// The parent the uplink dials (replaced when the node moves).
    parent_config: Option<watch::Sender<crate::config::ParentConfig>>,
    /// Where the uplink dials from, for the join of a move.
    endpoints: uplink::Endpoints,
    /// A join for a move is under way.
    moving: bool,
    /// The relays this node may have as parent (empty: only its own).
    candidates: Vec<relaymesh_protocol::CandidateParent>,
    /// Where the uplink learns of them (a move ends them).
    failover: Option<watch::Sender<Option<uplink::Failover>>>,
    /// Where the answers to the core's queries go. Bounded by the core,
    /// which answers every query it was asked within its timeout.
    queries: BTreeMap<relaymesh_core::QueryId, oneshot::Sender<relaymesh_protocol::query::Answer>>,
    /// What the metrics endpoint needs from the loop, when it is served.
    metrics: Option<metrics_sampler::MetricsSampler>,
}

impl Daemon {
    async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        shutdown: CancellationToken,
    ) -> Result<(), DaemonError> {
        let mut stats = tokio::time::interval(STATS_INTERVAL);
        // An agent without a metrics endpoint has no links to sample and no
        // refusals to count (it serves no one): its loop wakes only for
        // events. 5,000 hollow agents each woken once a second took 30 %
        // of their process's CPU while idle (docs/performance.md).
        let sampling = self.hooks.is_none() || self.metrics.is_some();
        self.execute().await?;
        // What the store held at startup reaches the reconciler and the API
        // now, not with the first event: a cut-off agent may wait long for
        // one, and it applies what it stored meanwhile.
        self.publish();
        loop {
            let deadline = self.core.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Some(event) => {
                        self.handle(event).await?;
                        for _ in 1..EVENT_BATCH {
                            let Ok(event) = events.try_recv() else { break };
                            self.handle(event).await?;
                        }
                    }
                    None => return Ok(()),
                },
                () = sleep_until(deadline) => self.core.handle_timeout(now()),
                _ = stats.tick(), if sampling => {
                    self.sample_links();
                    self.publish_metrics();
                }
                Some(said) = from_reconciler(&mut self.hooks) => match said {
                    FromReconciler::Status(key, status) => {
                        self.core.set_own_status(now(), &key, status);
                    }
                    FromReconciler::OutOfRoom(out_of_room) => {
                        self.core.set_out_of_room(now(), out_of_room);
                    }
                    FromReconciler::Unreachable(unreachable) => {
                        self.core.set_cluster_unreachable(now(), unreachable);
                    }
                },
            }
            self.execute().await?;
            self.publish();
        }
    }

    /// Hands what the last event changed to those who watch this node: the
    /// agent's reconciler, the API's inventory, the status watchers.
    fn publish(&mut self) {
        self.publish_slice();
        self.publish_inventory();
        let version = self.core.status_version();
        if let Some(metrics) = &mut self.metrics {
            metrics.status_version(version);
        }
        self.status.send_if_modified(|published| {
            let changed = *published != version;
            *published = version;
            changed
        });
    }

    /// Tells an agent's reconciler about a new slice or a newly stored bundle.
    fn publish_slice(&mut self) {
        let Some(hooks) = &self.hooks else { return };
        let current = (self.core.head(), *self.stored.borrow());
        if self.published == Some(current) {
            return;
        }
        self.published = Some(current);
        let entries: Vec<SliceEntry> = self.core.entries().cloned().collect();
        hooks.slice.send_replace(AgentSlice {
            entries: Arc::new(entries),
            bundles_stored: current.1,
        });
    }

    async fn handle(&mut self, event: Event) -> Result<(), DaemonError> {
        let now = now();
        match event {
            Event::ChildConnected {
                link,
                peer,
                hello,
                connection,
                outgoing,
                reply,
            } => {
                let result = self
                    .core
                    .handle_child_connected(now, link, &peer.name, peer.role, hello);
                if result.is_ok() {
                    if let Some(metrics) = &mut self.metrics {
                        metrics.child_connected(&peer.name);
                    }
                    self.children.insert(
                        link,
                        ChildHandle {
                            connection,
                            outgoing,
                        },
                    );
                }
                let _ = reply.send(result);
            }
            Event::ChildMessage { link, message } => {
                self.core.handle_child_message(now, link, message);
            }
            Event::ChildDisconnected { link } => {
                if self.children.remove(&link).is_some() {
                    self.core.handle_child_disconnected(now, link);
                }
            }
            Event::Uplink(UplinkEvent::Connected {
                connection, parent, ..
            }) => {
                self.fail_over_if_elsewhere(now, &parent)?;
                if self.renewal.expired() {
                    // Nothing but a renewal is accepted on this connection.
                    let events = self.shared.events.clone();
                    self.renewal
                        .renew_expired(&self.store, connection, &events, self.core.renewal(), now)
                        .await?;
                } else {
                    if let Some(metrics) = &mut self.metrics {
                        metrics.parent_connected(&parent.name);
                    }
                    self.parent_connected(connection);
                }
            }
            Event::Uplink(UplinkEvent::Disconnected { .. }) => {
                self.parent = None;
                self.core.handle_parent_disconnected(now);
            }
            Event::ParentMessage {
                generation,
                message,
            } => {
                if self.is_current(generation) {
                    match &message {
                        DownMessage::Welcome(_) => self.tell_uplink(None),
                        DownMessage::Refused(refusal) => self.tell_uplink(Some(refusal.clone())),
                        _ => {}
                    }
                    self.core.handle_parent_message(now, message);
                }
            }
            Event::Moved(result) => self.finish_move(now, result).await?,
            Event::LeaveTimeout { generation } => self.leave_timeout(generation),
            Event::ParentStreamEnded {
                generation,
                reason,
                refusal,
            } => {
                if self.is_current(generation) {
                    if refusal.is_some() {
                        // The uplink logs it, with when it dials again.
                        tracing::debug!(%reason, "the parent refused the control stream");
                        self.tell_uplink(refusal);
                    } else {
                        tracing::warn!(%reason, "control stream to parent ended");
                    }
                    if let Some(parent) = self.parent.take() {
                        parent
                            .connection
                            .close(0u32.into(), b"control stream ended");
                    }
                    self.core.handle_parent_disconnected(now);
                }
            }
            Event::BundleFetched { id, result } => match result {
                Ok(()) => {
                    self.core.handle_bundle_stored(now, id);
                    self.stored.send_modify(|count| *count += 1);
                }
                Err(bundles::FetchFailure::Store(error)) => return Err(error.into()),
                Err(bundles::FetchFailure::Link(error)) => {
                    tracing::warn!(bundle = %id, %error, "bundle fetch failed");
                    self.core.handle_bundle_failed(now, id);
                }
            },
            Event::BundleAccess { child, id, reply } => {
                let access = if !self.core.may_serve_bundle(&child, &id) {
                    BundleAccess::Denied
                } else if self.core.holds_bundle(&id) {
                    BundleAccess::Held
                } else {
                    BundleAccess::Pending
                };
                let _ = reply.send(access);
            }
            Event::BundleServed { child, id, bytes } => {
                self.core.handle_bundle_served(now, &child, id, bytes);
            }
            Event::Root(request) => self.handle_root(now, request).await,
            Event::Renewed(answer) => {
                let answered = self
                    .renewal
                    .answered(&self.store, answer, self.core.renewal(), now)
                    .await?;
                match answered {
                    None => {}
                    Some(renewal::AfterExpired::Redial) => {
                        let _ = self.reconnect.try_send(());
                    }
                    Some(renewal::AfterExpired::Refused {
                        connection,
                        refusal,
                    }) => {
                        let verdict = uplink::Verdict {
                            connection,
                            refusal: Some(refusal),
                        };
                        let _ = self.verdicts.try_send(verdict);
                    }
                }
                self.tell_children_if_issuer_changed();
                self.report_mesh_ca(now);
            }
            Event::LocalAnswer { id, answer } => self.core.handle_local_answer(now, id, answer),
            Event::MayAttach {
                node,
                role,
                chain,
                reply,
            } => {
                let _ = reply.send(self.may_attach(&node, role, &chain));
            }
        }
        Ok(())
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The current time for the core.
pub(crate) fn now() -> Now {
    Now {
        instant: Instant::now(),
        unix_ms: unix_ms(),
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}
