//! Renewing a node's TLS certificate before it expires.
//!
//! Node certificates are short-lived ([`DEFAULT_NODE_CERT_VALIDITY`]). When
//! two thirds of the time left have passed, the node asks its parent, over
//! the link its current certificate still opens, to sign the same key again
//! ([`renewal_request`], [`sign_renewal`]); it checks what came back
//! ([`renewed_identity`]) and uses it for its next connections and, for a
//! relay, to serve its own children. The root signs its own with the mesh
//! CA ([`renew_at_root`]). The key stays the same: what expires is the
//! parent's word for it.

use std::time::Duration;

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
use relaymesh_protocol::Role;
use rustls::pki_types::PrivatePkcs8KeyDer;

use super::certs::{csr_public_key, for_request, issuer_params, node_params, sign_node_cert_since};
use super::grant::{check_key_matches, mismatch, verify_server_chain};
use super::{parse_cert, peer_of, verify_chain, PkiError, DEFAULT_NODE_CERT_VALIDITY};
use crate::identity::Identity;
use crate::identity::Issuer;

/// A certificate request for the node's current TLS key, name and role.
pub fn renewal_request(identity: &Identity) -> Result<Vec<u8>, PkiError> {
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(identity.tls_key_der.as_slice()),
        &PKCS_ECDSA_P256_SHA256,
    )
    .map_err(|e| PkiError::BadKey {
        reason: format!("TLS key: {e}"),
    })?;
    let params = node_params(&identity.name, identity.role, DEFAULT_NODE_CERT_VALIDITY)?;
    let csr = for_request(params)
        .serialize_request(&key)
        .map_err(super::certs::generate("make the renewal request"))?;
    Ok(csr.der().to_vec())
}

/// A certificate request for the relay's current issuer key, which a new
/// parent signs after the relay re-parented to it (see
/// [`rehomed_identity`]); `None` for a node without an issuer, and for the
/// root, whose issuer is the mesh CA.
pub fn issuer_renewal_request(identity: &Identity) -> Result<Option<Vec<u8>>, PkiError> {
    let Some(issuer) = identity.issuer.as_ref().filter(|_| !identity.is_root()) else {
        return Ok(None);
    };
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(issuer.key_der.as_slice()),
        &PKCS_ECDSA_P256_SHA256,
    )
    .map_err(|e| PkiError::BadKey {
        reason: format!("issuer key: {e}"),
    })?;
    let csr = for_request(issuer_params(&identity.name, 0)?)
        .serialize_request(&key)
        .map_err(super::certs::generate("make the issuer renewal request"))?;
    Ok(Some(csr.der().to_vec()))
}

/// `identity` with the renewed chain `chain_der`, after checking that it
/// carries the node's own key, name and role, comes from the same issuer
/// (subject and key) as before, and verifies against the mesh CAs. The
/// chain above that issuer may differ: a parent that moved with its issuer
/// key to another relay has it signed there, and a rotation of the mesh CA
/// signs the issuers below it again.
pub fn renewed_identity(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
) -> Result<Identity, PkiError> {
    renewed(identity, chain_der, None, &[])
}

/// [`renewed_identity`] asked of a parent that served `server_chain_der`
/// (leaf first): the renewal may come from the parent's new issuer key, if
/// that chain holds the new issuer certificate signed by the old one (the
/// parent's key rotated; see `issuer_rotation`).
pub fn renewed_through(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    server_chain_der: &[Vec<u8>],
) -> Result<Identity, PkiError> {
    renewed(identity, chain_der, None, server_chain_der)
}

/// [`renewed_through`] for a relay whose parent also signed its issuer
/// again, same key (`issuer_chain_der`): the parent signs with another key
/// than the one that signed it (see `issuer_rotation::parent_rekeyed`).
pub fn resigned_identity(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    issuer_chain_der: Vec<Vec<u8>>,
    server_chain_der: &[Vec<u8>],
) -> Result<Identity, PkiError> {
    let Some(issuer) = identity.issuer.as_ref().filter(|_| !identity.is_root()) else {
        return renewed_through(identity, chain_der, server_chain_der);
    };
    let new_issuer = Some((issuer.key_der.clone(), issuer_chain_der));
    renewed(identity, chain_der, new_issuer, server_chain_der)
}

