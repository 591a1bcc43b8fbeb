//! quinn and rustls configurations for the mesh's links, and reading who is
//! at the other end of one.
//!
//! Every configuration is built with rustls's ring provider passed in
//! explicitly, never the process-wide default, and trusts the mesh CA only.

use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::ALPN;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, Error as TlsError};

use super::certs::ISSUER_CN_PREFIX;
use super::grant::mesh_roots;
use super::{is_issued_by, peer_of, sha256, Peer, PkiError, MAX_INTERMEDIATES};
use crate::identity::Identity;

/// How often an idle link sends a keep-alive.
const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// How long a link may hear nothing before it is considered dead.
const IDLE_TIMEOUT_MS: u32 = 10_000;

/// How long a link stays up with nothing heard from the peer.
pub const IDLE_TIMEOUT: Duration = Duration::from_millis(IDLE_TIMEOUT_MS as u64);

/// The QUIC endpoint configuration of a relay's listener: its stateless
/// reset key is derived from the node's private key, so it is the same
/// after a restart. A relay that was killed and comes back on its address
/// then answers its children's packets for the old connections with a
/// stateless reset they can verify, and they redial at once instead of
/// waiting out the idle timeout. The derivation is one-way (HKDF), so the
/// reset key tells nothing of the private key; a node that learns it could
/// only reset that relay's connections, as a holder of the key itself could.
pub fn quic_endpoint_config(identity: &Identity) -> quinn::EndpointConfig {
    let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"relaymesh stateless reset v1");
    let secret = salt.extract(&identity.tls_key_der);
    let reset_key = secret
        .expand(&[b"reset key"], ring::hmac::HMAC_SHA256)
        .map(ring::hmac::Key::from);
    let mut cid_key = [0u8; 8];
    let cid_key = secret
        .expand(&[b"connection id key"], CidKeyLen)
        .and_then(|okm| okm.fill(&mut cid_key))
        .map(|()| u64::from_le_bytes(cid_key));
    let (Ok(reset_key), Ok(cid_key)) = (reset_key, cid_key) else {
        // Unreachable (HKDF-SHA256 gives up to 8160 bytes); random keys
        // only lose the fast redial after a restart.
        return quinn::EndpointConfig::default();
    };
    let mut config = quinn::EndpointConfig::new(Arc::new(reset_key));
    // Connection IDs carry a keyed hash, so the restarted relay recognizes
    // its predecessor's IDs as its own and resets them, and drops packets
    // with IDs it never issued without answering.
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    // Only packets that pass that check get a reset, and a reset is smaller
    // than the packet that asked for it, so quinn's default pause of 20 ms
    // between resets (50 a second) protects little and would make a relay
    // with thousands of children take minutes to reset them all.
    config.min_reset_interval(Duration::ZERO);
    config
}

/// The length of the connection ID key, for HKDF.
struct CidKeyLen;

impl ring::hkdf::KeyType for CidKeyLen {
    fn len(&self) -> usize {
        8
    }
}

/// The QUIC server configuration of a relay's listener.
///
/// It speaks ALPN `relaymesh/1` and presents `identity.tls_chain_der`
/// followed by the mesh CA certificate, so a joining node finds the CA it
/// pinned. Client certificates are optional (a connection without one may
/// only join); a client certificate that is given must chain to the mesh CA,
/// the only trust anchor. One whose leaf alone has expired is let through
/// for renewal (see `pki/grace.rs`).
pub fn quic_server_config(identity: &Identity) -> Result<quinn::ServerConfig, PkiError> {
    quic_server_config_idle(identity, IDLE_TIMEOUT)
}

/// [`quic_server_config`] with links that end after `idle` without a word
/// (children keep their own limit; the lower one holds). A replicated
/// root's is shorter, so its children find a dead leader sooner.
pub fn quic_server_config_idle(
    identity: &Identity,
    idle: Duration,
) -> Result<quinn::ServerConfig, PkiError> {
    let provider = ring_provider();
    let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(mesh_roots(&identity.anchors())?),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()?;
    // An expired leaf passes the handshake so that its node can renew (and
    // be told why not); the listener lets it do nothing else.
    let client_verifier = Arc::new(super::grace::GraceClientVerifier {
        inner: client_verifier,
        provider: provider.clone(),
    });
    // Every mesh CA follows, so a joining node finds the one its token
    // pins, from before a rotation of the mesh CA or after.
    let mut chain = certificate_chain(&server_chain(identity)?);
    chain.extend(
        identity
            .anchors()
            .into_iter()
            .map(|anchor| CertificateDer::from(anchor.to_vec())),
    );
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain, private_key(&identity.tls_key_der))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(tls))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport_idle(idle));
    Ok(config)
}

