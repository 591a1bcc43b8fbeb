//! How a node checks the relay it dials: the verifiers of the QUIC client
//! configurations in `quic_tls`. A server must chain to a mesh CA for the
//! name dialed and be signed by the key the node expects of it (its
//! parent's issuer, a candidate's recorded key, or a join token's pinned
//! CA and parent key), so no other relay can pose as it.

use std::sync::Arc;

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, Error as TlsError};

use super::certs::ISSUER_CN_PREFIX;
use super::grant::mesh_roots;
use super::{is_issued_by, sha256, PkiError, MAX_INTERMEDIATES};

/// The relays whose issuers lead from one of the mesh CAs `anchors` to the
/// first certificate of `chain_der` (leaf first, then the intermediates
/// the peer sent), top-down.
pub fn chain_issuer_path(chain_der: &[Vec<u8>], anchors: &[&[u8]]) -> Result<Vec<String>, String> {
    let Some((leaf, rest)) = chain_der.split_first() else {
        return Err("the chain holds no certificate".into());
    };
    let intermediates: Vec<CertificateDer<'static>> = rest
        .iter()
        .map(|der| CertificateDer::from(der.clone()))
        .collect();
    issuer_path(leaf, &intermediates, anchors)
}

/// The SHA-256 of a certificate's SubjectPublicKeyInfo (DER): how the
/// root records a relay's issuer key and a token names it.
pub fn public_key_sha256(der: &[u8]) -> Result<[u8; 32], PkiError> {
    Ok(sha256(super::parse_cert(der)?.public_key().raw))
}

/// The key hash ([`public_key_sha256`]) of the certificate that signed the
/// first certificate of `chain_der` (leaf first, then the intermediates the
/// peer sent), found by signature among the rest of the chain and the mesh
/// CAs `anchors`.
pub fn chain_signer_key(chain_der: &[Vec<u8>], anchors: &[&[u8]]) -> Result<[u8; 32], String> {
    let Some((leaf, rest)) = chain_der.split_first() else {
        return Err("the chain holds no certificate".into());
    };
    rest.iter()
        .map(Vec::as_slice)
        .chain(anchors.iter().copied())
        .find(|candidate| {
            *candidate != leaf.as_slice() && is_issued_by(leaf, candidate).unwrap_or(false)
        })
        .ok_or_else(|| "the chain does not say who signed its first certificate".to_string())
        .and_then(|signer| public_key_sha256(signer).map_err(|e| e.to_string()))
}

