//! Starting a node's daemon: its core from what the store holds, the state
//! the link tasks share with the loop, the uplink's tasks and, at the root,
//! the root's services. [`super::run_with_store`] wires them together.

use std::sync::{Arc, Mutex, RwLock};

use relaymesh_core::{Core, CoreConfig, DEFAULT_LOG_KEEP};
use relaymesh_protocol::CandidateParent;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::root_services::{RootHandle, Serving};
use super::{
    now, parents, refusal_log, serving, DaemonError, Event, RunOptions, Shared, SharedState,
};
use crate::config::{NodeConfig, ParentConfig};
use crate::deny_list::DenyList;
use crate::identity::{Identity, LiveIdentity};
use crate::limits::{ConnectionGate, JoinRate, Refusals, StreamGate};
use crate::pki;
use crate::store::Store;
use crate::transport::uplink;

/// The node's core, from what its store holds (bundles whose transfer a
/// stop cut are removed first: they were never held).
pub(super) fn open_core(
    store: &Store,
    identity: &Identity,
    config: &NodeConfig,
    options: &RunOptions,
) -> Result<Core, DaemonError> {
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
    Ok(core)
}

/// The channels the link tasks share with the loop.
pub(super) struct SharedChannels {
    /// The loop's event channel.
    pub events: mpsc::Sender<Event>,
    /// Where the loop publishes how many bundles it stored.
    pub bundles_stored: watch::Receiver<u64>,
    /// Where the loop publishes the status version.
    pub placement_status: watch::Receiver<u64>,
}

/// What the link tasks share with the loop.
pub(super) fn shared_state(
    identity: Identity,
    config: &NodeConfig,
    store: &Store,
    core: &Core,
    options: &RunOptions,
    channels: SharedChannels,
) -> Shared {
    let SharedChannels {
        events,
        bundles_stored,
        placement_status,
    } = channels;
    Shared::new(SharedState {
        placement_status,
        identity: LiveIdentity::new(identity),
        store: store.clone(),
        events,
        bundles_stored,
        inventory: Default::default(),
        config: Arc::new(config.clone()),
        deny: Arc::new(RwLock::new(DenyList::from_entries(core.entries()))),
        node_cert_validity: options.node_cert_validity,
        expired_cert_grace: options.expired_cert_grace,
        connections: ConnectionGate::new(&options.limits),
        joins: Arc::new(JoinRate::new(options.limits.joins_per_minute_per_address)),
        joins_in_progress: StreamGate::new(options.limits.max_concurrent_joins),
        handshakes: Arc::new(tokio::sync::Semaphore::new(
            options.limits.max_concurrent_handshakes,
        )),
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
    })
}

/// The channels between the loop and the uplink.
pub(super) struct UplinkChannels {
    /// The client TLS configuration (replaced at renewals).
    pub client: watch::Receiver<quinn::ClientConfig>,
    /// The loop asks for a new connection.
    pub reconnect: mpsc::Receiver<()>,
    /// The loop says whether the parent welcomed or refused this node.
    pub verdicts: mpsc::Receiver<uplink::Verdict>,
    /// Where the uplink's events reach the loop.
    pub events: mpsc::Sender<Event>,
}

/// What the loop keeps of the uplink: where to tell it of a new parent or
/// new candidates (both `None` at the root, which has no uplink).
pub(super) struct UplinkHandles {
    pub parent_config: Option<watch::Sender<ParentConfig>>,
    pub failover: Option<watch::Sender<Option<uplink::Failover>>>,
}

/// Starts the uplink, if this node has a parent.
pub(super) fn spawn_uplink(
    tasks: &mut JoinSet<()>,
    config: &NodeConfig,
    options: &RunOptions,
    candidates: &[CandidateParent],
    channels: UplinkChannels,
    shutdown: &CancellationToken,
) -> UplinkHandles {
    let UplinkChannels {
        client,
        reconnect: reconnect_rx,
        verdicts: verdicts_rx,
        events: events_tx,
    } = channels;
    let mut parent_config = None;
    let mut failover_config = None;
    if let Some(parent) = config.parent.clone() {
        let (uplink_tx, mut uplink_rx) = mpsc::channel(4);
        let (parent_tx, parent_rx) = watch::channel(parent);
        parent_config = Some(parent_tx);
        let (failover_tx, failover) =
            watch::channel(parents::failover(candidates, options.parent_grace));
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
    UplinkHandles {
        parent_config,
        failover: failover_config,
    }
}

/// At the root: starts the root's services on `address` (the program's
/// [`RunOptions::root`]; a program without them cannot be the root).
pub(super) async fn start_root(
    address: &str,
    options: &RunOptions,
    shared: &Shared,
    shutdown: &CancellationToken,
) -> Result<Serving, DaemonError> {
    let Some(root) = &options.root else {
        return Err(DaemonError::NoRootServices);
    };
    root.0
        .start(
            address.to_string(),
            RootHandle::new(shared.clone()),
            shutdown.clone(),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node configured as the root (an API address) in a program that
    /// cannot serve the root's API stops at once, saying so, instead of
    /// running a root nobody can reach.
    #[tokio::test]
    async fn a_program_without_the_roots_services_refuses_to_be_the_root() {
        let dir = tempfile::tempdir().expect("a directory");
        let store = Store::create(dir.path()).expect("a store");
        let mesh = pki::create_mesh("root", &["127.0.0.1".to_string()]).expect("a mesh");
        let config = NodeConfig {
            advertise: Vec::new(),
            listen: None,
            api_listen: Some("127.0.0.1:0".into()),
            parent: None,
            labels: Default::default(),
            capacity: Default::default(),
        };
        store
            .initialize(&mesh.identity, &config, 7)
            .expect("initialized");
        let result = super::super::run_with_store(
            dir.path(),
            store,
            CancellationToken::new(),
            None,
            RunOptions::default(),
        )
        .await;
        let error = result.expect_err("no root services");
        assert!(matches!(error, DaemonError::NoRootServices), "{error}");
        assert!(
            error.to_string().contains("cannot serve the root's API"),
            "{error}"
        );
    }
}