/// How long the server certificate a relay signs itself lasts; it signs a
/// new one whenever it renews its own and at least daily (see the daemon's
/// renewal).
pub const SERVER_CERT_VALIDITY: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The chain a relay serves its children with, leaf first, mesh CA not
/// included: a certificate for its TLS key that its own issuer signs, then
/// that issuer's chain. Its children accept it because the issuer that
/// signed their own certificates signed it (see [`quic_client_config`]),
/// wherever in the tree the relay sits now: a relay that moves to another
/// parent keeps its issuer key, and its children keep their parent. The
/// root serves its own certificate, which the mesh CA signed.
pub(super) fn server_chain(identity: &Identity) -> Result<Vec<Vec<u8>>, PkiError> {
    let Some(issuer) = identity.issuer.as_ref().filter(|_| !identity.is_root()) else {
        return Ok(identity.tls_chain_der.clone());
    };
    let csr = super::renewal_request(identity)?;
    let leaf = super::sign_node_cert(
        issuer,
        &csr,
        &identity.name,
        identity.role,
        SERVER_CERT_VALIDITY,
    )?;
    let mut chain = vec![leaf];
    match &identity.previous_issuer {
        // Children whose certificates the old key signed accept the new
        // one through the certificate the old key made for it.
        Some(previous) => {
            chain.push(previous.cross_der.clone());
            chain.push(previous.issuer.cert_der.clone());
            chain.extend(previous.issuer.chain_der.iter().cloned());
        }
        None => {
            chain.push(issuer.cert_der.clone());
            chain.extend(issuer.chain_der.iter().cloned());
        }
    }
    Ok(chain)
}

/// The QUIC client configuration of a child's link to its parent: mutual TLS
/// with the node's own chain, the server verified against the mesh CA only.
///
/// Connect with the parent's node name as server name (it is a DNS SAN of
/// the parent's certificate); only relay certificates are valid for server
/// authentication.
///
/// The parent must also prove it holds the issuer key that signed this
/// node's certificate: its certificate must be signed by that issuer (the
/// mesh CA for the root's children) and the issuer must be the parent's
/// own. So no other relay can pose as the parent or as the root to its
/// children, not even the relay that admitted the parent; and a relay that
/// moved elsewhere in the tree with its issuer key is still its children's
/// parent.
pub fn quic_client_config(identity: &Identity) -> Result<quinn::ClientConfig, PkiError> {
    let provider = ring_provider();
    let anchors = identity.anchors();
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(mesh_roots(&anchors)?),
        provider.clone(),
    )
    .build()?;
    // The certificate that signed this node's own, found by signature (a
    // mesh CA for the root's children).
    let expected_issuer = match identity.tls_chain_der.get(1) {
        Some(issuer) => issuer.clone(),
        None => identity
            .tls_chain_der
            .first()
            .and_then(|leaf| {
                anchors
                    .iter()
                    .find(|anchor| is_issued_by(leaf, anchor).unwrap_or(false))
            })
            .unwrap_or(&identity.ca_cert_der.as_slice())
            .to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(MeshServerVerifier {
            inner,
            anchors: anchors.iter().map(|anchor| anchor.to_vec()).collect(),
            expected: Expected::Parent {
                relay: relay_of_issuer(&expected_issuer),
                key: public_key_sha256(&expected_issuer)?,
                issuer: expected_issuer,
            },
            provider,
        }))
        .with_client_auth_cert(
            certificate_chain(&identity.tls_chain_der),
            private_key(&identity.tls_key_der),
        )?;
    client_config(tls)
}

/// [`quic_client_config`] for a node with candidate parents: the server is
/// verified against the mesh CA, for the name dialed, and its certificate
/// must be signed by the issuer key the root recorded for that candidate
/// ([`relaymesh_protocol::CandidateParent::issuer_key`]), so the node can
/// dial any of them with the certificate it holds, wherever in the tree
/// they sit, and no other relay can pose as one (not even one above it,
/// with an issuer certificate it made in the candidate's name). A server
/// name that is no candidate is refused.
pub fn quic_client_config_among(
    identity: &Identity,
    candidates: &[relaymesh_protocol::CandidateParent],
) -> Result<quinn::ClientConfig, PkiError> {
    if candidates.is_empty() {
        return quic_client_config(identity);
    }
    let provider = ring_provider();
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(mesh_roots(&identity.anchors())?),
        provider.clone(),
    )
    .build()?;
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(MeshServerVerifier {
            inner,
            anchors: identity
                .anchors()
                .iter()
                .map(|anchor| anchor.to_vec())
                .collect(),
            expected: Expected::Candidates(
                candidates
                    .iter()
                    .map(|candidate| (candidate.name.clone(), candidate.issuer_key))
                    .collect(),
            ),
            provider,
        }))
        .with_client_auth_cert(
            certificate_chain(&identity.tls_chain_der),
            private_key(&identity.tls_key_der),
        )?;
    client_config(tls)
}

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

