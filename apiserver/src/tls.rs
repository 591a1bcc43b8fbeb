//! The API server's TLS: its rustls configuration and who a peer is.
//!
//! Authentication works as in kube-apiserver. The handshake asks for a client
//! certificate but accepts any (and none): the only thing checked there is
//! that the client holds the key of the certificate it sent. The application
//! then verifies the chain against the API CA ([`Authenticator`]), never the
//! mesh CA that relays' issuers chain to, and reads the user from the
//! certificate's subject (`CN` the name, each `O` a group), so that a missing
//! or foreign certificate is answered with a readable `401 Status` instead of
//! an opaque TLS alert.
//!
//! Everything uses the ring provider explicitly, never rustls's process
//! default.

use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{DistinguishedName, RootCertStore, ServerConfig};

use super::{ApiError, ApiTls};

/// Who is on the other end of a connection, as far as the API can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerIdentity {
    /// The client sent a certificate that chains to the API CA.
    Verified(User),
    /// The client sent no certificate.
    Anonymous,
    /// The client sent a certificate the API does not accept; the text says why.
    Rejected(String),
}

/// An authenticated user: the certificate's common name and organizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user's name.
    pub name: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verified(user) => f.write_str(&user.name),
            Self::Anonymous => f.write_str("anonymous"),
            Self::Rejected(_) => f.write_str("rejected"),
        }
    }
}

/// The ring crypto provider, the only one relaymesh uses.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls server configuration: the server's certificate (from
/// `tls.serving` when given, which can be replaced while the server runs),
/// ALPN `h2` and `http/1.1`, and a client certificate asked for but not
/// required.
pub(super) fn server_config(tls: &ApiTls) -> Result<ServerConfig, ApiError> {
    let provider = provider();
    let serving = match &tls.serving {
        Some(serving) => serving.clone(),
        None => ServingCert::new(&tls.chain_der, &tls.key_der)?,
    };
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ApiError::TlsConfig)?
        .with_client_cert_verifier(Arc::new(AcceptAnyClientCert { provider }))
        .with_cert_resolver(Arc::new(serving));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The API's serving certificate, which can be replaced while the server
/// runs: every handshake from then on presents the new one; connections
/// already open keep theirs.
#[derive(Clone)]
pub struct ServingCert(Arc<std::sync::RwLock<Arc<CertifiedKey>>>);

impl ServingCert {
    /// Serves `chain_der` (leaf first) with the leaf's key `key_der`
    /// (PKCS#8), after checking that they belong together.
    pub fn new(chain_der: &[Vec<u8>], key_der: &[u8]) -> Result<Self, ApiError> {
        Ok(Self(Arc::new(std::sync::RwLock::new(Arc::new(
            certified_key(chain_der, key_der)?,
        )))))
    }

    /// Serves `chain_der` and `key_der` from the next handshake on; on an
    /// error, the current certificate stays.
    pub fn replace(&self, chain_der: &[Vec<u8>], key_der: &[u8]) -> Result<(), ApiError> {
        let certified = Arc::new(certified_key(chain_der, key_der)?);
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = certified;
        Ok(())
    }

