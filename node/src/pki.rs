//! The mesh's public-key infrastructure: who a node is, and how links prove it.
//!
//! `relay init` makes a self-signed mesh CA ([`create_mesh`]). Every other node
//! makes its own keys and certificate requests ([`new_node_keys`]); its parent
//! signs them ([`sign_node_cert`], [`sign_issuer_cert`]) and the node checks what
//! it got back ([`identity_from_grant`]). A relay's children are signed by the
//! relay's own issuer, so a certificate chain follows the tree:
//! leaf ← relay issuer ← parent relay issuer ← … ← mesh CA. A relay serves
//! its children a certificate its own issuer signs, so a relay that moves
//! with its issuer key (its new parent signs that key again) keeps them.
//!
//! A node's identity is encoded in its certificate as a URI SAN
//! `spiffe://relaymesh/<role>/<name>` plus a DNS SAN `<name>`; [`peer_of`]
//! reads it back. Keys are ECDSA P-256.
//!
//! The QUIC side ([`quic_server_config`], [`quic_client_config`],
//! [`quic_join_client_config`], [`connection_peer`]) builds quinn/rustls
//! configurations that trust the mesh CA only and never touch rustls's
//! process-wide default crypto provider.
//!
//! Deliberately not here: deciding whether a node may join (see
//! [`crate::admission`]) and join tokens (see [`crate::token`]).

use base64::Engine as _;
use relaymesh_protocol::Role;
use x509_parser::extensions::GeneralName;

mod certs;
mod grace;
mod grant;
pub(crate) mod handshake;
mod holders;
mod issuer_rotation;
#[cfg(test)]
mod keep_alive_tests;
mod mesh;
mod quic_tls;
mod renewal;
mod rotation;
mod server_session;
mod server_verifier;
#[cfg(test)]
mod tests;
mod users;

pub use certs::{
    new_node_keys, relay_keys_kept, sign_issuer_cert, sign_node_cert, ADMIN_GROUP, ADMIN_USER,
    DEFAULT_NODE_CERT_VALIDITY, MAX_INTERMEDIATES, MAX_NODE_CERT_VALIDITY, MIN_NODE_CERT_VALIDITY,
};
pub use grace::{
    leaf_not_after, past_grace_message, renew_only_message, standing, Denial, Standing,
    DEFAULT_EXPIRED_CERT_GRACE, MAX_EXPIRED_CERT_GRACE,
};
pub use grant::{identity_from_grant, is_issued_by, verify_chain};
pub use holders::{holder_of, Holder};
pub use issuer_rotation::{
    new_issuer_request, parent_rekeyed, rotated_identity, without_previous_issuer, NewIssuerKey,
};
pub use mesh::create_mesh;
pub use quic_tls::{
    connection_chain, connection_leaf, connection_peer, quic_client_config,
    quic_client_config_among, quic_endpoint_config, quic_join_client_config, quic_server_config,
    quic_server_config_idle, IDLE_TIMEOUT, SERVER_CERT_VALIDITY,
};
pub use renewal::{
    expiry, issuer_renewal_request, rehomed_identity, renew_at_root, renewal_request,
    renewed_identity, renewed_through, resigned_identity, sign_renewal,
};
pub use rotation::{
    chain_ca_key, current_trust, finish_mesh_ca_rotation, needs_mesh_signature, short_key,
    start_mesh_ca_rotation, with_mesh_trust, RotationStep,
};
pub use server_verifier::{chain_issuer_path, chain_signer_key, public_key_sha256};
pub use users::{
    authority_pem, create_api_authority, new_user_key, resign_api_cert, sign_user_cert,
    validity_unix, ApiAuthority, UserKey, UserName, MAX_USER_CERT_VALIDITY,
};

use crate::identity::Identity;

/// The scheme and trust domain of every identity URI in a certificate.
pub const SPIFFE_PREFIX: &str = "spiffe://relaymesh/";