/// The QUIC client configuration for joining: no client certificate, and the
/// server accepted only if its chain contains a certificate whose SHA-256 is
/// `ca_sha256` and verifies against that certificate as the sole trust anchor
/// for the server name given at connect time (the parent's name).
///
/// The server's certificate must also be signed by the key whose
/// SubjectPublicKeyInfo hashes to `parent_issuer_key` (the token's
/// [`relaymesh_protocol::token::TokenClaims::parent_issuer_key`]: the
/// parent's own issuer, the mesh CA for the root), so no other relay can
/// pose as the parent, whatever names its certificates carry.
pub fn quic_join_client_config(
    ca_sha256: [u8; 32],
    parent_issuer_key: [u8; 32],
) -> Result<quinn::ClientConfig, PkiError> {
    let provider = ring_provider();
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedCaVerifier {
            ca_sha256,
            parent_issuer_key,
            provider,
        }))
        .with_no_client_auth();
    client_config(tls)
}

/// The identity of the peer of an authenticated connection, or `None` if the
/// peer sent no certificate (a joining node).
///
/// This is the leaf's spiffe identity; rustls has already checked that the
/// chain leads to the mesh CA. A relay should also check, with
/// [`super::is_issued_by`], that a child's certificate comes from its own
/// issuer.
pub fn connection_peer(conn: &quinn::Connection) -> Result<Option<Peer>, PkiError> {
    connection_leaf(conn)?
        .map(|leaf| peer_of(&leaf))
        .transpose()
}

/// Every certificate the peer of an authenticated connection presented,
/// leaf first (empty if it sent none).
pub fn connection_chain(conn: &quinn::Connection) -> Result<Vec<Vec<u8>>, PkiError> {
    let Some(identity) = conn.peer_identity() else {
        return Ok(Vec::new());
    };
    let chain = identity
        .downcast::<Vec<CertificateDer<'static>>>()
        .map_err(|_| PkiError::UnexpectedPeerIdentity)?;
    Ok(chain.iter().map(|cert| cert.to_vec()).collect())
}

/// The DER of the certificate the peer of an authenticated connection
/// presented (None if it sent none).
pub fn connection_leaf(conn: &quinn::Connection) -> Result<Option<Vec<u8>>, PkiError> {
    Ok(connection_chain(conn)?.into_iter().next())
}

/// Accepts a server whose chain holds the pinned CA and verifies against it.
#[derive(Debug)]
struct PinnedCaVerifier {
    ca_sha256: [u8; 32],
    parent_issuer_key: [u8; 32],
    provider: Arc<CryptoProvider>,
}

/// Verifies a server against the mesh CAs, then that the key the node
/// expects of it signed its certificate (see [`signed_with_key`]).
#[derive(Debug)]
struct MeshServerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The mesh CAs this node trusts.
    anchors: Vec<Vec<u8>>,
    expected: Expected,
    provider: Arc<CryptoProvider>,
}

/// Whose key must have signed the server's certificate.
#[derive(Debug)]
enum Expected {
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

fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(mut tls: rustls::ClientConfig) -> Result<quinn::ClientConfig, PkiError> {
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport());
    Ok(config)
}

fn transport() -> Arc<quinn::TransportConfig> {
    transport_idle(IDLE_TIMEOUT)
}

fn transport_idle(idle: Duration) -> Arc<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    // A keep-alive at least twice per idle period, so one lost does not
    // end a live link.
    transport.keep_alive_interval(Some(KEEP_ALIVE.min(idle / 2)));
    let millis = u32::try_from(idle.as_millis()).unwrap_or(IDLE_TIMEOUT_MS);
    transport.max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(
        millis,
    ))));
    Arc::new(transport)
}

fn certificate_chain(chain_der: &[Vec<u8>]) -> Vec<CertificateDer<'static>> {
    chain_der
        .iter()
        .map(|der| CertificateDer::from(der.clone()))
        .collect()
}

fn private_key(key_der: &[u8]) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der.to_vec()))
}
