//! The relay daemon: drives the sans-IO [`Core`] with QUIC links, the sled
//! store and, at the root, the HTTPS API.
//!
//! One task owns the core and the store and runs the loop: take an event
//! (from a link task, the uplink, a bundle fetch, the API, a timer), feed it
//! to the core, and execute the actions it returns in order. Link tasks only
//! move frames; nothing outside the loop decides anything.

mod asked;
mod bundles;
mod inventory;
pub mod labels;
mod listener;
mod moving;
mod parents;
mod refusal_log;
mod renewal;
mod root_requests;
pub mod root_services;
mod rotation;
mod serving;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use relaymesh_core::{Action, Core, CoreConfig, LinkId, LinkStats, Now, DEFAULT_LOG_KEEP};
use relaymesh_protocol::message::{DownMessage, Hello, UpMessage};
use relaymesh_protocol::{BundleId, Refusal, SliceEntry};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::NodeConfig;
use crate::deny_list::DenyList;
use crate::identity::LiveIdentity;
use crate::limits::{ConnectionGate, JoinRate, Limits, Refusals, StreamGate};
use crate::pki::{self, Peer, PkiError};
use crate::store::{Store, StoreError};
use crate::transport::uplink::{self, UplinkEvent};
use crate::transport::LinkError;
use root_services::RootRequest;

/// How often link statistics are sampled and the API's view refreshed.
pub const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// How many messages may wait for a slow child before its link is reset (it
/// resumes from its last acknowledged revision when it reconnects).
pub const CHILD_QUEUE: usize = 4096;

/// Verdicts on the parent's connections waiting for the uplink: one or two
/// per connection, taken as they come.
const VERDICT_QUEUE: usize = 8;

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

/// Events the loop handles.
pub(crate) enum Event {
    ChildConnected {
        link: LinkId,
        peer: Peer,
        hello: Hello,
        connection: quinn::Connection,
        outgoing: mpsc::Sender<DownMessage>,
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    ChildMessage {
        link: LinkId,
        message: UpMessage,
    },
    ChildDisconnected {
        link: LinkId,
    },
    Uplink(UplinkEvent),
    ParentMessage {
        generation: u64,
        message: DownMessage,
    },
    /// The join for a move ended (see `moving`).
    Moved(Result<Box<crate::transport::join::Joined>, String>),
    /// The old parent had its time to close the link of a node that left.
    LeaveTimeout {
        generation: u64,
    },
    ParentStreamEnded {
        generation: u64,
        reason: String,
        /// The parent's refusal, if that is how the stream ended.
        refusal: Option<Refusal>,
    },
    BundleFetched {
        id: BundleId,
        result: Result<(), bundles::FetchFailure>,
    },
    BundleAccess {
        child: String,
        id: BundleId,
        reply: oneshot::Sender<BundleAccess>,
    },
    /// A child acknowledged every byte of a bundle this relay served it.
    BundleServed {
        child: String,
        id: BundleId,
        bytes: u64,
    },
    /// The parent answered a renewal request: the new chain, or why not.
    Renewed(renewal::Answer),
    /// At the root: its API or placement controller asks (see
    /// [`root_services`]).
    Root(RootRequest),
    /// The answer to a query about this node's own cluster
    /// ([`relaymesh_core::Action::Asked`]).
    LocalAnswer {
        id: relaymesh_core::QueryId,
        answer: relaymesh_protocol::query::Answer,
    },
    /// Whether a node this relay did not admit may have it as parent: the
    /// root's grant names this relay and the relay that issued its
    /// certificate (`chain`, leaf first) among its candidate parents.
    MayAttach {
        node: String,
        role: relaymesh_protocol::Role,
        chain: Vec<Vec<u8>>,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// Whether a child may have a bundle, and whether it is here yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BundleAccess {
    Held,
    Pending,
    Denied,
}

/// Everything the link tasks share with the loop.
#[derive(Clone)]
pub(crate) struct Shared {
    pub identity: LiveIdentity,
    pub store: Store,
    pub events: mpsc::Sender<Event>,
    /// Counts bundles stored, so a task waiting for one can wake up.
    pub bundles_stored: watch::Receiver<u64>,
    /// The core's status version, so the root's status writer wakes when
    /// a placement's status may have changed.
    pub placement_status: watch::Receiver<u64>,
    /// The tree as the API serves it, published by the loop when the
    /// core's inventory changed (at the root only: nothing else reads it).
    pub inventory: root_services::SharedInventory,
    pub config: Arc<NodeConfig>,
    /// The revocations this relay holds, as the listener checks them.
    pub deny: Arc<RwLock<DenyList>>,
    /// How long the TLS certificates this relay signs for its children last.
    pub node_cert_validity: Duration,
    /// How long after a child's certificate expired this relay still
    /// renews it (see [`pki::standing`]).
    pub expired_cert_grace: Duration,
    /// Connections open now, in all and per source address.
    pub connections: Arc<ConnectionGate>,
    /// Joins each source address may still start.
    pub joins: Arc<JoinRate>,
    /// Joins being worked on now.
    pub joins_in_progress: StreamGate,
    /// Refusals by the links and the API, until the loop counts them.
    pub refusals: Arc<Refusals>,
    /// The listener's refusals of peers logged lately (one line per peer
    /// and reason per interval).
    pub refusal_log: Arc<Mutex<refusal_log::RefusalLog>>,
    /// Bundles being served, shared in memory, and the bound on serves.
    pub serving: Arc<serving::Serving>,
    /// The root's trust entry exists (the mesh rotated its CA or token
    /// key at least once): nodes report what they hold of it from then on.
    pub trust_published: Arc<std::sync::atomic::AtomicBool>,
}

/// How a daemon runs, beyond what its store holds.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How long the TLS certificates this relay signs for its children
    /// (at join and renewal) last, and, at the root, its own.
    pub node_cert_validity: Duration,
    /// How long after a child's certificate expired this relay still
    /// renews it over the link, unless the child is revoked.
    pub expired_cert_grace: Duration,
    /// The limits on what peers may cost this relay.
    pub limits: Limits,
    /// The QUIC endpoints to dial the parent from; empty (the default), the
    /// uplink opens its own.
    pub endpoints: uplink::Endpoints,
    /// How long a node with candidate parents lets its parent stay silent
    /// before it dials the others (see [`relaymesh_protocol::parents`]).
    pub parent_grace: Duration,
    /// How long an agent child may be disconnected before count-bounded
    /// placements treat its cluster as lost and place it elsewhere;
    /// `None`: never.
    pub lost_after: Option<Duration>,
    /// How long the listener stays quiet about a peer it refused (for one
    /// reason) after logging it; the next line counts the refusals since.
    pub refusal_log_interval: Duration,
    /// The root's services, started when the configuration has an API
    /// address; `None` in programs that are never the root (the edge
    /// agent).
    pub root: Option<Root>,
}

/// The root's services, as [`RunOptions`] carries them.
#[derive(Clone)]
pub struct Root(pub Arc<dyn root_services::RootServices>);

impl std::fmt::Debug for Root {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Root(..)")
    }
}

