//! Checking certificates: a joining node's look at what its parent granted,
//! and chain checks against the mesh CA.

use std::sync::Arc;

use rcgen::{KeyPair, PublicKeyData, PKCS_ECDSA_P256_SHA256};
use relaymesh_protocol::message::JoinGrant;
use relaymesh_protocol::Role;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::RootCertStore;

use super::{parse_cert, peer_of, NodeKeys, Peer, PkiError, MAX_INTERMEDIATES};
use crate::identity::{Identity, Issuer};

/// The length of an Ed25519 public key.
const ED25519_PUBLIC_KEY_LEN: usize = 32;

/// Assembles a joining node's [`Identity`] from its own keys and its
/// parent's grant, after checking that the granted certificates carry the
/// node's own public keys, name and role, and chain to `grant.ca_cert_der`.
///
/// This does not know which CA the node pinned: the caller must also check
/// that `sha256(&grant.ca_cert_der)` equals the token's `ca_sha256`.
pub fn identity_from_grant(
    name: &str,
    role: Role,
    keys: NodeKeys,
    grant: &JoinGrant,
) -> Result<Identity, PkiError> {
    relaymesh_protocol::name::validate(name)?;
    let Some(leaf) = grant.tls_chain_der.first() else {
        return Err(mismatch("the grant holds no TLS certificate"));
    };
    let peer = peer_of(leaf)?;
    let wanted = Peer {
        role,
        name: name.to_string(),
    };
    if peer != wanted {
        return Err(mismatch(format!(
            "the TLS certificate is for {} {}, not {} {}",
            peer.role.as_str(),
            peer.name,
            role.as_str(),
            name
        )));
    }
    check_key_matches(leaf, &keys.tls_key_der, "TLS")?;
    let anchors = [grant.ca_cert_der.as_slice()];
    verify_chain(&anchors, &grant.tls_chain_der)?;
    if role == Role::Relay {
        verify_server_chain(&anchors, &grant.tls_chain_der, name)?;
    }
    if grant.token_key.len() != ED25519_PUBLIC_KEY_LEN {
        return Err(mismatch("the token key is not an Ed25519 public key"));
    }
    let issuer = if role == Role::Relay {
        Some(relay_issuer(keys.issuer_key_der, grant)?)
    } else {
        None
    };
    Ok(Identity {
        name: name.to_string(),
        role,
        ca_cert_der: grant.ca_cert_der.clone(),
        extra_anchors_der: Vec::new(),
        tls_chain_der: grant.tls_chain_der.clone(),
        tls_key_der: keys.tls_key_der,
        issuer,
        previous_issuer: None,
        token_key: grant.token_key.clone(),
        token_signing_key: None,
    })
}

/// Checks a client certificate chain (leaf first, mesh CA not included)
/// against the mesh CAs `anchors` as the only trust anchors, as a link's
/// server does, and returns the leaf's identity.
pub fn verify_chain(anchors: &[&[u8]], chain_der: &[Vec<u8>]) -> Result<Peer, PkiError> {
    let Some((leaf, intermediates)) = chain_der.split_first() else {
        return Err(super::bad_cert("empty certificate chain"));
    };
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|der| CertificateDer::from(der.as_slice()))
        .collect();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(mesh_roots(anchors)?),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()?;
    verifier
        .verify_client_cert(
            &CertificateDer::from(leaf.as_slice()),
            &intermediates,
            UnixTime::now(),
        )
        .map_err(PkiError::Untrusted)?;
    peer_of(leaf)
}

/// Whether `cert_der` was signed directly by the key of `issuer_cert_der`
/// (and names it as issuer). A relay uses this to check that a child's
/// certificate comes from its own issuer, not from some other relay's.
pub fn is_issued_by(cert_der: &[u8], issuer_cert_der: &[u8]) -> Result<bool, PkiError> {
    let cert = parse_cert(cert_der)?;
    let issuer = parse_cert(issuer_cert_der)?;
    if cert.issuer().as_raw() != issuer.subject().as_raw() {
        return Ok(false);
    }
    Ok(cert.verify_signature(Some(issuer.public_key())).is_ok())
}

/// Checks a relay's granted issuer chain and pairs it with the relay's key.
fn relay_issuer(key_der: Option<Vec<u8>>, grant: &JoinGrant) -> Result<Issuer, PkiError> {
    let Some(key_der) = key_der else {
        return Err(mismatch("a relay needs an issuer key"));
    };
    let Some(chain) = grant.issuer_chain_der.as_ref() else {
        return Err(mismatch("the grant holds no issuer chain for a relay"));
    };
    issuer_from_chain(
        key_der,
        chain,
        &grant.tls_chain_der,
        &[grant.ca_cert_der.as_slice()],
    )
}