/// Whether `leaf` was signed by a key whose hash is `key`, among
/// `intermediates` and the CAs `anchors`, or by its successor: a mesh CA
/// certificate that key signed (the cross-signed new CA of a rotation,
/// which only the holder of the old key can make; see `rotation`), or an
/// issuer certificate of `relay` (the server, when it is one) that key
/// signed (the relay's new issuer key, cross-signed by its old one; see
/// `issuer_rotation`). A relay's key signs its children's issuers too, but
/// under their names: no child can pass for its parent so.
fn signed_with_key(
    leaf: &[u8],
    intermediates: &[CertificateDer<'_>],
    anchors: &[&[u8]],
    key: &[u8; 32],
    relay: Option<&str>,
) -> bool {
    let signers = || {
        intermediates
            .iter()
            .map(|cert| cert.as_ref())
            .chain(anchors.iter().copied())
    };
    let with_key = |cert: &[u8], key: &[u8; 32]| {
        signers().any(|signer| {
            public_key_sha256(signer).is_ok_and(|hash| hash == *key)
                && is_issued_by(cert, signer).unwrap_or(false)
        })
    };
    if with_key(leaf, key) {
        return true;
    }
    intermediates.iter().any(|successor| {
        let successor_of = super::certs::is_mesh_ca(successor.as_ref())
            || relay
                .is_some_and(|relay| relay_of_issuer(successor.as_ref()).as_deref() == Some(relay));
        successor_of
            && with_key(successor.as_ref(), key)
            && public_key_sha256(successor.as_ref()).is_ok_and(|next| with_key(leaf, &next))
    })
}

/// Why a server's certificate is not the one the root placed: names the
/// key expected and the issuers it was signed through instead.
fn posing(name: &str, key: &[u8; 32], path: Result<Vec<String>, String>) -> TlsError {
    let through = match path {
        Ok(path) => format!("issuers named {path:?}"),
        Err(reason) => reason,
    };
    wrong_issuer(format!(
        "issuer key mismatch: {name:?}'s certificate was not signed by the issuer key the root recorded for it (sha256 {}), but through {through}: another relay may be posing as it",
        short_hex(key)
    ))
}

/// The first bytes of a key hash in hex, for messages.
fn short_hex(key: &[u8; 32]) -> String {
    key.iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Accepts a server whose chain holds the pinned CA and verifies against it.
#[derive(Debug)]
pub(super) struct PinnedCaVerifier {
    pub(super) ca_sha256: [u8; 32],
    pub(super) parent_issuer_key: [u8; 32],
    pub(super) provider: Arc<CryptoProvider>,
}

/// Verifies a server against the mesh CAs, then that the key the node
/// expects of it signed its certificate (see [`signed_with_key`]).
#[derive(Debug)]
pub(super) struct MeshServerVerifier {
    pub(super) inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The mesh CAs this node trusts.
    pub(super) anchors: Vec<Vec<u8>>,
    pub(super) expected: Expected,
    pub(super) provider: Arc<CryptoProvider>,
}

/// Whose key must have signed the server's certificate.
#[derive(Debug)]
pub(super) enum Expected {
    /// The node's parent: the issuer that signed the node's own
    /// certificate (a mesh CA for the root's children).
    Parent {
        /// That issuer's certificate.
        issuer: Vec<u8>,
        /// The hash of its key.
        key: [u8; 32],
        /// The relay it belongs to (`None` for a mesh CA), which must be
        /// the server's name.
        relay: Option<String>,
    },
    /// One of the node's candidate parents, by the name dialed: each
    /// one's issuer key hash as the root recorded it.
    Candidates(std::collections::BTreeMap<String, [u8; 32]>),
}

impl Expected {
    /// Why a server named `server_name` is not the one expected, if not:
    /// `signed_by(key, relay)` says whether that key signed its
    /// certificate, where `relay` names the server.
    fn refuses(
        &self,
        server_name: &ServerName<'_>,
        signed_by: impl Fn(&[u8; 32], Option<&str>) -> bool,
        path: impl FnOnce() -> Result<Vec<String>, String>,
    ) -> Option<TlsError> {
        let dialed = match server_name {
            ServerName::DnsName(name) => Some(name.as_ref()),
            _ => None,
        };
        match self {
            Self::Parent { issuer, key, relay } => {
                let named = relay.as_deref().is_none_or(|relay| dialed == Some(relay));
                if named && signed_by(key, relay.as_deref()) {
                    return None;
                }
                Some(wrong_issuer(format!(
                    "the parent's certificate was not signed by {}, which admitted this node: another relay may be posing as it",
                    subject_of(issuer)
                )))
            }
            Self::Candidates(keys) => {
                let Some(name) = dialed else {
                    return Some(wrong_issuer(format!(
                        "{server_name:?} is no candidate parent"
                    )));
                };
                let Some(key) = keys.get(name) else {
                    return Some(wrong_issuer(format!("{name:?} is no candidate parent")));
                };
                if signed_by(key, Some(name)) {
                    return None;
                }
                Some(posing(name, key, path()))
            }
        }
    }
}

/// A server certificate that verifies against the mesh CA but was not
/// issued where the tree says the server sits.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct WrongIssuer(String);

fn wrong_issuer(reason: String) -> TlsError {
    TlsError::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
        WrongIssuer(reason),
    ))))
}

impl ServerCertVerifier for MeshServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let verified = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let anchors: Vec<&[u8]> = self.anchors.iter().map(Vec::as_slice).collect();
        let signed_by = |key: &[u8; 32], relay: Option<&str>| {
            signed_with_key(end_entity.as_ref(), intermediates, &anchors, key, relay)
        };
        let path = || issuer_path(end_entity.as_ref(), intermediates, &anchors);
        match self.expected.refuses(server_name, signed_by, path) {
            Some(error) => Err(error),
            None => Ok(verified),
        }
    }

    crate::verify_handshake_signatures!();
}

