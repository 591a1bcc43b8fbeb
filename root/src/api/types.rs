//! What the API and its [`Backend`](super::Backend) hand each other: join
//! token requests and tokens, a node's link, what a revocation did, where
//! the API CA stands.
//!
//! A leaf: it imports none of the API's other parts, so the backend trait,
//! the handlers and the older object modules can all use these types
//! without tying themselves to each other.

use std::time::Duration;

use relaymesh_protocol::{LinkStatus, Role};

/// Where the API CA stands (see `relayctl rotate api-ca`).
#[derive(Debug, Clone)]
pub struct ApiCaState {
    /// The CA that signs new users (the new one during a rotation).
    pub signing: Vec<u8>,
    /// The CA being retired, during a rotation: its clients are still
    /// accepted and it still signs the serving certificate.
    pub previous: Option<Vec<u8>>,
    /// The serving certificate's leaf.
    pub serving: Vec<u8>,
}

/// A validated request for a join token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The name the joining node will have (a DNS-1123 label).
    pub name: String,
    /// [`Role::Relay`] or [`Role::Agent`]; never [`Role::Admin`].
    pub role: Role,
    /// The relay the node must join under; `None` lets the root choose.
    pub parent: Option<String>,
    /// Other relays the node may join under instead (the nearest that
    /// admits it); it also fails over to them (see
    /// [`relaymesh_protocol::parents`]).
    pub candidates: Vec<String>,
    /// How long the token stays valid (more than zero, at most a day).
    pub ttl: Duration,
}

/// A join token the backend issued.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The token, as `relay join` and `edge-agent join` take it.
    pub token: String,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_unix: u64,
    /// Every relay it lets the node join under, parent first, when it
    /// names more than one.
    pub candidates: Vec<relaymesh_protocol::CandidateParent>,
}

impl std::fmt::Debug for IssuedToken {
    // A token is a credential: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("expires_unix", &self.expires_unix)
            .finish_non_exhaustive()
    }
}

/// A node's link to its parent, as the parent measured it, asked of the
/// tree on demand ([`Backend::link`](super::Backend::link)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLink {
    /// The node.
    pub name: String,
    /// The parent that measured the link and answered.
    pub parent: String,
    /// The link.
    pub status: LinkStatus,
}

/// What revoking a node did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRevoked {
    /// The node revoked.
    pub name: String,
    /// When (Unix seconds): certificates issued to it until then are void.
    pub at_unix: u64,
    /// The ids of the node's outstanding join tokens, revoked with it.
    pub tokens: Vec<[u8; 16]>,
    /// The nodes that left the root's inventory: the node and its subtree.
    pub removed: Vec<String>,
}
