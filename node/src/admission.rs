//! The parent's decision on a [`JoinRequest`]: check the token, the request
//! and the node's own ability to admit, then sign the certificates.
//!
//! [`admit`] is pure apart from the [`TokenLedger`] it is handed and the
//! clock the certificates' validity is read from: it takes `now` and returns
//! a grant or a refusal, so the daemon only has to carry bytes. Every check
//! runs before the ledger is touched, so a refused join never uses up a
//! token.

use relaymesh_protocol::message::{JoinGrant, JoinRequest};
use relaymesh_protocol::token::TokenClaims;
use relaymesh_protocol::{ErrorCode, Refusal, Role, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

use crate::identity::{Identity, Issuer};
use crate::pki::{self, PkiError};
use crate::token::{self, TokenError};

/// Where a relay records the join tokens it has accepted, so each is used
/// once.
pub trait TokenLedger {
    /// Records token `id` as used; `Ok(true)` if it was unused until now,
    /// `Ok(false)` if it was already used. `not_after_unix` is the token's
    /// expiry, after which the record may be forgotten.
    fn claim(&self, id: [u8; 16], not_after_unix: u64) -> Result<bool, String>;

    /// Whether the root revoked token `id` (see [`crate::deny_list`]).
    fn is_revoked(&self, id: &[u8; 16]) -> bool;
}

/// Decides on `request` at this node: a grant with freshly signed
/// certificates (the TLS one valid for `validity`), or a refusal saying why.
///
/// Checks, in order: the protocol version; that this node has an issuer;
/// the token's signature and lifetime; that the token is for this mesh and
/// this parent; that the request's role and name are the token's; the name;
/// that a relay sent an issuer request and that the role is not admin; that
/// the root has not revoked the token; the certificate requests (by signing
/// them). Only then is the token claimed in
/// `ledger`.
pub fn admit(
    identity: &Identity,
    request: &JoinRequest,
    now_unix: u64,
    ledger: &dyn TokenLedger,
    validity: std::time::Duration,
) -> Result<JoinGrant, Refusal> {
    if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&request.version) {
        return Err(Refusal::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this relay speaks {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                request.version
            ),
        ));
    }
    let Some(issuer) = identity.issuer.as_ref() else {
        return Err(Refusal::new(
            ErrorCode::Forbidden,
            "agents cannot admit children",
        ));
    };
    let claims = verify_token(identity, &request.token, now_unix)?;
    check_claims(identity, request, &claims)?;
    if ledger.is_revoked(&claims.id) {
        return Err(Refusal::new(
            ErrorCode::Revoked,
            format!("token {} was revoked by the root", token_id_hex(&claims.id)),
        ));
    }

    let tls_cert = pki::sign_node_cert(
        issuer,
        &request.tls_csr_der,
        &claims.name,
        claims.role,
        validity,
    )
    .map_err(|e| signing_refusal("TLS", e))?;
    let issuer_cert = match (&request.issuer_csr_der, claims.role) {
        (Some(csr), Role::Relay) => Some(
            pki::sign_issuer_cert(issuer, csr, &claims.name)
                .map_err(|e| signing_refusal("issuer", e))?,
        ),
        _ => None,
    };

    match ledger.claim(claims.id, claims.not_after_unix) {
        Ok(true) => {}
        Ok(false) => {
            return Err(Refusal::new(
                ErrorCode::TokenReused,
                format!("token {} was already used", token_id_hex(&claims.id)),
            ))
        }
        Err(e) => {
            return Err(Refusal::new(
                ErrorCode::Internal,
                format!("cannot record the token as used: {e}"),
            ))
        }
    }

    let above = chain_above_leaf(identity, issuer);
    // The mesh CA the token pins (during a rotation, old or new), which
    // the node checks the grant against; it learns the others from the
    // root's trust in the slice.
    let pinned = identity
        .anchors()
        .into_iter()
        .find(|anchor| pki::sha256(anchor) == claims.ca_sha256)
        .unwrap_or(&identity.ca_cert_der)
        .to_vec();
    Ok(JoinGrant {
        ca_cert_der: pinned,
        tls_chain_der: std::iter::once(tls_cert)
            .chain(above.iter().cloned())
            .collect(),
        issuer_chain_der: issuer_cert
            .map(|cert| std::iter::once(cert).chain(above.iter().cloned()).collect()),
        token_key: identity.token_key.clone(),
        parent: identity.name.clone(),
    })
}

