//! What the link tasks (listener, bundle serves, joins) share with the
//! loop: the live identity, the store, the loop's event channel, the gates
//! on what peers may cost, and what the loop publishes.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{refusal_log, root_services, serving, Event};
use crate::config::NodeConfig;
use crate::deny_list::DenyList;
use crate::identity::LiveIdentity;
use crate::limits::{ConnectionGate, JoinRate, Refusals, StreamGate};
use crate::store::Store;

/// Everything the link tasks share with the loop, behind one pointer:
/// every link's tasks hold a copy for the link's lifetime, and the state
/// itself is about 500 bytes (docs/performance.md, "The heap of a link").
#[derive(Clone)]
pub(crate) struct Shared(Arc<SharedState>);

impl Shared {
    pub fn new(state: SharedState) -> Self {
        Self(Arc::new(state))
    }

    /// The state to change, for the loop: the links that copy it from
    /// now on see the change; the copies they hold already keep theirs.
    pub fn make_mut(&mut self) -> &mut SharedState {
        Arc::make_mut(&mut self.0)
    }
}

impl std::ops::Deref for Shared {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// What [`Shared`] holds.
#[derive(Clone)]
pub(crate) struct SharedState {
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
    /// Turns at a TLS handshake: a new connection waits for one.
    pub handshakes: Arc<tokio::sync::Semaphore>,
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
