//! Who a certificate was issued to, and when: what a revocation is checked
//! against.
//!
//! A node's TLS certificate names it in its spiffe URI; a relay's issuer
//! names the relay in its common name. Every certificate relaymesh makes at
//! a join starts [`BACKDATE_SECS`](super::certs::BACKDATE_SECS) before it
//! was signed, and a renewal keeps that `notBefore`, so `notBefore` tells
//! when the node joined: a revoked node cannot escape its revocation by
//! renewing before the revocation reaches its parent.

use super::{parse_cert, peer_of, PkiError};

/// The node a certificate belongs to and when it was signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The node's name.
    pub name: String,
    /// When the node joined (its first certificate was signed), in seconds
    /// since the Unix epoch, by the signer's clock.
    pub issued_unix: u64,
}

/// The holder of a node certificate or a relay's issuer; `None` for any
/// other certificate (the mesh CA).
pub fn holder_of(der: &[u8]) -> Result<Option<Holder>, PkiError> {
    let cert = parse_cert(der)?;
    let not_before = u64::try_from(cert.validity().not_before.timestamp()).unwrap_or(0);
    let issued_unix = not_before.saturating_add(super::certs::BACKDATE_SECS);
    let name = if cert.is_ca() {
        super::server_verifier::relay_of_issuer(der)
    } else {
        Some(peer_of(der)?.name)
    };
    Ok(name.map(|name| Holder { name, issued_unix }))
}
