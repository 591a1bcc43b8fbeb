//! One edge agent, whole: joining the tree, and running the daemon in agent
//! role with the [`Reconciler`] beside it on the same store, and the
//! [`Answerer`] reading the cluster for queries.
//!
//! The `edge-agent` binary is this module plus flags and signals; the
//! testbed's hollow agents run thousands of these in one process, each on
//! its own store and cluster client, so what a benchmark measures is the
//! agent's own code and not a copy of it.

use std::collections::BTreeMap;
use std::path::Path;

use relaymesh_node::config::NodeConfig;
use relaymesh_node::daemon::{self, AgentHooks, AgentSlice, DaemonError, RunOptions};
use relaymesh_node::store::{Store, StoreError};
use relaymesh_node::transport::join::{self, JoinError};
use relaymesh_node::transport::uplink::Endpoints;
use relaymesh_protocol::Role;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::answers::Answerer;
use crate::applier::Applier;
use crate::inventory::{self, Inventory};
use crate::policy::Policy;
use crate::reconciler::{ReconcileError, Reconciler};

/// How many status reports may wait between the reconciler and the daemon.
const STATUS_QUEUE: usize = 256;

/// Why an agent could not join or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The store already holds a node.
    #[error("the store already holds a node; run it instead of joining again")]
    AlreadyJoined,
    /// The node's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Joining failed (token, parent, certificates).
    #[error(transparent)]
    Join(#[from] JoinError),
    /// The daemon (links, core) stopped with an error.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// The reconciler stopped with an error.
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    /// The reconciler's task panicked or was aborted.
    #[error("the reconciler's task failed: {0}")]
    ReconcilerTask(#[source] tokio::task::JoinError),
}

/// Joins the tree as cluster `name` with `token` (dialing from
/// `endpoints`) and writes the identity, the parent, `labels` and
/// `capacity` (reported in its record; `placements` bounds how many it
/// runs) into `store`, which must be empty. Returns the parent's name.
pub async fn join(
    store: &Store,
    name: &str,
    token: &str,
    labels: BTreeMap<String, String>,
    capacity: BTreeMap<String, String>,
    endpoints: &mut Endpoints,
) -> Result<String, AgentError> {
    if store.identity()?.is_some() {
        return Err(AgentError::AlreadyJoined);
    }
    let joined = join::join_from(token.trim(), name, Role::Agent, endpoints).await?;
    let config = NodeConfig {
        listen: None,
        advertise: Vec::new(),
        api_listen: None,
        parent: Some(joined.parent.clone()),
        // The root shows the token as used by this node (`relayctl token list`).
        labels: relaymesh_node::store::with_join_token_label(labels, &joined.token_id),
        capacity,
    };
    store.initialize(&joined.identity, &config, rand::random())?;
    store.set_candidates(&joined.candidates)?;
    Ok(joined.parent.name)
}

/// Runs a joined agent on `store` until `shutdown` is cancelled: the daemon
/// in agent role and, with a `cluster` client, the reconciler applying to
/// that cluster under `policy` (without one, the agent keeps its slice and
/// applies nothing). Either one failing stops both. `data_dir` names the
/// store in errors.
pub async fn run(
    data_dir: &Path,
    store: Store,
    cluster: Option<kube::Client>,
    policy: Policy,
    shutdown: CancellationToken,
    options: RunOptions,
) -> Result<(), AgentError> {
    let Some(client) = cluster else {
        daemon::run_with_store(data_dir, store, shutdown, None, options).await?;
        return Ok(());
    };
    let name = store
        .identity()?
        .map(|identity| identity.name)
        .unwrap_or_default();
    let (slice_tx, slice_rx) = watch::channel(AgentSlice::default());
    let (status_tx, status_rx) = mpsc::channel(STATUS_QUEUE);
    let (queries_tx, queries_rx) = mpsc::channel(daemon::ASKED_QUEUE);
    let answerer = Answerer::new(
        name.clone(),
        Applier::new(client.clone()),
        Inventory::new(store.open_tree(inventory::TREE)?),
    );
    tokio::spawn(answerer.serve(queries_rx, shutdown.clone()));
    let (room_tx, room_rx) = watch::channel(false);
    let (unreachable_tx, unreachable_rx) = watch::channel(false);
    let reconciler = Reconciler::new(client, store.clone(), name, slice_rx, status_tx)?
        .with_policy(policy)
        .with_room(room_tx)
        .with_reachability(unreachable_tx);
    let stop = shutdown.clone();
    let reconciling = tokio::spawn(async move {
        let result = reconciler.run(stop.clone()).await;
        if let Err(error) = &result {
            tracing::error!(%error, "reconciler stopped; stopping the agent");
            stop.cancel();
        }
        result
    });
    let hooks = AgentHooks {
        slice: slice_tx,
        status: status_rx,
        queries: Some(queries_tx),
        out_of_room: Some(room_rx),
        unreachable: Some(unreachable_rx),
    };
    let daemon_result =
        daemon::run_with_store(data_dir, store, shutdown.clone(), Some(hooks), options).await;
    shutdown.cancel();
    let reconciler_result = reconciling.await.map_err(AgentError::ReconcilerTask)?;
    daemon_result?;
    reconciler_result?;
    Ok(())
}