    /// The leaf certificate served now (DER).
    pub fn leaf(&self) -> Vec<u8> {
        self.current()
            .cert
            .first()
            .map(|cert| cert.to_vec())
            .unwrap_or_default()
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

impl rustls::server::ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A chain and its leaf's key as rustls serves them.
fn certified_key(chain_der: &[Vec<u8>], key_der: &[u8]) -> Result<CertifiedKey, ApiError> {
    let chain: Vec<CertificateDer<'static>> = chain_der
        .iter()
        .map(|der| CertificateDer::from(der.clone()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der.to_vec()));
    CertifiedKey::from_der(chain, key, &provider()).map_err(ApiError::TlsConfig)
}

/// Verifies client certificates against the API CAs, after the handshake.
/// Its owner can replace the CAs while the server runs (a rotation of the
/// API CA trusts the old and the new one for a while).
#[derive(Clone)]
pub struct Authenticator {
    verifier: Arc<std::sync::RwLock<Arc<dyn ClientCertVerifier>>>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator trusting the CAs `cas_der` (the API CA, or two
    /// during a rotation).
    pub fn new(cas_der: &[Vec<u8>]) -> Result<Self, ApiError> {
        Ok(Self {
            verifier: Arc::new(std::sync::RwLock::new(client_verifier(cas_der)?)),
        })
    }

    /// Trusts `cas_der` from the next request on; on an error, the current
    /// CAs stay.
    pub fn replace(&self, cas_der: &[Vec<u8>]) -> Result<(), ApiError> {
        let verifier = client_verifier(cas_der)?;
        *self
            .verifier
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = verifier;
        Ok(())
    }

    /// Who sent `chain` (leaf first), as presented in the handshake.
    pub(crate) fn authenticate(&self, chain: Option<&[CertificateDer<'static>]>) -> PeerIdentity {
        let Some((leaf, intermediates)) = chain.and_then(<[_]>::split_first) else {
            return PeerIdentity::Anonymous;
        };
        let verifier = self
            .verifier
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Err(error) = verifier.verify_client_cert(leaf, intermediates, UnixTime::now()) {
            return PeerIdentity::Rejected(format!(
                "the client certificate is not valid for the API CA: {error}"
            ));
        }
        match user_of(leaf) {
            Ok(user) => PeerIdentity::Verified(user),
            Err(error) => PeerIdentity::Rejected(error),
        }
    }
}

/// A verifier of client certificates that trusts `cas_der` only.
fn client_verifier(cas_der: &[Vec<u8>]) -> Result<Arc<dyn ClientCertVerifier>, ApiError> {
    let mut roots = RootCertStore::empty();
    for ca in cas_der {
        roots
            .add(CertificateDer::from(ca.clone()))
            .map_err(ApiError::TlsConfig)?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|error| {
            ApiError::TlsConfig(rustls::Error::General(format!(
                "the API CA cannot verify clients: {error}"
            )))
        })
}

/// Accepts any client certificate chain in the handshake, checking only that
/// the client holds its key; [`Authenticator`] decides what the chain is worth.
#[derive(Debug)]
struct AcceptAnyClientCert {
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AcceptAnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: a client with one certificate sends it whatever its issuer,
        // and a foreign one is answered with a 401 rather than silently dropped.
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The user a client certificate names, as kube-apiserver reads it: the
/// subject's common name is the user, each organization a group. `Err`
/// says why the certificate names no user.
pub fn user_of(cert_der: &[u8]) -> Result<User, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|error| format!("not an X.509 certificate: {error}"))?;
    let subject = cert.subject();
    let mut names = subject.iter_common_name();
    let name = match (names.next(), names.next()) {
        (Some(name), None) => name
            .as_str()
            .map_err(|error| format!("unreadable common name: {error}"))?
            .to_string(),
        _ => return Err("a user certificate needs exactly one common name".into()),
    };
    if name.is_empty() {
        return Err("a user certificate's common name is empty".into());
    }
    let groups = subject
        .iter_organization()
        .map(|group| {
            group
                .as_str()
                .map(str::to_string)
                .map_err(|error| format!("unreadable organization: {error}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(User { name, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_certificate_is_anonymous() {
        let ca = rcgen::CertificateParams::new(Vec::<String>::new())
            .and_then(|mut params| {
                params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
                params.self_signed(&rcgen::KeyPair::generate()?)
            })
            .expect("a throwaway CA");
        let authenticator = Authenticator::new(&[ca.der().to_vec()]).expect("the CA is usable");
        assert_eq!(authenticator.authenticate(None), PeerIdentity::Anonymous);
        assert_eq!(
            authenticator.authenticate(Some(&[])),
            PeerIdentity::Anonymous
        );
        // The CA's own certificate is no client certificate.
        let presented = [ca.der().clone()];
        assert!(matches!(
            authenticator.authenticate(Some(&presented)),
            PeerIdentity::Rejected(_)
        ));
    }
}