/// How long a parent may stay silent before a node with candidate parents
/// re-parents, unless `--parent-grace` says otherwise.
pub const DEFAULT_PARENT_GRACE: Duration = Duration::from_secs(30);

/// How long the listener stays quiet about a refused peer after a line,
/// unless `--refusal-log-interval` says otherwise.
pub const DEFAULT_REFUSAL_LOG_INTERVAL: Duration = refusal_log::DEFAULT_INTERVAL;

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            node_cert_validity: pki::DEFAULT_NODE_CERT_VALIDITY,
            expired_cert_grace: pki::DEFAULT_EXPIRED_CERT_GRACE,
            limits: Limits::default(),
            endpoints: uplink::Endpoints::default(),
            parent_grace: DEFAULT_PARENT_GRACE,
            lost_after: None,
            refusal_log_interval: DEFAULT_REFUSAL_LOG_INTERVAL,
            root: None,
        }
    }
}

struct ChildHandle {
    connection: quinn::Connection,
    outgoing: mpsc::Sender<DownMessage>,
}

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

/// What an edge agent's reconciler sees of its node: the slice, republished
/// after every change and every bundle stored.
#[derive(Debug, Clone, Default)]
pub struct AgentSlice {
    /// The entries assigned to this cluster.
    pub entries: Arc<Vec<SliceEntry>>,
    /// How many bundles were stored so far (a bundle an entry references may
    /// arrive after the entry).
    pub bundles_stored: u64,
}

pub use asked::{AskedQuery, ASKED_QUEUE};