/// Checks an issuer chain a parent signed for a relay's issuer key
/// `key_der` (at a join, or at a renewal after the relay re-parented): the
/// first certificate carries the key and is a CA, each is signed by the
/// next and the last by one of the mesh CAs `anchors` (or is one of them,
/// cross-signed by the other during a rotation: see `rotation`), and the
/// chain above the issuer is the one above the relay's TLS certificate
/// `tls_chain_der`.
pub(super) fn issuer_from_chain(
    key_der: Vec<u8>,
    chain: &[Vec<u8>],
    tls_chain_der: &[Vec<u8>],
    anchors: &[&[u8]],
) -> Result<Issuer, PkiError> {
    let Some((issuer_cert, above)) = chain.split_first() else {
        return Err(mismatch("the grant's issuer chain is empty"));
    };
    if chain.len() > MAX_INTERMEDIATES {
        return Err(mismatch(format!(
            "the issuer chain has {} certificates, more than the {MAX_INTERMEDIATES} that verification accepts",
            chain.len()
        )));
    }
    check_key_matches(issuer_cert, &key_der, "issuer")?;
    let parsed = parse_cert(issuer_cert)?;
    let is_ca = parsed
        .basic_constraints()
        .map_err(|e| super::bad_cert(format!("unreadable basic constraints: {e}")))?
        .is_some_and(|constraints| constraints.value.ca);
    if !is_ca {
        return Err(mismatch("the issuer certificate is not a CA"));
    }
    // Each certificate must be signed by the next one, the last by a mesh CA.
    for (index, pair) in chain.windows(2).enumerate() {
        if !is_issued_by(&pair[0], &pair[1])? {
            return Err(mismatch(format!(
                "issuer chain certificate {index} is not signed by the next one"
            )));
        }
    }
    let last = &chain[chain.len() - 1];
    let mut anchored = false;
    for anchor in anchors {
        anchored |= is_issued_by(last, anchor)? || super::rotation::same_ca(last, anchor)?;
    }
    if !anchored {
        return Err(mismatch(format!(
            "issuer chain certificate {} is not signed by the mesh CA",
            chain.len() - 1
        )));
    }
    // The TLS certificate and the issuer come from the same parent issuer.
    if tls_chain_der.get(1..) != Some(above) {
        return Err(mismatch(
            "the TLS and issuer certificates were not issued under the same chain",
        ));
    }
    Ok(Issuer {
        cert_der: issuer_cert.clone(),
        chain_der: above.to_vec(),
        key_der,
    })
}

/// Checks that a relay's chain also serves as a TLS server chain for `name`.
pub(super) fn verify_server_chain(
    anchors: &[&[u8]],
    chain_der: &[Vec<u8>],
    name: &str,
) -> Result<(), PkiError> {
    let Some((leaf, intermediates)) = chain_der.split_first() else {
        return Err(super::bad_cert("empty certificate chain"));
    };
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|der| CertificateDer::from(der.as_slice()))
        .collect();
    let server_name = ServerName::try_from(name.to_string())
        .map_err(|e| mismatch(format!("{name:?} is not a server name: {e}")))?;
    rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(mesh_roots(anchors)?),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()?
    .verify_server_cert(
        &CertificateDer::from(leaf.as_slice()),
        &intermediates,
        &server_name,
        &[],
        UnixTime::now(),
    )
    .map_err(PkiError::Untrusted)?;
    Ok(())
}

/// A root store holding only the mesh CAs `anchors`.
pub(super) fn mesh_roots(anchors: &[&[u8]]) -> Result<RootCertStore, PkiError> {
    let mut roots = RootCertStore::empty();
    for anchor in anchors {
        roots
            .add(CertificateDer::from(anchor.to_vec()))
            .map_err(|e| super::bad_cert(format!("mesh CA: {e}")))?;
    }
    Ok(roots)
}

/// Checks that the certificate's public key is the one of `key_der`.
pub(super) fn check_key_matches(
    cert_der: &[u8],
    key_der: &[u8],
    what: &str,
) -> Result<(), PkiError> {
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(key_der),
        &PKCS_ECDSA_P256_SHA256,
    )
    .map_err(|e| PkiError::BadKey {
        reason: format!("{what} key: {e}"),
    })?;
    let cert = parse_cert(cert_der)?;
    if cert.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
        return Err(mismatch(format!(
            "the {what} certificate does not carry this node's {what} key"
        )));
    }
    Ok(())
}

pub(super) fn mismatch(reason: impl Into<String>) -> PkiError {
    PkiError::GrantMismatch {
        reason: reason.into(),
    }
}
