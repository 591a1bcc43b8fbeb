//! The channels between an edge agent's daemon and its reconciler: the
//! slice the daemon publishes, and what the reconciler says back (status
//! per placement, out of room, unreachable).

use std::sync::Arc;

use relaymesh_protocol::SliceEntry;
use tokio::sync::{mpsc, watch};

use super::asked::AskedQuery;

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

/// The channels between an agent's daemon and its reconciler.
#[derive(Debug)]
pub struct AgentHooks {
    /// Where the daemon publishes the slice.
    pub slice: watch::Sender<AgentSlice>,
    /// Where the reconciler reports this cluster's status per placement
    /// (`None` forgets a placement).
    pub status: mpsc::Receiver<(String, Option<relaymesh_protocol::PlacementStatus>)>,
    /// Where queries about the cluster go to be answered (at most
    /// [`ASKED_QUEUE`](crate::daemon::ASKED_QUEUE) waiting; make the channel that long). `None`: the
    /// agent answers that it has nothing to read.
    pub queries: Option<mpsc::Sender<AskedQuery>>,
    /// Whether the reconciler finds its cluster out of room (its replica
    /// capacity): the node labels itself full while it is. `None`: never.
    pub out_of_room: Option<watch::Receiver<bool>>,
    /// Whether the reconciler finds its cluster's API not answering: the
    /// node labels itself unreachable while it is. `None`: never.
    pub unreachable: Option<watch::Receiver<bool>>,
}

/// What an agent's reconciler tells its daemon.
// One at a time, moved out of the channel at once: boxing would only add
// an allocation per status.
#[allow(clippy::large_enum_variant)]
pub(super) enum FromReconciler {
    /// The cluster's status of a placement (`None` forgets it).
    Status(String, Option<relaymesh_protocol::PlacementStatus>),
    /// Whether the cluster is out of room.
    OutOfRoom(bool),
    /// Whether the cluster's API does not answer.
    Unreachable(bool),
}

/// The reconciler's next word; pending for good on a relay, and for a
/// channel whose sender is gone.
pub(super) async fn from_reconciler(hooks: &mut Option<AgentHooks>) -> Option<FromReconciler> {
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