/// The channels between an agent's daemon and its reconciler.
#[derive(Debug)]
pub struct AgentHooks {
    /// Where the daemon publishes the slice.
    pub slice: watch::Sender<AgentSlice>,
    /// Where the reconciler reports this cluster's status per placement
    /// (`None` forgets a placement).
    pub status: mpsc::Receiver<(String, Option<relaymesh_protocol::PlacementStatus>)>,
    /// Where queries about the cluster go to be answered (at most
    /// [`ASKED_QUEUE`] waiting; make the channel that long). `None`: the
    /// agent answers that it has nothing to read.
    pub queries: Option<mpsc::Sender<AskedQuery>>,
    /// Whether the reconciler finds its cluster out of room (its replica
    /// capacity): the node labels itself full while it is. `None`: never.
    pub out_of_room: Option<watch::Receiver<bool>>,
    /// Whether the reconciler finds its cluster's API not answering: the
    /// node labels itself unreachable while it is. `None`: never.
    pub unreachable: Option<watch::Receiver<bool>>,
}

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
    let persisted = store.load()?;
    let partial = store.remove_partial_bundles()?;
    if partial > 0 {
        tracing::info!(
            bundles = partial,
            "removed bundles whose transfer did not finish"
        );
    }
    let held = store.bundle_ids()?;
    let core = Core::new(
        CoreConfig {
            name: identity.name.clone(),
            role: identity.role,
            parent: config.parent.as_ref().map(|parent| parent.name.clone()),
            // A relay reports its issuer key, which the root records and
            // names in tokens (see `store::issuer_keys`).
            labels: crate::store::with_issuer_key_label(
                config.labels.clone(),
                identity
                    .issuer
                    .as_ref()
                    .filter(|_| !identity.is_root())
                    .and_then(|issuer| pki::public_key_sha256(&issuer.cert_der).ok()),
            ),
            capacity: config.capacity.clone(),
            addresses: config.advertise.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            log_keep: DEFAULT_LOG_KEEP,
            root_key: identity.token_key.clone(),
            max_records_per_child: options.limits.max_records_per_child,
            max_status_keys_per_child: options.limits.max_status_keys_per_child,
        },
        persisted,
        held,
        now(),
    );
    let mut core = core;
    core.set_lost_after(now(), options.lost_after);
    let (events_tx, events_rx) = mpsc::channel(CHILD_QUEUE);
    let (stored_tx, stored_rx) = watch::channel(0u64);
    let (status_tx, status_rx) = watch::channel(0u64);
    let shared = Shared {
        placement_status: status_rx,
        identity: LiveIdentity::new(identity),
        store: store.clone(),
        events: events_tx.clone(),
        bundles_stored: stored_rx,
        inventory: Default::default(),
        config: Arc::new(config.clone()),
        deny: Arc::new(RwLock::new(DenyList::from_entries(core.entries()))),
        node_cert_validity: options.node_cert_validity,
        expired_cert_grace: options.expired_cert_grace,
        connections: ConnectionGate::new(&options.limits),
        joins: Arc::new(JoinRate::new(options.limits.joins_per_minute_per_address)),
        joins_in_progress: StreamGate::new(options.limits.max_concurrent_joins),
        refusals: Arc::new(Refusals::default()),
        refusal_log: Arc::new(Mutex::new(refusal_log::RefusalLog::new(
            options.refusal_log_interval,
            refusal_log::DEFAULT_CAPACITY,
        ))),
        serving: serving::Serving::new(
            options.limits.max_concurrent_bundle_serves,
            serving::BUNDLE_CACHE_BUDGET,
        ),
        trust_published: Arc::new(std::sync::atomic::AtomicBool::new(
            core.mesh_trust().is_some(),
        )),
    };
    tracing::info!(
        root = config.parent.is_none(),
        head = core.head(),
        "relay starting"
    );

    let mut tasks = tokio::task::JoinSet::new();
    let mut server = None;
    if let Some(listen) = &config.listen {
        let endpoint = listener::open(listen, &shared.identity.get())?;
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
    let mut parent_config = None;
    let mut failover_config = None;
    if let Some(parent) = config.parent.clone() {
        let (uplink_tx, mut uplink_rx) = mpsc::channel(4);
        let (parent_tx, parent_rx) = watch::channel(parent);
        parent_config = Some(parent_tx);
        let (failover_tx, failover) =
            watch::channel(parents::failover(&candidates, options.parent_grace));
        failover_config = Some(failover_tx);
        tasks.spawn(
            uplink::run(
                parent_rx,
                client,
                failover,
                options.endpoints.clone(),
                uplink_tx,
                reconnect_rx,
                verdicts_rx,
                shutdown.clone(),
            )
            .instrument(tracing::Span::current()),
        );
        let events = events_tx.clone();
        tasks.spawn(async move {
            while let Some(event) = uplink_rx.recv().await {
                if events.send(Event::Uplink(event)).await.is_err() {
                    break;
                }
            }
        });
    }
    if let Some(api_listen) = &config.api_listen {
        let Some(root) = &options.root else {
            return Err(DaemonError::NoRootServices);
        };
        let serve = root
            .0
            .start(
                api_listen.clone(),
                root_services::RootHandle::new(shared.clone()),
                shutdown.clone(),
            )
            .await?;
        tasks.spawn(serve.instrument(tracing::Span::current()));
    }

    let live_identity = shared.identity.clone();
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
        queries: BTreeMap::new(),
        parent_config,
        endpoints: options.endpoints.clone(),
        moving: false,
        renewal: renewal::Renewal::new(
            live_identity,
            options.node_cert_validity,
            client_tx,
            server,
            candidates.clone(),
        ),
        candidates,
        failover: failover_config,
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
}

