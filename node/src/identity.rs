//! What a node knows about itself: its name, role, certificates and keys.
//!
//! Written once at `relay init` or `relay join` and kept in the node's store.
//! Private keys are generated on the node and never leave it.

use std::sync::{Arc, PoisonError, RwLock};

use relaymesh_protocol::Role;
use serde::{Deserialize, Serialize};

/// A node's own identity in the mesh.
#[derive(Clone, Serialize, Deserialize)]
pub struct Identity {
    /// The node's name, as in its certificate.
    pub name: String,
    /// The node's role, as in its certificate.
    pub role: Role,
    /// The mesh CA certificate (DER): the trust anchor of every link, and
    /// the one join tokens pin.
    pub ca_cert_der: Vec<u8>,
    /// Other mesh CA certificates (DER) trusted as anchors too: during a
    /// rotation of the mesh CA, the other one of old and new (see
    /// `pki::rotation`). Stored apart from the rest (`Store::set_identity`),
    /// so identities written before rotations existed still read.
    #[serde(skip)]
    pub extra_anchors_der: Vec<Vec<u8>>,
    /// The node's TLS certificate (DER) followed by its issuing chain up to,
    /// not including, the mesh CA.
    pub tls_chain_der: Vec<Vec<u8>>,
    /// The private key of the TLS certificate (PKCS#8 DER).
    pub tls_key_der: Vec<u8>,
    /// For relays: the CA with which the relay admits its own children.
    pub issuer: Option<Issuer>,
    /// For a relay whose issuer key rotated while the mesh CA rotates: the
    /// issuer it had, whose children it still serves until the rotation
    /// finishes (see `pki::issuer_rotation`). Stored apart from the rest,
    /// as `extra_anchors_der` is.
    #[serde(skip)]
    pub previous_issuer: Option<PreviousIssuer>,
    /// The Ed25519 public key that verifies join tokens.
    pub token_key: Vec<u8>,
    /// For the root only: the Ed25519 key pair (PKCS#8 DER) that signs join
    /// tokens.
    pub token_signing_key: Option<Vec<u8>>,
}

/// A CA a relay signs its children's certificates with.
#[derive(Clone, Serialize, Deserialize)]
pub struct Issuer {
    /// The issuing certificate (DER). At the root this is the mesh CA itself.
    pub cert_der: Vec<u8>,
    /// The chain above `cert_der` up to, not including, the mesh CA (empty at
    /// the root and for relays the root admitted).
    pub chain_der: Vec<Vec<u8>>,
    /// The issuing certificate's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

/// A relay's issuer before its key rotated, and what links the two.
#[derive(Clone, Serialize, Deserialize)]
pub struct PreviousIssuer {
    /// The issuer as it was (certificate, chain above, key).
    pub issuer: Issuer,
    /// The new issuer's certificate (same subject, the new key) signed by
    /// the old key: children whose certificates the old key signed accept
    /// the relay's server certificate through it.
    pub cross_der: Vec<u8>,
    /// The key hash of the mesh CA the root signed with when the issuer
    /// rotated: the rotation this one belongs to.
    pub during_ca: [u8; 32],
}

impl Identity {
    /// Whether this node is the mesh's root (it holds the token signing key).
    pub fn is_root(&self) -> bool {
        self.token_signing_key.is_some()
    }

    /// Every mesh CA certificate this node trusts on its links: the one
    /// tokens pin first, then those of a rotation under way.
    pub fn anchors(&self) -> Vec<&[u8]> {
        std::iter::once(self.ca_cert_der.as_slice())
            .chain(self.extra_anchors_der.iter().map(Vec::as_slice))
            .collect()
    }
}

/// A node's identity as its tasks read it now: the daemon replaces it when
/// its certificates change (a renewal, a move), and the listener, which
/// signs children's certificates and tells them the chain above, reads the
/// current one for every request.
#[derive(Clone, Debug)]
pub struct LiveIdentity(Arc<RwLock<Arc<Identity>>>);

impl LiveIdentity {
    /// Starts with `identity`.
    pub fn new(identity: Identity) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(identity))))
    }

    /// The identity now.
    pub fn get(&self) -> Arc<Identity> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the identity for every reader.
    pub fn set(&self, identity: Identity) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(identity);
    }
}

impl std::fmt::Debug for Identity {
    // Never print keys, even at trace level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("is_root", &self.is_root())
            .finish_non_exhaustive()
    }
}