/// Why a certificate, key or TLS configuration could not be made or accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    /// A node name is not a valid DNS-1123 label.
    #[error("invalid node name: {0}")]
    InvalidName(#[from] relaymesh_protocol::name::NameError),
    /// An API host is neither an IP address nor a valid DNS name.
    #[error("invalid API host {host:?}")]
    InvalidHost {
        /// The host as given.
        host: String,
    },
    /// rcgen could not make a key, request or certificate.
    #[error("cannot {what}")]
    Generate {
        /// What was being made.
        what: &'static str,
        /// rcgen's reason.
        #[source]
        source: rcgen::Error,
    },
    /// A certificate signing request could not be parsed, its signature does
    /// not verify, or it asks for something not supported (such as a key
    /// other than ECDSA P-256).
    #[error("bad certificate signing request: {reason}")]
    BadCsr {
        /// What is wrong with it.
        reason: String,
    },
    /// A certificate could not be parsed or lacks what relaymesh needs in it.
    #[error("bad certificate: {reason}")]
    BadCertificate {
        /// What is wrong with it.
        reason: String,
    },
    /// A private key could not be parsed or does not belong to its
    /// certificate.
    #[error("bad private key: {reason}")]
    BadKey {
        /// What is wrong with it.
        reason: String,
    },
    /// Certificates received in a join grant do not match the node's keys,
    /// name or role, or do not chain to the mesh CA.
    #[error("join grant does not match this node: {reason}")]
    GrantMismatch {
        /// What does not match.
        reason: String,
    },
    /// Signing one more issuer below this one would make chains longer than
    /// certificate verification accepts.
    #[error(
        "an issuer below {issuer:?} would be intermediate number {depth}, more than the {max} that chain verification accepts"
    )]
    ChainTooDeep {
        /// The subject of the issuer that was asked to sign.
        issuer: String,
        /// The intermediate count the new issuer would have.
        depth: usize,
        /// [`MAX_INTERMEDIATES`].
        max: usize,
    },
    /// A certificate chain does not verify against the mesh CA (unknown
    /// issuer, expired, wrong usage or name, bad signature, too long).
    #[error("certificate chain does not verify against the mesh CA: {0}")]
    Untrusted(#[source] rustls::Error),
    /// rustls refused a certificate, key or configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// rustls could not build a certificate verifier.
    #[error("certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// The rustls configuration lacks what QUIC needs (a TLS 1.3 suite).
    #[error("QUIC crypto configuration: {0}")]
    Quic(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
    /// The system clock is before 1970 or too far in the future for a
    /// certificate's validity.
    #[error("the system clock is out of range")]
    Clock,
    /// A rotation of the mesh CA cannot start or finish now, or the root's
    /// trust is unusable.
    #[error("mesh CA rotation: {reason}")]
    Rotation {
        /// Why.
        reason: String,
    },
    /// A quinn connection's peer identity was not a certificate chain.
    #[error("the connection's peer identity is not a rustls certificate chain")]
    UnexpectedPeerIdentity,
}

/// Who is at the other end: the role and name a certificate's spiffe URI SAN
/// carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The peer's role.
    pub role: Role,
    /// The peer's node name.
    pub name: String,
}

/// What an operator needs to reach the root's API: a kubeconfig's material.
#[derive(Clone)]
pub struct AdminCredentials {
    /// The API CA certificate (PEM).
    pub ca_pem: String,
    /// The admin client certificate (PEM).
    pub cert_pem: String,
    /// The admin client certificate's private key (PKCS#8 PEM).
    pub key_pem: String,
}