/// Checks the token's signature and lifetime.
fn verify_token(identity: &Identity, token: &str, now_unix: u64) -> Result<TokenClaims, Refusal> {
    token::verify(token, &identity.token_key, now_unix).map_err(|e| match e {
        TokenError::Expired { expired_unix } => Refusal::new(
            ErrorCode::TokenExpired,
            format!(
                "the join token expired at {expired_unix} (Unix seconds), {} seconds ago",
                now_unix.saturating_sub(expired_unix)
            ),
        ),
        other => Refusal::new(ErrorCode::TokenInvalid, other.to_string()),
    })
}

/// Checks that the token is for this mesh and parent, and that the request
/// is what the token allows.
fn check_claims(
    identity: &Identity,
    request: &JoinRequest,
    claims: &TokenClaims,
) -> Result<(), Refusal> {
    let pins_a_mesh_ca = identity
        .anchors()
        .into_iter()
        .any(|anchor| pki::sha256(anchor) == claims.ca_sha256);
    if !pins_a_mesh_ca {
        return Err(Refusal::new(
            ErrorCode::TokenMismatch,
            "the token is for another mesh (its CA fingerprint differs)",
        ));
    }
    if !claims.admits_under(&identity.name) {
        let parents: Vec<String> = claims.parents().into_iter().map(|p| p.name).collect();
        return Err(Refusal::new(
            ErrorCode::TokenMismatch,
            format!(
                "token is for parent {}, this is {}",
                parents.join(" or "),
                identity.name
            ),
        ));
    }
    if request.role != claims.role {
        return Err(Refusal::new(
            ErrorCode::TokenMismatch,
            format!(
                "token is for role {}, not {}",
                claims.role.as_str(),
                request.role.as_str()
            ),
        ));
    }
    if request.name != claims.name {
        return Err(Refusal::new(
            ErrorCode::TokenMismatch,
            format!("token is for name {}, not {}", claims.name, request.name),
        ));
    }
    if let Err(e) = relaymesh_protocol::name::validate(&claims.name) {
        return Err(Refusal::new(ErrorCode::Malformed, e.to_string()));
    }
    match claims.role {
        Role::Relay if request.issuer_csr_der.is_none() => Err(Refusal::new(
            ErrorCode::Malformed,
            "a relay must send an issuer certificate request",
        )),
        Role::Relay => Ok(()),
        Role::Agent if request.issuer_csr_der.is_some() => Err(Refusal::new(
            ErrorCode::Malformed,
            "an agent must not send an issuer certificate request",
        )),
        Role::Agent => Ok(()),
        _ => Err(Refusal::new(
            ErrorCode::Forbidden,
            format!("role {} is never admitted by joining", claims.role.as_str()),
        )),
    }
}

/// The certificates between a child's certificate and the mesh CA: this
/// node's issuer and its chain, or nothing at the root, whose issuer is the
/// mesh CA itself (the cross-signed new CA during a rotation, which the
/// chain carries for the nodes that trust the old one only).
pub(crate) fn chain_above_leaf(identity: &Identity, issuer: &Issuer) -> Vec<Vec<u8>> {
    if issuer.cert_der == identity.ca_cert_der {
        Vec::new()
    } else {
        std::iter::once(issuer.cert_der.clone())
            .chain(issuer.chain_der.iter().cloned())
            .collect()
    }
}

/// A refusal for a certificate that could not be signed: the requester's
/// fault for a bad request, this node's otherwise.
fn signing_refusal(what: &str, error: PkiError) -> Refusal {
    match error {
        PkiError::BadCsr { .. } | PkiError::InvalidName(_) => Refusal::new(
            ErrorCode::Malformed,
            format!("{what} certificate request: {error}"),
        ),
        PkiError::ChainTooDeep { .. } => Refusal::new(ErrorCode::Forbidden, error.to_string()),
        other => Refusal::new(
            ErrorCode::Internal,
            format!("cannot sign the {what} certificate: {other}"),
        ),
    }
}

fn token_id_hex(id: &[u8; 16]) -> String {
    relaymesh_protocol::revocation::hex(id)
}

#[cfg(test)]
mod tests;
