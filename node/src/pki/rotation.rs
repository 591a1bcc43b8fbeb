//! Rotating the mesh CA without closing a link or re-applying anything.
//!
//! Two steps, both at the root (`relayctl rotate mesh-ca start|finish`):
//!
//! 1. **Start.** The root makes a new CA key and two certificates for it:
//!    the new CA, self-signed, and the same CA *cross-signed* by the old
//!    key. It signs from then on through the cross-signed certificate, so
//!    every chain it hands out still leads to the old CA, which every node
//!    trusts; and it tells every node, in a slice entry it signs
//!    ([`relaymesh_protocol::MeshTrust`]), to trust both CAs. The root's
//!    children have their certificates (and a relay its issuer) signed
//!    again by the new key; every node below renews through the new chain
//!    as its parent's changes.
//! 2. **Finish**, once every node's chain reaches the new key and every
//!    node trusts the new CA: the root trusts and signs with the new CA
//!    alone and tells every node to do the same.
//!
//! Nothing here decides *when*: see the daemon's `rotation`.

use relaymesh_protocol::MeshTrust;

pub(crate) use super::certs::is_mesh_ca;
use super::certs::{ca_params, generate, new_key, signer};
use super::{parse_cert, public_key_sha256, renew_at_root, PkiError};
use crate::identity::{Identity, Issuer};

/// The step of a rotation an admin asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationStep {
    /// A new mesh CA, trusted beside the old one, signs from now on.
    Start,
    /// The new mesh CA alone is trusted.
    Finish,
}

/// Whether two CA certificates are the same CA: the same subject and key,
/// whoever signed them (a new CA and its cross-signed certificate are).
pub(crate) fn same_ca(a: &[u8], b: &[u8]) -> Result<bool, PkiError> {
    let (a, b) = (parse_cert(a)?, parse_cert(b)?);
    Ok(a.subject().as_raw() == b.subject().as_raw() && a.public_key().raw == b.public_key().raw)
}

/// Why the root cannot start or finish a rotation now.
fn refused(reason: impl Into<String>) -> PkiError {
    PkiError::Rotation {
        reason: reason.into(),
    }
}

/// Step 1 at the root: a new mesh CA, cross-signed by the current one, is
/// what the root signs with from now on; both CAs are trusted. Returns the
/// root's new identity (its own certificate signed again, valid for
/// `validity`); [`current_trust`] says what every node is told.
pub fn start_mesh_ca_rotation(
    identity: &Identity,
    validity: std::time::Duration,
) -> Result<Identity, PkiError> {
    let Some(current) = identity.issuer.as_ref().filter(|_| identity.is_root()) else {
        return Err(refused("only the root holds the mesh CA"));
    };
    if !identity.extra_anchors_der.is_empty() {
        return Err(refused(
            "a rotation of the mesh CA is under way; finish it first",
        ));
    }
    let key = new_key()?;
    let params = ca_params()?;
    let new_ca = params
        .self_signed(&key)
        .map_err(generate("self-sign the new mesh CA"))?;
    let cross = params
        .signed_by(&key, &signer(current)?)
        .map_err(generate("cross-sign the new mesh CA"))?;
    let rotating = Identity {
        issuer: Some(Issuer {
            cert_der: cross.der().to_vec(),
            chain_der: Vec::new(),
            key_der: key.serialize_der(),
        }),
        extra_anchors_der: vec![new_ca.der().to_vec()],
        ..identity.clone()
    };
    renew_at_root(&rotating, validity)?.ok_or_else(|| refused("only the root holds the mesh CA"))
}

/// Step 2 at the root: the new mesh CA alone is trusted and signs. Returns
/// the root's new identity.
pub fn finish_mesh_ca_rotation(
    identity: &Identity,
    validity: std::time::Duration,
) -> Result<Identity, PkiError> {
    let Some(current) = identity.issuer.as_ref().filter(|_| identity.is_root()) else {
        return Err(refused("only the root holds the mesh CA"));
    };
    let [new_ca] = identity.extra_anchors_der.as_slice() else {
        return Err(refused(
            "no rotation of the mesh CA is under way; start one first",
        ));
    };
    if !same_ca(&current.cert_der, new_ca)? {
        return Err(refused(
            "the root's signing certificate is not the new mesh CA",
        ));
    }
    let finished = Identity {
        ca_cert_der: new_ca.clone(),
        extra_anchors_der: Vec::new(),
        issuer: Some(Issuer {
            cert_der: new_ca.clone(),
            chain_der: Vec::new(),
            key_der: current.key_der.clone(),
        }),
        ..identity.clone()
    };
    renew_at_root(&finished, validity)?.ok_or_else(|| refused("only the root holds the mesh CA"))
}

