//! The HTTPS connection to the root made from a kubeconfig's
//! [`ClientCredentials`]: the server URL, and the rustls configuration with
//! the given CA and client certificate. relayctl trusts only the
//! kubeconfig's CA, never the system roots: the root's API serves with a
//! certificate of its own API CA.

use std::io::BufReader;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore};

use super::error::ClientError;
use crate::kubeconfig::ClientCredentials;

/// How long to wait for a TCP and TLS connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's URL from `credentials`, without a trailing `/` so that API
/// paths can follow it; it must be https.
pub(super) fn server_url(credentials: &ClientCredentials) -> Result<String, ClientError> {
    let server = credentials.server.trim_end_matches('/').to_string();
    if !server.starts_with("https://") {
        return Err(ClientError::Credentials(format!(
            "the server URL {server:?} is not https://"
        )));
    }
    Ok(server)
}

/// The HTTP client that speaks TLS as `credentials` say.
pub(super) fn http_client(credentials: &ClientCredentials) -> Result<reqwest::Client, ClientError> {
    let mut tls = tls_config(credentials)?;
    // reqwest keeps a preconfigured config's ALPN as it is.
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(ClientError::Build)
}

/// The rustls configuration for `credentials`: ring, the given CA (or no
/// verification at all if asked), and the client certificate if there is one.
fn tls_config(credentials: &ClientCredentials) -> Result<ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ClientError::Tls)?;
    let builder = if credentials.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipServerVerification { provider }))
    } else {
        let ca_pem = credentials.ca_pem.as_deref().ok_or_else(|| {
            ClientError::Credentials(format!(
                "no certificate-authority is given for {}, and relayctl uses no system roots",
                credentials.server
            ))
        })?;
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca_pem, "CA certificate")? {
            roots.add(cert).map_err(ClientError::Tls)?;
        }
        builder.with_root_certificates(roots)
    };
    match (&credentials.cert_pem, &credentials.key_pem) {
        (Some(cert_pem), Some(key_pem)) => {
            let chain = certificates(cert_pem, "client certificate")?;
            let key = rustls_pemfile::private_key(&mut BufReader::new(key_pem.as_bytes()))
                .map_err(|source| ClientError::Pem {
                    what: "client key",
                    source,
                })?
                .ok_or_else(|| {
                    ClientError::Credentials("the client key PEM holds no private key".into())
                })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(ClientError::Tls)
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(ClientError::Credentials(
            "a client certificate needs its key, and a key its certificate".into(),
        )),
    }
}

fn certificates(
    pem: &str,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = rustls_pemfile::certs(&mut BufReader::new(pem.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ClientError::Pem { what, source })?;
    if certs.is_empty() {
        return Err(ClientError::Credentials(format!(
            "the {what} PEM holds no certificate"
        )));
    }
    Ok(certs)
}

/// kubectl's `insecure-skip-tls-verify`: any server certificate is accepted,
/// but the handshake signatures are still checked.
#[derive(Debug)]
struct SkipServerVerification {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for SkipServerVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    relaymesh_node::verify_handshake_signatures!();
}
