//! The events the daemon's loop takes, one at a time: from the link tasks,
//! the uplink, bundle transfers, renewals and the root's services.

use relaymesh_core::LinkId;
use relaymesh_protocol::message::{DownMessage, Hello, UpMessage};
use relaymesh_protocol::{BundleId, Refusal};
use tokio::sync::{mpsc, oneshot};

use super::root_services::RootRequest;
use super::{bundles, renewal, ChildBound};
use crate::pki::Peer;
use crate::transport::uplink::UplinkEvent;

/// Events the loop handles.
pub(crate) enum Event {
    ChildConnected {
        link: LinkId,
        peer: Peer,
        hello: Hello,
        connection: quinn::Connection,
        outgoing: mpsc::Sender<ChildBound>,
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
