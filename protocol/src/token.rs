//! The claims a join token carries.
//!
//! A token is `rmt4.<claims>.<signature>` in unpadded base64url: the
//! bincode-encoded [`TokenClaims`] and an Ed25519 signature over them by the
//! mesh's token key. Any relay that holds the token key can check a token
//! without asking the root, so a site cut off from the root can still admit
//! the clusters its tokens name. Signing and checking live in the relay crate;
//! this module only defines what is signed.

use serde::{Deserialize, Serialize};

use crate::parents::CandidateParent;
use crate::Role;

/// The prefix of every version-4 token (version 2 added
/// [`TokenClaims::parent_issuers`], version 3 [`TokenClaims::candidates`],
/// version 4 [`TokenClaims::token_key`] and
/// [`TokenClaims::parent_issuer_key`]). Older tokens are refused: they do
/// not say which keys the joining node must find, so it cannot tell the
/// parent from a relay above it posing as it.
pub const TOKEN_PREFIX: &str = "rmt4.";

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
    /// empty when the parent is the root or a child of the root. The root
    /// uses them to bound a chain's depth; the joining node checks keys
    /// ([`TokenClaims::parent_issuer_key`]), never these names.
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
    /// The mesh's token key (Ed25519 public key) that signed this token.
    /// The joining node checks the signature with it before it dials
    /// anything, so a token altered on its way is refused there, and
    /// requires the grant to carry the same key.
    pub token_key: [u8; 32],
    /// SHA-256 of the SubjectPublicKeyInfo of the issuer that signs the
    /// parent's server certificate, as the root recorded it: the parent's
    /// own issuer (the mesh CA for the root). The joining node refuses a
    /// server whose certificate another key signed, so no other relay can
    /// pose as the parent, not even one above it that mints an issuer
    /// certificate in the parent's name.
    pub parent_issuer_key: [u8; 32],
}

impl TokenClaims {
    /// Every relay that may admit the node: `parent` first, then the other
    /// candidates.
    pub fn parents(&self) -> Vec<CandidateParent> {
        let mut parents = vec![CandidateParent {
            name: self.parent.clone(),
            addresses: self.parent_addresses.clone(),
            issuers: self.parent_issuers.clone(),
            issuer_key: self.parent_issuer_key,
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