/// [`renewed_through`] with the relay's issuer now the key `key_der`,
/// which `issuer_chain_der` certifies.
pub(super) fn renewed_with_issuer(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    key_der: Vec<u8>,
    issuer_chain_der: Vec<Vec<u8>>,
    server_chain_der: &[Vec<u8>],
) -> Result<Identity, PkiError> {
    let new_issuer = Some((key_der, issuer_chain_der));
    renewed(identity, chain_der, new_issuer, server_chain_der)
}

fn renewed(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    new_issuer: Option<(Vec<u8>, Vec<Vec<u8>>)>,
    server_chain_der: &[Vec<u8>],
) -> Result<Identity, PkiError> {
    check_renewed_leaf(identity, &chain_der)?;
    let anchors = identity.anchors();
    let successor = match (chain_der.get(1), identity.tls_chain_der.get(1)) {
        (Some(new), Some(old)) => successor_in(old, new, server_chain_der)?,
        _ => false,
    };
    if !successor && !same_issuer(chain_der.get(1), identity.tls_chain_der.get(1), &anchors)? {
        return Err(mismatch(
            "the renewed certificate comes from another issuer than the current one",
        ));
    }
    verify_chain(&anchors, &chain_der)?;
    if identity.role == Role::Relay {
        verify_server_chain(&anchors, &chain_der, &identity.name)?;
    }
    // A relay's issuer was signed by the same issuer: the chain above it is
    // the new one too, which the nodes joining below it check. (The root's
    // issuer is a mesh CA.)
    let issuer = match (&identity.issuer, new_issuer) {
        (Some(_), Some((key_der, chain))) if !identity.is_root() => Some(
            super::grant::issuer_from_chain(key_der, &chain, &chain_der, &anchors)?,
        ),
        (Some(issuer), _) if !identity.is_root() => {
            let chain: Vec<Vec<u8>> = std::iter::once(issuer.cert_der.clone())
                .chain(chain_der.iter().skip(1).cloned())
                .collect();
            Some(super::grant::issuer_from_chain(
                issuer.key_der.clone(),
                &chain,
                &chain_der,
                &anchors,
            )?)
        }
        (other, _) => other.clone(),
    };
    Ok(Identity {
        tls_chain_der: chain_der,
        issuer,
        ..identity.clone()
    })
}

/// [`renewed_identity`] for a node that re-parented to a candidate parent
/// (see [`relaymesh_protocol::parents`]): the certificate comes from the new
/// parent's issuer, so the chain above it changes; it must lead from the
/// mesh CA to a certificate signed by `issuer_key` (the hash of the
/// SubjectPublicKeyInfo the root recorded for the new parent's issuer; see
/// [`relaymesh_protocol::CandidateParent::issuer_key`]), whatever names the
/// issuers on the way carry.
///
/// A relay also needs its issuer signed by the new parent
/// (`issuer_chain_der`, see [`issuer_renewal_request`]): the issuer keeps
/// its key, so every certificate the relay issued stays valid, and its
/// subtree chains through the new parent from then on.
pub fn rehomed_identity(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    issuer_chain_der: Option<Vec<Vec<u8>>>,
    issuer_key: &[u8; 32],
) -> Result<Identity, PkiError> {
    check_renewed_leaf(identity, &chain_der)?;
    let anchors = identity.anchors();
    verify_chain(&anchors, &chain_der)?;
    let signer =
        super::server_verifier::chain_signer_key(&chain_der, &anchors).map_err(mismatch)?;
    if signer != *issuer_key {
        let path = super::server_verifier::chain_issuer_path(&chain_der, &anchors);
        return Err(mismatch(format!(
            "issuer key mismatch: the certificate was not signed by the issuer key the root recorded for the new parent (it was issued through {path:?})"
        )));
    }
    let issuer = match (&identity.issuer, issuer_chain_der) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(mismatch(
                "the new parent did not sign this relay's issuer again",
            ))
        }
        (Some(issuer), Some(chain)) => Some(super::grant::issuer_from_chain(
            issuer.key_der.clone(),
            &chain,
            &chain_der,
            &anchors,
        )?),
    };
    if issuer.is_some() {
        verify_server_chain(&anchors, &chain_der, &identity.name)?;
    }
    Ok(Identity {
        tls_chain_der: chain_der,
        issuer,
        ..identity.clone()
    })
}

