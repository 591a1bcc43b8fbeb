//! The claims a join token carries.
//!
//! A token is `rmt3.<claims>.<signature>` in unpadded base64url: the
//! bincode-encoded [`TokenClaims`] and an Ed25519 signature over them by the
//! mesh's token key. Any relay that holds the token key can check a token
//! without asking the root, so a site cut off from the root can still admit
//! the clusters its tokens name. Signing and checking live in the relay crate;
//! this module only defines what is signed.

use serde::{Deserialize, Serialize};

use crate::parents::CandidateParent;
use crate::Role;

/// The prefix of every version-3 token (version 2 added
/// [`TokenClaims::parent_issuers`], version 3
/// [`TokenClaims::candidates`]).
pub const TOKEN_PREFIX: &str = "rmt3.";

/// The prefix of a version-2 token, still read: its claims are
/// [`TokenClaimsV2`], which are version 3's without candidates.
pub const TOKEN_PREFIX_V2: &str = "rmt2.";

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
    /// Other relays that may admit the node instead of `parent` (see
    /// [`crate::parents`]): the node measures them all and joins the
    /// nearest. Empty for a token with one parent.
    pub candidates: Vec<CandidateParent>,
}

/// What a version-2 token says: [`TokenClaims`] without candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct TokenClaimsV2 {
    pub id: [u8; 16],
    pub name: String,
    pub role: Role,
    pub parent: String,
    pub parent_addresses: Vec<String>,
    pub parent_issuers: Vec<String>,
    pub ca_sha256: [u8; 32],
    pub not_after_unix: u64,
}

impl From<TokenClaimsV2> for TokenClaims {
    fn from(v2: TokenClaimsV2) -> Self {
        Self {
            id: v2.id,
            name: v2.name,
            role: v2.role,
            parent: v2.parent,
            parent_addresses: v2.parent_addresses,
            parent_issuers: v2.parent_issuers,
            ca_sha256: v2.ca_sha256,
            not_after_unix: v2.not_after_unix,
            candidates: Vec::new(),
        }
    }
}

impl TokenClaims {
    /// Every relay that may admit the node: `parent` first, then the other
    /// candidates.
    pub fn parents(&self) -> Vec<CandidateParent> {
        let mut parents = vec![CandidateParent {
            name: self.parent.clone(),
            addresses: self.parent_addresses.clone(),
            issuers: self.parent_issuers.clone(),
        }];
        parents.extend(
            self.candidates
                .iter()
                .filter(|candidate| candidate.name != self.parent)
                .cloned(),
        );
        parents
    }

    /// Whether `relay` may admit the node.
    pub fn admits_under(&self, relay: &str) -> bool {
        self.parent == relay || self.candidates.iter().any(|c| c.name == relay)
    }
}
