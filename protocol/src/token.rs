//! The claims a join token carries.
//!
//! A token is `rmt2.<claims>.<signature>` in unpadded base64url: the
//! bincode-encoded [`TokenClaims`] and an Ed25519 signature over them by the
//! mesh's token key. Any relay that holds the token key can check a token
//! without asking the root, so a site cut off from the root can still admit
//! the clusters its tokens name. Signing and checking live in the relay crate;
//! this module only defines what is signed.

use serde::{Deserialize, Serialize};

use crate::Role;

/// The prefix of every version-2 token (version 2 added
/// [`TokenClaims::parent_issuers`]).
pub const TOKEN_PREFIX: &str = "rmt2.";

/// What a join token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// A random id; a relay accepts each id once.
    pub id: [u8; 16],
    /// The name the joining node gets.
    pub name: String,
    /// The role the joining node gets.
    pub role: Role,
    /// The relay that admits the node and becomes its parent.
    pub parent: String,
    /// Where to dial the parent (`host:port`).
    pub parent_addresses: Vec<String>,
    /// The relays whose issuers stand between the mesh CA and the parent's
    /// own certificate, from the root's child down to the parent's parent:
    /// empty when the parent is the root or a child of the root. The
    /// joining node refuses a server whose chain takes any other path, so
    /// another relay cannot pose as the parent with a certificate its own
    /// issuer made.
    pub parent_issuers: Vec<String>,
    /// SHA-256 of the mesh CA certificate (DER), which the joining node
    /// pins before it trusts anything the parent says.
    pub ca_sha256: [u8; 32],
    /// When the token stops being valid, in seconds since the Unix epoch.
    pub not_after_unix: u64,
}