/// Whether issuer `new` succeeds issuer `old`: `vouching` holds a
/// certificate for `new`'s subject and key that `old` signed (a relay's
/// new issuer, cross-signed by its old key; see `issuer_rotation`).
fn successor_in(old: &[u8], new: &[u8], vouching: &[Vec<u8>]) -> Result<bool, PkiError> {
    for cert in vouching {
        if super::rotation::same_ca(cert, new)? && super::is_issued_by(cert, old)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether two issuer certificates are the same issuer: the same subject and
/// the same key, whoever signed them (`None` is a mesh CA among `anchors`,
/// which the cross-signed certificate of a rotation stands for too).
fn same_issuer<'a>(
    a: Option<&'a Vec<u8>>,
    b: Option<&'a Vec<u8>>,
    anchors: &[&'a [u8]],
) -> Result<bool, PkiError> {
    let candidates = |side: Option<&'a Vec<u8>>| match side {
        Some(cert) => vec![cert.as_slice()],
        None => anchors.to_vec(),
    };
    for a in candidates(a) {
        for b in candidates(b) {
            if super::rotation::same_ca(a, b)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Checks that the first certificate of `chain_der` is for this node's name,
/// role and TLS key.
fn check_renewed_leaf(identity: &Identity, chain_der: &[Vec<u8>]) -> Result<(), PkiError> {
    let Some(leaf) = chain_der.first() else {
        return Err(mismatch("the renewal holds no certificate"));
    };
    let peer = peer_of(leaf)?;
    if peer.name != identity.name || peer.role != identity.role {
        return Err(mismatch(format!(
            "the renewed certificate is for {} {}, not {} {}",
            peer.role.as_str(),
            peer.name,
            identity.role.as_str(),
            identity.name
        )));
    }
    check_key_matches(leaf, &identity.tls_key_der, "TLS")
}

/// When the node's current certificate expires (Unix seconds).
pub fn expiry(identity: &Identity) -> Result<u64, PkiError> {
    let Some(leaf) = identity.tls_chain_der.first() else {
        return Err(mismatch("the identity holds no certificate"));
    };
    Ok(validity_of(leaf)?.1)
}

/// A parent's answer to a child's renewal: a certificate for the key of
/// `csr_der`, which must be the key of `presented_der` (the certificate the
/// child's connection proved it holds), with the name and role of
/// `presented_der`, valid for `validity` from now. Its `notBefore` stays
/// the one of `presented_der`, so a renewed certificate still says when
/// the node first joined, which a revocation is checked against.
pub fn sign_renewal(
    issuer: &Issuer,
    csr_der: &[u8],
    presented_der: &[u8],
    validity: Duration,
) -> Result<Vec<u8>, PkiError> {
    let presented = parse_cert(presented_der)?;
    let wanted = csr_public_key(csr_der)?;
    if presented.public_key().subject_public_key.data.as_ref()
        != rcgen::PublicKeyData::der_bytes(&wanted)
    {
        return Err(PkiError::BadCsr {
            reason: "a renewal must be for the key the connection presented".into(),
        });
    }
    let peer = peer_of(presented_der)?;
    let (since, _) = validity_of(presented_der)?;
    sign_node_cert_since(
        issuer,
        csr_der,
        &peer.name,
        peer.role,
        validity,
        Some(since),
    )
}

/// The root's own certificate, signed again by the mesh CA key it signs
/// with now (through the cross-signed certificate during a rotation),
/// valid for `validity`. `None` for any other node.
pub fn renew_at_root(
    identity: &Identity,
    validity: Duration,
) -> Result<Option<Identity>, PkiError> {
    let Some(issuer) = identity.issuer.as_ref().filter(|_| identity.is_root()) else {
        return Ok(None);
    };
    let Some(leaf) = identity.tls_chain_der.first() else {
        return Err(mismatch("the identity holds no certificate"));
    };
    let csr = renewal_request(identity)?;
    let cert = sign_renewal(issuer, &csr, leaf, validity)?;
    let chain = std::iter::once(cert)
        .chain(crate::admission::chain_above_leaf(identity, issuer))
        .collect();
    renewed_identity(identity, chain).map(Some)
}

/// A certificate's `notBefore` and `notAfter` (Unix seconds).
fn validity_of(der: &[u8]) -> Result<(u64, u64), PkiError> {
    let cert = parse_cert(der)?;
    let validity = cert.validity();
    Ok((
        u64::try_from(validity.not_before.timestamp()).unwrap_or(0),
        u64::try_from(validity.not_after.timestamp()).unwrap_or(0),
    ))
}
