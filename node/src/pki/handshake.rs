//! The handshake-signature half of a rustls certificate verifier, shared by
//! every custom verifier here (the joining node's pinned CA, the API's
//! accept-then-authenticate client verifier, relayctl's
//! `insecure-skip-tls-verify`): whatever they decide about certificates, the
//! TLS handshake signatures are always checked with the ring provider.

/// Expands to `verify_tls12_signature`, `verify_tls13_signature` and
/// `supported_verify_schemes` for a verifier struct with a
/// `provider: Arc<CryptoProvider>` field.
#[macro_export]
#[doc(hidden)]
macro_rules! verify_handshake_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
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
            cert: &rustls::pki_types::CertificateDer<'_>,
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
    };
}
