//! The inventory a relay reports up: the nodes of its subtree.
//!
//! Every relay reports its own record and forwards its children's. The record
//! of a node's link (whether it is connected, how far behind it is) is written
//! by the node's parent, the only one who can observe that link.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::LabelSet;

/// The key of a cluster's [`NodeRecord::capacity`] that bounds how many
/// placements it runs (`edge-agent join --max-placements`).
pub const PLACEMENTS_CAPACITY: &str = "placements";

/// The key of a cluster's [`NodeRecord::capacity`] that bounds the replicas
/// its placements' workloads ask for, summed (`edge-agent join
/// --max-replicas`).
pub const REPLICAS_CAPACITY: &str = "replicas";

/// What a node is in the mesh. It is written into the node's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Role {
    /// A relay daemon; the root is the relay without a parent.
    Relay,
    /// An edge agent in front of one cluster.
    Agent,
    /// An operator's client certificate (relayctl, kubectl).
    Admin,
}

impl Role {
    /// The lower-case name used in certificates, tokens and the CLI.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Relay => "relay",
            Self::Agent => "agent",
            Self::Admin => "admin",
        }
    }

    /// Parses [`Role::as_str`]'s output.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "relay" => Some(Self::Relay),
            "agent" => Some(Self::Agent),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node of a subtree: a relay or a cluster's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The node's name, unique in the mesh.
    pub name: String,
    /// Relay or agent.
    pub role: Role,
    /// The name of the node's parent; `None` only for the root.
    pub parent: Option<String>,
    /// Labels (for clusters: given at join, plus detected ones), shared
    /// between the copies a relay keeps (see [`LabelSet`]).
    pub labels: LabelSet,
    /// Addresses where the node accepts children, as `host:port`.
    pub addresses: Vec<String>,
    /// The software version the node runs.
    pub version: String,
    /// The node's link to its parent, as its parent sees it.
    pub link: Option<LinkStatus>,
    /// For a cluster: what it can run, as Kubernetes quantities by resource
    /// name (`cpu`, `memory`, `pods`), summed over its nodes.
    pub capacity: BTreeMap<String, String>,
    /// Integrity alarms: slice entries the node refused since it started
    /// because the root's signature on them was missing, wrong, or older
    /// than the version it holds. Anything but zero means a relay above the
    /// node forged or altered what the root decided.
    pub refused_entries: u64,
    /// Requests this node refused since it started because they broke one
    /// of its limits, by limit name (`connections-per-address`,
    /// `inventory-records-per-child`, …; see docs/security.md, "Limits").
    /// Counts saturate. Anything but zero means some peer asked for more
    /// than a node allows: a misbehaving child, a flood, or a limit set too
    /// low for the fleet.
    pub limit_refusals: BTreeMap<String, u64>,
}

/// The health of a link, as seen from the parent's side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStatus {
    /// Whether the child is connected now.
    pub connected: bool,
    /// The latest smoothed round-trip time, in microseconds.
    pub rtt_micros: u64,
    /// Bytes the parent sent on this link since the connection opened.
    pub bytes_sent: u64,
    /// Bytes the parent received on this link since the connection opened.
    pub bytes_received: u64,
    /// The newest slice revision the child acknowledged as durable.
    pub acked_revision: u64,
    /// How many revisions were sent to the child and not yet acknowledged
    /// (a child is sent only the changes that concern it, so a current
    /// child may be behind the parent's head).
    pub revision_lag: u64,
    /// When `connected` last changed, in milliseconds since the Unix epoch.
    pub changed_unix_ms: u64,
    /// How many bundle transfers the parent completed to this child, ever: an
    /// application counter (a bundle sent twice counts twice), unlike the wire
    /// bytes above, which include retransmissions and acknowledgements.
    pub bundles_served: u64,
    /// The payload bytes of those transfers (bundle bytes only, no framing).
    pub bundle_bytes_served: u64,
}

/// A change to the inventory a child reports. Large subtrees send a full
/// inventory as several `Full` frames, the first with `first` set and the last
/// with `last` set; until the last arrives the parent keeps the old records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum InventoryUpdate {
    /// Records added or changed, and names removed, since the last update.
    Delta {
        /// Records to add or replace.
        upserts: Vec<NodeRecord>,
        /// Names of records to drop.
        removals: Vec<String>,
    },
    /// A piece of the child's whole inventory, which replaces what the parent
    /// had from that child once the last piece has arrived.
    Full {
        /// Records of this piece.
        records: Vec<NodeRecord>,
        /// This is the first piece.
        first: bool,
        /// This is the last piece.
        last: bool,
    },
}
