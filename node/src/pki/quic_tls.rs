//! quinn and rustls configurations for the mesh's links, and reading who is
//! at the other end of one. The verifiers that check a dialed relay are in
//! `server_verifier`.
//!
//! Every configuration is built with rustls's ring provider passed in
//! explicitly, never the process-wide default, and trusts the mesh CA only.

use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::ALPN;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::grant::mesh_roots;
use super::server_verifier::{
    public_key_sha256, relay_of_issuer, Expected, MeshServerVerifier, PinnedCaVerifier,
};
use super::{is_issued_by, peer_of, Peer, PkiError};
use crate::identity::Identity;

/// How long a link may hear nothing before it is considered dead: three
/// keep-alives, so two lost in a row do not end a live link.
const IDLE_TIMEOUT_MS: u32 = 15_000;

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
    let crypto = super::server_session::ServerConfig::new(Arc::new(tls))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(server_transport(idle));
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

fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(mut tls: rustls::ClientConfig) -> Result<quinn::ClientConfig, PkiError> {
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(client_transport());
    Ok(config)
}

/// A parent's side of its children's links. Only one side keeps an idle
/// link alive: each ping costs the other side a packet in and an
/// acknowledgement out. Normally the child does (a parent's own ping would
/// double what every idle child costs it), and a dead child is found by the
/// idle timeout, which any packet from the child resets. A parent whose
/// links end sooner than a child's keep-alive comes (a replicated root's)
/// pings instead, at a third of its timeout: a child's keep-alive timer
/// restarts with every packet it receives, so the child then sends none.
fn server_transport(idle: Duration) -> Arc<quinn::TransportConfig> {
    let mut transport = transport_idle(idle);
    transport.keep_alive_interval((idle < IDLE_TIMEOUT).then(|| keep_alive(idle)));
    // Children open bidirectional streams only: the control stream, a
    // renewal, joins, and at most MAX_BUNDLE_STREAMS transfers (more are
    // refused by the listener, so the refusal stays reachable). quinn
    // keeps an entry per stream it allows, on every connection.
    let streams = relaymesh_protocol::limits::MAX_BUNDLE_STREAMS + 8;
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(
        u32::try_from(streams).unwrap_or(u32::MAX),
    ));
    transport.max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    // Segmentation offload stays on: quinn keeps each connection's
    // transmit buffer at a GSO batch (about 11 KB more per idle link in
    // heaptrack, not visible in the RSS), but one datagram per system call
    // cost the star at 2,000 a third more relay CPU per child
    // (docs/performance.md, "Decisions").
    transport.enable_segmentation_offload(true);
    Arc::new(transport)
}

/// A child's side of the link to its parent: the parent opens no stream.
/// A keep-alive every 5 s (a third of the idle timeout) keeps a NAT's
/// mapping (Linux conntrack forgets an unanswered UDP flow after 30 s) and
/// bounds how long a child takes to find its relay restarted (the restarted
/// relay answers that keep-alive with a stateless reset).
fn client_transport() -> Arc<quinn::TransportConfig> {
    let mut transport = transport_idle(IDLE_TIMEOUT);
    transport.keep_alive_interval(Some(keep_alive(IDLE_TIMEOUT)));
    // The parent acknowledges each of the child's packets at once (the
    // child sends few: pings, acknowledgements of revisions, reports)
    // rather than after its 25 ms delay: one wake-up and timer less for
    // each ping of every idle child.
    let mut acks = quinn::AckFrequencyConfig::default();
    acks.ack_eliciting_threshold(quinn::VarInt::from_u32(0))
        .max_ack_delay(Some(Duration::from_millis(25)));
    transport.ack_frequency_config(Some(acks));
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(0));
    transport.max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    Arc::new(transport)
}

/// Links that end after `idle` without a word from the peer.
fn transport_idle(idle: Duration) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    let millis = u32::try_from(idle.as_millis()).unwrap_or(IDLE_TIMEOUT_MS);
    transport.max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(
        millis,
    ))));
    transport
}

/// A keep-alive three times per idle period, so two lost in a row do not
/// end a live link. Every ping costs both sides a packet in and one out
/// (about 20 µs of CPU on each side on the benchmarks' machine): at the old
/// 2 s, 5,000 idle children took 7 % of a core at their relay and 12 % in
/// the hollow agents' process (docs/performance.md, "Keep-alives and idle
/// wake-ups").
fn keep_alive(idle: Duration) -> Duration {
    idle / 3
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