/// The relays whose issuers lead from a mesh CA to `leaf`, top-down, found
/// by signature among `intermediates` (in any order, extras ignored; a
/// mesh CA's cross-signed certificate counts as that CA).
fn issuer_path(
    leaf: &[u8],
    intermediates: &[CertificateDer<'_>],
    anchors: &[&[u8]],
) -> Result<Vec<String>, String> {
    let mut path = Vec::new();
    let mut current = leaf.to_vec();
    for _ in 0..=MAX_INTERMEDIATES {
        let by_mesh_ca = anchors
            .iter()
            .copied()
            .chain(
                intermediates
                    .iter()
                    .map(|cert| cert.as_ref())
                    .filter(|cert| super::certs::is_mesh_ca(cert)),
            )
            .any(|ca| is_issued_by(&current, ca).unwrap_or(false));
        if by_mesh_ca {
            path.reverse();
            return Ok(path);
        }
        let Some(issuer) = intermediates.iter().find(|candidate| {
            candidate.as_ref() != current.as_slice()
                && is_issued_by(&current, candidate.as_ref()).unwrap_or(false)
        }) else {
            return Err("the chain does not lead to the mesh CA".into());
        };
        let Some(name) = relay_of_issuer(issuer.as_ref()) else {
            return Err(format!(
                "{} is not a relay's issuer",
                subject_of(issuer.as_ref())
            ));
        };
        // A relay's new issuer, cross-signed by its old one, is the same
        // relay once.
        if path.last() != Some(&name) {
            path.push(name);
        }
        current = issuer.as_ref().to_vec();
    }
    Err("the chain is longer than verification accepts".into())
}

/// The relay an issuer certificate belongs to: its only common name is
/// [`ISSUER_CN_PREFIX`] and the relay's name.
pub(super) fn relay_of_issuer(der: &[u8]) -> Option<String> {
    let cert = super::parse_cert(der).ok()?;
    let mut names = cert.subject().iter_common_name();
    let (Some(name), None) = (names.next(), names.next()) else {
        return None;
    };
    let relay = name.as_str().ok()?.strip_prefix(ISSUER_CN_PREFIX)?;
    relaymesh_protocol::name::validate(relay).ok()?;
    Some(relay.to_string())
}

fn subject_of(der: &[u8]) -> String {
    super::parse_cert(der)
        .map(|cert| cert.subject().to_string())
        .unwrap_or_else(|_| "an unreadable certificate".into())
}

/// The server did not present the CA a join token pins.
#[derive(Debug, thiserror::Error)]
#[error("the server's chain does not hold the mesh CA the join token pins")]
struct PinnedCaMissing;

impl ServerCertVerifier for PinnedCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(ca) = intermediates
            .iter()
            .find(|cert| sha256(cert.as_ref()) == self.ca_sha256)
        else {
            return Err(TlsError::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(PinnedCaMissing)),
            )));
        };
        let roots = mesh_roots(&[ca.as_ref()])
            .map_err(|_| TlsError::InvalidCertificate(CertificateError::BadEncoding))?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            self.provider.clone(),
        )
        .build()
        .map_err(|e| TlsError::General(format!("cannot build the pinned verifier: {e}")))?;
        let verified = verifier.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        // A relay serves a certificate its own issuer signed; the root one
        // the mesh CA signed. Either way the token names that key.
        let name = match server_name {
            ServerName::DnsName(name) => name.as_ref().to_string(),
            other => format!("{other:?}"),
        };
        if !signed_with_key(
            end_entity.as_ref(),
            intermediates,
            &[ca.as_ref()],
            &self.parent_issuer_key,
            Some(&name),
        ) {
            let path = issuer_path(end_entity.as_ref(), intermediates, &[ca.as_ref()]);
            return Err(posing(&name, &self.parent_issuer_key, path));
        }
        Ok(verified)
    }

    crate::verify_handshake_signatures!();
}