/// A TLS server certificate and its key, as the root's HTTPS API uses it.
#[derive(Clone)]
pub struct ServerCert {
    /// The certificate chain (DER), leaf first.
    pub chain_der: Vec<Vec<u8>>,
    /// The leaf's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

/// Everything `relay init` makes.
#[derive(Clone, Debug)]
pub struct MeshBootstrap {
    /// The root relay's identity, holding the mesh CA key and the token
    /// signing key.
    pub identity: Identity,
    /// The admin's client credentials.
    pub admin: AdminCredentials,
    /// The certificate of the root's HTTPS API.
    pub api_cert: ServerCert,
    /// The CA of the root's API, which signed `api_cert` and the admin's
    /// certificate; only the root keeps it.
    pub api_authority: ApiAuthority,
}

/// The keys and certificate requests a joining node makes for itself. The
/// private keys never leave the node.
#[derive(Clone)]
pub struct NodeKeys {
    /// The TLS private key (PKCS#8 DER).
    pub tls_key_der: Vec<u8>,
    /// The PKCS#10 request (DER) for the TLS certificate.
    pub tls_csr_der: Vec<u8>,
    /// For relays: the issuer's private key (PKCS#8 DER).
    pub issuer_key_der: Option<Vec<u8>>,
    /// For relays: the PKCS#10 request (DER) for the issuer certificate.
    pub issuer_csr_der: Option<Vec<u8>>,
}

// Keys are never printed, even at trace level.
impl std::fmt::Debug for AdminCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminCredentials").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ServerCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCert")
            .field("chain_len", &self.chain_der.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for NodeKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeKeys")
            .field("has_issuer", &self.issuer_key_der.is_some())
            .finish_non_exhaustive()
    }
}

/// The role and name in a certificate's `spiffe://relaymesh/<role>/<name>`
/// URI SAN. Exactly one such URI must be present, with a known role and a
/// valid name.
pub fn peer_of(cert_der: &[u8]) -> Result<Peer, PkiError> {
    let cert = parse_cert(cert_der)?;
    let names = cert
        .subject_alternative_name()
        .map_err(|e| bad_cert(format!("unreadable subject alternative names: {e}")))?
        .map(|extension| extension.value.general_names.clone())
        .unwrap_or_default();
    let mut uris = names.iter().filter_map(|name| match name {
        GeneralName::URI(uri) if uri.starts_with(SPIFFE_PREFIX) => Some(*uri),
        _ => None,
    });
    let (Some(uri), None) = (uris.next(), uris.next()) else {
        return Err(bad_cert(format!(
            "expected exactly one {SPIFFE_PREFIX}<role>/<name> URI SAN"
        )));
    };
    let rest = &uri[SPIFFE_PREFIX.len()..];
    let Some((role, name)) = rest.split_once('/') else {
        return Err(bad_cert(format!("identity URI {uri:?} has no name")));
    };
    let role =
        Role::parse(role).ok_or_else(|| bad_cert(format!("unknown role {role:?} in {uri:?}")))?;
    relaymesh_protocol::name::validate(name)?;
    Ok(Peer {
        role,
        name: name.to_string(),
    })
}

/// Lower-case hex of `bytes`, as fingerprints and key hashes are shown.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// SHA-256 of a DER certificate: the fingerprint join tokens pin.
pub fn sha256(der: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// PEM armour around DER bytes, with `label` such as `"CERTIFICATE"` or
/// `"PRIVATE KEY"`.
pub fn der_to_pem(der: &[u8], label: &str) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    // Base64 output is ASCII, so every 64-byte chunk is valid UTF-8.
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

/// Parses a whole DER certificate, refusing trailing bytes.
fn parse_cert(der: &[u8]) -> Result<x509_parser::certificate::X509Certificate<'_>, PkiError> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| bad_cert(format!("cannot parse: {e}")))?;
    if !rest.is_empty() {
        return Err(bad_cert(format!(
            "{} bytes after the certificate",
            rest.len()
        )));
    }
    Ok(cert)
}

fn bad_cert(reason: impl Into<String>) -> PkiError {
    PkiError::BadCertificate {
        reason: reason.into(),
    }
}