impl Daemon {
    async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        shutdown: CancellationToken,
    ) -> Result<(), DaemonError> {
        let mut stats = tokio::time::interval(STATS_INTERVAL);
        self.execute().await?;
        loop {
            let deadline = self.core.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Some(event) => self.handle(event).await?,
                    None => return Ok(()),
                },
                () = sleep_until(deadline) => self.core.handle_timeout(now()),
                () = sleep_until(self.renewal.deadline()) => {
                    let parent = self.parent.as_ref().map(|parent| parent.connection.clone());
                    self.renewal.due(&self.store, parent, &self.shared.events).await?;
                }
                _ = stats.tick() => self.sample_links(),
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
            self.publish_slice();
            self.publish_inventory();
            let version = self.core.status_version();
            self.status.send_if_modified(|published| {
                let changed = *published != version;
                *published = version;
                changed
            });
        }
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
                        .renew_expired(&self.store, connection, &events)
                        .await?;
                } else {
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
                match self.renewal.answered(&self.store, answer).await? {
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

    /// `entry` signed again with the root's key now and the next serial,
    /// even if its content is the one held (a rotation of the key).
    fn reseal(&self, now: Now, mut entry: SliceEntry) -> Option<SliceEntry> {
        let serial = relaymesh_core::seal::next_serial(Some(&entry), now.unix_ms);
        let identity = self.shared.identity.get();
        let signing_key = identity.token_signing_key.as_deref()?;
        match relaymesh_core::seal::sign(signing_key, &mut entry, serial) {
            Ok(()) => Some(entry),
            Err(error) => {
                tracing::error!(key = %entry.key, %error, "cannot sign a slice entry again");
                None
            }
        }
    }

    /// Signs an entry the root decided ([`relaymesh_core::seal::seal_decided`]).
    ///
    /// An entry that cannot be signed is logged and left out: no node would
    /// accept it.
    fn seal(&self, now: Now, entry: SliceEntry) -> Option<SliceEntry> {
        let held = self.core.entries().find(|held| held.key == entry.key);
        let key = entry.key.clone();
        let signed = match self.shared.identity.get().token_signing_key.as_deref() {
            Some(signing_key) => {
                relaymesh_core::seal::seal_decided(signing_key, held, entry, now.unix_ms)
            }
            None => Err(relaymesh_core::seal::SealError::BadSigningKey),
        };
        match signed {
            Ok(entry) => Some(entry),
            Err(error) => {
                tracing::error!(%key, %error, "cannot sign a slice entry; it is not sent");
                None
            }
        }
    }

    fn is_current(&self, generation: u64) -> bool {
        self.parent
            .as_ref()
            .is_some_and(|parent| parent.generation == generation)
    }

    /// Opens the control stream on a new parent connection. The hello is
    /// taken now, from the core's durable position.
    fn parent_connected(&mut self, connection: quinn::Connection) {
        self.generation += 1;
        let generation = self.generation;
        let hello = self.core.hello();
        let (outgoing_tx, outgoing_rx) = mpsc::channel(CHILD_QUEUE);
        self.parent = Some(ParentHandle {
            generation,
            connection: connection.clone(),
            outgoing: Some(outgoing_tx),
        });
        let events = self.shared.events.clone();
        tokio::spawn(async move {
            let (reason, refusal) =
                match parent_session(&connection, hello, generation, &events, outgoing_rx).await {
                    Ok(()) => ("stream closed".to_string(), None),
                    Err(LinkError::Refused(refusal)) => (refusal.to_string(), Some(refusal)),
                    Err(error) => (error.to_string(), None),
                };
            let _ = events
                .send(Event::ParentStreamEnded {
                    generation,
                    reason,
                    refusal,
                })
                .await;
        });
    }

    /// Tells the uplink that the parent welcomed (`None`) or refused this
    /// node on the current connection, which sets when it dials next.
    fn tell_uplink(&self, refusal: Option<Refusal>) {
        let Some(parent) = &self.parent else { return };
        let verdict = uplink::Verdict {
            connection: parent.connection.stable_id(),
            refusal,
        };
        // Never blocks the loop; the uplink takes them as they come.
        let _ = self.verdicts.try_send(verdict);
    }

    async fn execute(&mut self) -> Result<(), DaemonError> {
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Persist(mutations) => {
                    self.store.apply_off_runtime(mutations).await?;
                    self.dirty = true;
                }
                Action::SendUp(message) => {
                    if matches!(message, UpMessage::Ack { .. }) && self.dirty {
                        // The durability contract: nothing is acknowledged
                        // before it would survive a crash.
                        self.store.flush_async().await?;
                        self.dirty = false;
                    }
                    let sender = self
                        .parent
                        .as_ref()
                        .and_then(|parent| parent.outgoing.as_ref());
                    if let Some(sender) = sender {
                        if sender.try_send(message).is_err() {
                            tracing::warn!("parent link is backed up; reconnecting");
                            let _ = self.reconnect.try_send(());
                        }
                    }
                }
                Action::SendDown { link, message } => {
                    if let Some(child) = self.children.get(&link) {
                        if child.outgoing.try_send(message).is_err() {
                            tracing::warn!(link, "child link is backed up; closing it");
                            child.connection.close(1u32.into(), b"backed up");
                        }
                    }
                }
                Action::CloseChild { link, refusal } => {
                    self.close_child(link, &refusal);
                }
                Action::ReconnectParent => {
                    let _ = self.reconnect.try_send(());
                }
                Action::FetchBundle(id) => self.fetch_bundle(id),
                Action::DropBundle(id) => {
                    tracing::debug!(bundle = %id, "dropping unreferenced bundle");
                    // Awaited in order: a fetch of the same bundle the core
                    // asks for later starts after the removal.
                    self.store.remove_bundle_off_runtime(id).await?;
                }
                Action::Revoked(revocation) => self.revoked(&revocation),
                Action::Renew => self.renewal.renew_now(),
                Action::MeshTrust(trust) => self.adopt_mesh_trust(now(), &trust).await?,
                Action::Answered { query, answer } => {
                    if let Some(reply) = self.queries.remove(&query) {
                        let _ = reply.send(answer);
                    }
                }
                Action::Move(moved) => self.start_move(moved),
                Action::Settle(moved) => self.settle(now(), moved),
                Action::SettleParents(grant) => self.settle_parents(now(), grant),
                Action::Asked { id, query } => {
                    let answerer = self.hooks.as_ref().and_then(|hooks| hooks.queries.as_ref());
                    let name = self.core.name().to_string();
                    let handed = asked::hand_over(&name, answerer, &self.shared.events, id, query);
                    if let asked::Handed::Answer(answer) = handed {
                        self.core.handle_local_answer(now(), id, answer);
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds a revocation to the deny list and closes every child link whose
    /// certificates it covers (the core closed a revoked child's own link
    /// already; this also catches a link opened with a certificate of a
    /// revoked issuer).
    fn revoked(&mut self, revocation: &relaymesh_protocol::Revocation) {
        tracing::warn!(?revocation, "the root revoked");
        let Ok(mut deny) = self.shared.deny.write() else {
            return;
        };
        deny.insert(revocation);
        let refused: Vec<(LinkId, String)> = self
            .children
            .iter()
            .filter_map(|(link, child)| {
                let chain = pki::connection_chain(&child.connection).ok()?;
                Some((*link, deny.refuses_chain(&chain)?))
            })
            .collect();
        drop(deny);
        for (link, reason) in refused {
            let refusal = Refusal::new(relaymesh_protocol::ErrorCode::Revoked, reason);
            if self.close_child(link, &refusal) {
                self.core.handle_child_disconnected(now(), link);
            }
        }
    }

    /// Tells a child why, then closes its connection; false if it is gone.
    fn close_child(&mut self, link: LinkId, refusal: &Refusal) -> bool {
        let Some(child) = self.children.remove(&link) else {
            return false;
        };
        let _ = child
            .outgoing
            .try_send(DownMessage::Refused(refusal.clone()));
        child
            .connection
            .close(1u32.into(), refusal.message.as_bytes());
        true
    }

    fn fetch_bundle(&mut self, id: BundleId) {
        let Some(connection) = self.parent.as_ref().map(|parent| parent.connection.clone()) else {
            self.core.handle_bundle_failed(now(), id);
            return;
        };
        let events = self.shared.events.clone();
        let store = self.store.clone();
        tokio::spawn(async move {
            let result = bundles::fetch_into_store(&connection, &store, id).await;
            let _ = events.send(Event::BundleFetched { id, result }).await;
        });
    }

    fn sample_links(&mut self) {
        let now = now();
        self.count_refusals(now);
        for (link, child) in &self.children {
            let stats = child.connection.stats();
            self.core.handle_link_stats(
                now,
                *link,
                LinkStats {
                    rtt: child.connection.rtt(),
                    bytes_sent: stats.udp_tx.bytes,
                    bytes_received: stats.udp_rx.bytes,
                },
            );
        }
    }
}

impl Daemon {
    /// Hands the refusals the links and the API counted to the core, which
    /// puts them in this node's own record; logged here, once a second at
    /// most, rather than once per refused request.
    fn count_refusals(&mut self, now: Now) {
        for (limit, count) in self.shared.refusals.take() {
            tracing::warn!(%limit, count, "refused requests over a limit");
            self.core.count_limit_refusals(now, limit, count);
        }
    }
}

/// Runs the control stream to the parent until it ends.
async fn parent_session(
    connection: &quinn::Connection,
    hello: Hello,
    generation: u64,
    events: &mpsc::Sender<Event>,
    outgoing: mpsc::Receiver<UpMessage>,
) -> Result<(), LinkError> {
    let control = uplink::open_control(connection, hello).await?;
    let mut recv = control.recv;
    events
        .send(Event::ParentMessage {
            generation,
            message: control.first,
        })
        .await
        .map_err(|_| LinkError::Protocol("relay is stopping".into()))?;
    let writer = tokio::spawn(uplink::pump_up(control.send, outgoing));
    let result = async {
        while let Some(message) = crate::transport::read_frame::<DownMessage>(&mut recv).await? {
            if events
                .send(Event::ParentMessage {
                    generation,
                    message,
                })
                .await
                .is_err()
            {
                break;
            }
        }
        Ok(())
    }
    .await;
    writer.abort();
    result
}

/// A token cancelled on SIGTERM or Ctrl-C, for a daemon's clean shutdown.
pub fn cancel_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        cancel.cancel();
    });
    token
}

/// Completes on Ctrl-C or SIGTERM (every binary that runs until stopped
/// waits on it).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// What an agent's reconciler tells its daemon.
// One at a time, moved out of the channel at once: boxing would only add
// an allocation per status.
#[allow(clippy::large_enum_variant)]
enum FromReconciler {
    /// The cluster's status of a placement (`None` forgets it).
    Status(String, Option<relaymesh_protocol::PlacementStatus>),
    /// Whether the cluster is out of room.
    OutOfRoom(bool),
    /// Whether the cluster's API does not answer.
    Unreachable(bool),
}

/// The reconciler's next word; pending for good on a relay, and for a
/// channel whose sender is gone.
async fn from_reconciler(hooks: &mut Option<AgentHooks>) -> Option<FromReconciler> {
    let Some(hooks) = hooks else {
        return std::future::pending().await;
    };
    tokio::select! {
        status = hooks.status.recv() => status.map(|(key, status)| FromReconciler::Status(key, status)),
        out_of_room = next_flag(hooks.out_of_room.as_mut()) => Some(FromReconciler::OutOfRoom(out_of_room)),
        unreachable = next_flag(hooks.unreachable.as_mut()) => Some(FromReconciler::Unreachable(unreachable)),
    }
}

/// The next value of one of the reconciler's flags; pending for good
/// without one, or once its sender is gone.
async fn next_flag(receiver: Option<&mut watch::Receiver<bool>>) -> bool {
    let Some(receiver) = receiver else {
        return std::future::pending().await;
    };
    match receiver.changed().await {
        Ok(()) => *receiver.borrow_and_update(),
        Err(_) => std::future::pending().await,
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
