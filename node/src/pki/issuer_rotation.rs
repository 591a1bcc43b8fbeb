//! Rotating a relay's issuer key while the mesh CA rotates, without
//! dropping a child.
//!
//! When a rotation of the mesh CA starts, every relay makes a new issuer
//! key, and its next renewal asks the parent to sign it
//! ([`new_issuer_request`]). With the answer ([`rotated_identity`]) the
//! relay signs its children with the new key from then on, and serves them
//! a certificate the new key signed, followed by the new issuer certificate
//! **cross-signed** by the old key: a child whose certificate the old key
//! signed accepts the relay through it (`quic_tls::signed_with_key`),
//! renews, and from then on expects the new key. A relay child's issuer,
//! which the old key signed, is signed again at that renewal
//! ([`parent_rekeyed`]). When the rotation finishes, the relay drops the
//! old key and the cross-signed certificate ([`without_previous_issuer`]).
//!
//! Nothing here decides *when*: see the daemon's `rotation`.

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::pki_types::PrivatePkcs8KeyDer;

use super::certs::{for_request, generate, issuer_params, new_key, signer};
use super::grant::mismatch;
use super::PkiError;
use crate::identity::{Identity, PreviousIssuer};

/// A relay's new issuer key and the request its parent signs.
pub struct NewIssuerKey {
    /// The new key (PKCS#8 DER), kept on the relay.
    pub key_der: Vec<u8>,
    /// A certificate request for it (PKCS#10 DER).
    pub csr_der: Vec<u8>,
}

/// A new issuer key for a relay and the request for it; `None` for the
/// root (its issuer is the mesh CA, which rotates by itself) and for a
/// node without an issuer.
pub fn new_issuer_request(identity: &Identity) -> Result<Option<NewIssuerKey>, PkiError> {
    if identity.issuer.is_none() || identity.is_root() {
        return Ok(None);
    }
    let key = new_key()?;
    let csr = for_request(issuer_params(&identity.name, 0)?)
        .serialize_request(&key)
        .map_err(generate("make the new issuer's request"))?;
    Ok(Some(NewIssuerKey {
        key_der: key.serialize_der(),
        csr_der: csr.der().to_vec(),
    }))
}

/// `identity` renewed with `chain_der`, its issuer now the new key
/// `key_der` that the parent signed (`issuer_chain_der`), the old one kept
/// as [`Identity::previous_issuer`] with the new issuer cross-signed by it.
/// `during_ca` is the mesh CA key the root signs with now;
/// `server_chain_der` what the parent served (see
/// [`super::renewed_through`]).
pub fn rotated_identity(
    identity: &Identity,
    chain_der: Vec<Vec<u8>>,
    issuer_chain_der: Option<Vec<Vec<u8>>>,
    key_der: Vec<u8>,
    during_ca: [u8; 32],
    server_chain_der: &[Vec<u8>],
) -> Result<Identity, PkiError> {
    let Some(old) = identity.issuer.clone().filter(|_| !identity.is_root()) else {
        return Err(mismatch("only a relay below the root rotates its issuer"));
    };
    let Some(issuer_chain_der) = issuer_chain_der else {
        return Err(mismatch("the parent did not sign the new issuer key"));
    };
    let renewed = super::renewal::renewed_with_issuer(
        identity,
        chain_der,
        key_der.clone(),
        issuer_chain_der,
        server_chain_der,
    )?;
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(key_der.as_slice()),
        &PKCS_ECDSA_P256_SHA256,
    )
    .map_err(|e| PkiError::BadKey {
        reason: format!("new issuer key: {e}"),
    })?;
    // Only a server certificate follows it: no issuer below.
    let cross = issuer_params(&identity.name, 0)?
        .signed_by(&key, &signer(&old)?)
        .map_err(generate("cross-sign the new issuer"))?;
    Ok(Identity {
        previous_issuer: Some(PreviousIssuer {
            issuer: old,
            cross_der: cross.der().to_vec(),
            during_ca,
        }),
        ..renewed
    })
}

/// Whether the parent serving `server_chain_der` (leaf first) signs with
/// another key than the one that signed this relay's issuer (the parent's
/// issuer rotated, or the root's mesh CA): the relay's issuer is then
/// signed again, same key, at its next renewal.
pub fn parent_rekeyed(identity: &Identity, server_chain_der: &[Vec<u8>]) -> bool {
    let Some(issuer) = identity.issuer.as_ref().filter(|_| !identity.is_root()) else {
        return false;
    };
    let anchors = identity.anchors();
    let issuer_chain: Vec<Vec<u8>> = std::iter::once(issuer.cert_der.clone())
        .chain(issuer.chain_der.iter().cloned())
        .collect();
    let signed_by = super::chain_signer_key(&issuer_chain, &anchors);
    let serving = super::chain_signer_key(server_chain_der, &anchors);
    matches!((signed_by, serving), (Ok(a), Ok(b)) if a != b)
}

/// `identity` without its previous issuer: the rotation finished, and the
/// children the old key signed have renewed (or are left to a new token).
pub fn without_previous_issuer(identity: &Identity) -> Identity {
    Identity {
        previous_issuer: None,
        ..identity.clone()
    }
}

#[cfg(test)]
mod tests;