/// What the root `identity` tells every node: the mesh CAs it trusts, the
/// key it signs certificates with, and the keys whose signatures on slice
/// entries are accepted (its own, then `next_token_key` while the
/// token-signing key rotates).
pub fn current_trust(
    identity: &Identity,
    next_token_key: Option<&[u8]>,
) -> Result<MeshTrust, PkiError> {
    let signing = identity
        .issuer
        .as_ref()
        .map_or(&identity.ca_cert_der, |issuer| &issuer.cert_der);
    Ok(MeshTrust {
        anchors: identity.anchors().into_iter().map(<[u8]>::to_vec).collect(),
        signer_key: public_key_sha256(signing)?,
        token_keys: std::iter::once(identity.token_key.clone())
            .chain(next_token_key.map(<[u8]>::to_vec))
            .collect(),
    })
}

/// A node's identity trusting what the root decided: the first anchor is
/// the one new join tokens pin. Every anchor must be a mesh CA
/// certificate. The entry is the root's word (it is signed), so nothing
/// else is asked of it; a node that no longer reaches a trusted CA cannot
/// be reached either, and needs a new token.
pub fn with_mesh_trust(identity: &Identity, trust: &MeshTrust) -> Result<Identity, PkiError> {
    let Some((first, rest)) = trust.anchors.split_first() else {
        return Err(refused("the root's trust names no mesh CA"));
    };
    if let Some(bad) = trust.anchors.iter().find(|anchor| !is_mesh_ca(anchor)) {
        let subject = parse_cert(bad)
            .map(|cert| cert.subject().to_string())
            .unwrap_or_else(|error| error.to_string());
        return Err(refused(format!(
            "the root's trust names {subject}, which is no mesh CA"
        )));
    }
    Ok(Identity {
        ca_cert_der: first.clone(),
        extra_anchors_der: rest.to_vec(),
        // Tokens are signed with the first key; the core checks entries
        // against all of them.
        token_key: trust
            .token_keys
            .first()
            .cloned()
            .unwrap_or_else(|| identity.token_key.clone()),
        ..identity.clone()
    })
}

/// The key hash of the mesh CA this node's certificate chain reaches: that
/// of the cross-signed CA in the chain, if there is one, or of the anchor
/// that signed the chain's last certificate.
pub fn chain_ca_key(identity: &Identity) -> Result<[u8; 32], PkiError> {
    let Some(top) = identity.tls_chain_der.last() else {
        return Err(super::bad_cert("the identity holds no certificate"));
    };
    if let Some(cross) = identity
        .tls_chain_der
        .iter()
        .skip(1)
        .find(|cert| is_mesh_ca(cert))
    {
        return public_key_sha256(cross);
    }
    for anchor in identity.anchors() {
        if super::is_issued_by(top, anchor)? {
            return public_key_sha256(anchor);
        }
    }
    Err(super::bad_cert(
        "the certificate chain reaches none of the trusted mesh CAs",
    ))
}

/// Whether a mesh CA signed this node's certificate directly (the node is
/// one of the root's children) with another key than `signer_key`: then
/// the root signs it again, and a relay's issuer with it.
pub fn needs_mesh_signature(identity: &Identity, signer_key: &[u8; 32]) -> bool {
    if identity.is_root() {
        return false;
    }
    let by_mesh_ca = match identity.tls_chain_der.get(1) {
        None => true,
        Some(issuer) => is_mesh_ca(issuer),
    };
    by_mesh_ca
        && super::chain_signer_key(&identity.tls_chain_der, &identity.anchors())
            .is_ok_and(|key| key != *signer_key)
}

/// The first bytes of a key hash in hex, as the labels that report a
/// rotation's progress carry it.
pub fn short_key(key: &[u8; 32]) -> String {
    super::hex(&key[..6])
}

#[cfg(test)]
mod tests;
