//! What the root's services (its API and placement controller, which live
//! in the root's crate) see of the node they run on: a handle to read its
//! identity, store and inventory, and the requests its loop answers.
//!
//! The loop answers every request from the core and signs what it
//! publishes with the root's key; the services decide nothing about the
//! tree themselves.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use relaymesh_protocol::{BundleId, LinkStatus, NodeRecord, SliceEntry};
use relaymesh_topology::cluster_labels::LabelChange;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::labels::LabelError;
pub use super::rotation::RotationReply;
use super::{DaemonError, Event, Shared};
use crate::config::NodeConfig;
use crate::identity::LiveIdentity;
use crate::limits::Refusals;
use crate::store::Store;

/// What the root's services ask of the loop; each carries where the
/// answer goes.
#[allow(missing_docs)] // the fields are named for what they carry
pub enum RootRequest {
    /// The placement controller stored a bundle: children may fetch it.
    PublishBundle {
        name: String,
        id: BundleId,
        reply: oneshot::Sender<()>,
    },
    /// How many clusters each placement selects, how they are doing and
    /// where its rollout stands, by slice key; the core first decides the
    /// next wave of every rollout, which the loop signs and sends down.
    PlacementStatus {
        /// Per placement with rollout gates: whether every gate is a
        /// condition set `True` on the Placement.
        gates_open: BTreeMap<String, bool>,
        reply: oneshot::Sender<BTreeMap<String, relaymesh_core::PlacementReport>>,
    },
    /// The root revoked a node or a token: sign it and send it down.
    Revoke {
        revocation: relaymesh_protocol::Revocation,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// An admin asked for a step of a rotation of the mesh
    /// CA.
    RotateMeshCa {
        step: crate::pki::RotationStep,
        reply: RotationReply,
    },
    /// An admin asked for a step of a rotation of the
    /// token-signing key.
    RotateTokenKey {
        step: crate::pki::RotationStep,
        reply: RotationReply,
    },
    /// A query for a node below, routed down the tree by the core; the
    /// answer always comes (a failure at the latest after the core's
    /// query timeout).
    Query {
        node: String,
        query: relaymesh_protocol::query::Query,
        reply: oneshot::Sender<relaymesh_protocol::query::Answer>,
    },
    /// The root orders a move: sign it and send it down.
    OrderMove {
        moved: relaymesh_protocol::Move,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// The root changes a cluster's labels: merge, sign and send down.
    LabelCluster {
        change: LabelChange,
        reply: oneshot::Sender<Result<relaymesh_protocol::ClusterLabels, LabelError>>,
    },
    /// The root grants a node candidate parents (`Some`, with the parent
    /// its token names first) or takes the grant back (`None`): sign and
    /// send down.
    GrantParents {
        node: String,
        candidates: Option<Vec<relaymesh_protocol::CandidateParent>>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Every move the slice holds.
    Moves {
        reply: oneshot::Sender<Vec<relaymesh_protocol::Move>>,
    },
    /// Every revocation the slice holds.
    Revocations {
        reply: oneshot::Sender<Vec<relaymesh_protocol::Revocation>>,
    },
    /// The root's placement controller: these are all placement entries now
    /// (their bundles are already stored), each with what the API knows of
    /// its rollout.
    SetPlacements {
        entries: Vec<(SliceEntry, relaymesh_core::rollouts::RolloutInput)>,
        reply: oneshot::Sender<()>,
    },
}

/// The tree as the root's API serves it, republished by the loop when it
/// changed: cheap to clone (shared pointers), so a request never copies
/// the node list.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Changes whenever `records` or `measured` do, so a watch on a view
    /// made of them renders it only after a change.
    pub version: u64,
    /// Every node the root knows (itself included): relays and agents, with
    /// the link status each node's parent reports up (connectivity, since
    /// when, bundle transfers): this node first, then by name. Each
    /// record is shared with the core, and the loop changes the list in
    /// place unless a request holds it: a change costs O(log n), not a
    /// copy of the fleet.
    pub records: Arc<Vec<Arc<NodeRecord>>>,
    /// What the root measured of its own children's links (RTT, bytes,
    /// acknowledged revision, lag), by child. Deeper links are measured by
    /// their parents, which keep it: not reported here.
    pub measured: Arc<BTreeMap<String, LinkStatus>>,
    /// The annotations the root set on clusters (`relayctl annotate
    /// cluster`), by cluster.
    pub annotations: Arc<BTreeMap<String, BTreeMap<String, String>>>,
}

/// The loop stopped: the node is shutting down.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the relay is stopping")]
pub struct Stopping;

/// The root's view of its node: cheap to clone, one per service.
#[derive(Clone)]
pub struct RootHandle {
    shared: Shared,
}

impl RootHandle {
    pub(super) fn new(shared: Shared) -> Self {
        Self { shared }
    }

    /// The node's identity, as it is now (renewals and rotations replace it).
    pub fn identity(&self) -> &LiveIdentity {
        &self.shared.identity
    }

    /// The node's store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.shared.config
    }

    /// The core's status version: changes when a placement's status may
    /// have.
    pub fn placement_status(&self) -> watch::Receiver<u64> {
        self.shared.placement_status.clone()
    }

    /// Where refusals are counted until the loop logs them.
    pub fn refusals(&self) -> &Refusals {
        &self.shared.refusals
    }

    /// Whether the root published its trust entry (the mesh rotated its CA
    /// or token key at least once).
    pub fn trust_published(&self) -> bool {
        self.shared
            .trust_published
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The tree as the loop last published it.
    pub fn inventory(&self) -> Inventory {
        self.shared
            .inventory
            .read()
            .map(|inventory| inventory.clone())
            .unwrap_or_default()
    }

    /// Hands `request` to the loop; its answer comes on the request's
    /// reply channel.
    pub async fn send(&self, request: RootRequest) -> Result<(), Stopping> {
        self.shared
            .events
            .send(Event::Root(request))
            .await
            .map_err(|_| Stopping)
    }
}

/// A future the daemon runs until shutdown.
pub type Serving = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The root's services, which the daemon starts when its configuration has
/// an API address (`api_listen`): the root's crate implements it.
pub trait RootServices: Send + Sync + 'static {
    /// Binds `address` and returns the task that serves until `shutdown`.
    fn start(
        &self,
        address: String,
        node: RootHandle,
        shutdown: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = Result<Serving, DaemonError>> + Send>>;
}

/// The shared inventory the loop publishes into.
pub(super) type SharedInventory = Arc<RwLock<Inventory>>;
