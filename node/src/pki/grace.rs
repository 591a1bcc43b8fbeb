//! Expired node certificates: what one may still do, and the TLS check that
//! lets it reach the parent at all.
//!
//! A node offline for longer than its certificate lasts (a vehicle, a ship,
//! a site behind a relay) comes back with an expired certificate. For a
//! bounded grace period after `notAfter` ([`DEFAULT_EXPIRED_CERT_GRACE`],
//! `relay run --expired-cert-grace`) its parent lets a connection made with
//! it do one thing: renew over the link, as any renewal, unless the node is
//! revoked ([`standing`]). Nothing else is accepted on such a connection (no
//! slice, status or bundles), and past the grace period the renewal is
//! refused too, saying so: the node needs a new join token.
//!
//! The TLS side ([`GraceClientVerifier`]) accepts a client chain whose only
//! fault is an expired leaf: the chain must verify against the mesh CA at
//! the leaf's own `notAfter`, and every intermediate it presents must be
//! valid now. The listener then reads the leaf's `notAfter`
//! ([`leaf_not_after`]) and applies [`standing`] to every stream.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error as TlsError};

use super::{parse_cert, PkiError};

/// How long after its certificate expired a node may still renew it,
/// unless `relay run --expired-cert-grace` says otherwise.
pub const DEFAULT_EXPIRED_CERT_GRACE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The longest grace period a relay accepts.
pub const MAX_EXPIRED_CERT_GRACE: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// What a node's certificate lets its connection do at a given moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Valid now: everything its role allows.
    Valid,
    /// Expired `expired_for` ago, within the grace period: renewal only.
    RenewOnly {
        /// How long ago the certificate expired.
        expired_for: Duration,
    },
    /// Nothing, not even renewal.
    Denied(Denial),
}

/// Why a certificate may do nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// The root revoked the node (valid or expired alike).
    Revoked,
    /// The certificate expired `expired_for` ago, longer than `grace`.
    PastGrace {
        /// How long ago it expired.
        expired_for: Duration,
        /// The grace period of the relay that judged it.
        grace: Duration,
    },
}

/// What a certificate whose `notAfter` is `not_after_unix` may do at
/// `now_unix` under a grace period of `grace`, for a node the deny list
/// says is `revoked` or not. A certificate is valid up to and including its
/// `notAfter` second, as webpki reads it.
pub fn standing(now_unix: u64, not_after_unix: u64, grace: Duration, revoked: bool) -> Standing {
    if revoked {
        return Standing::Denied(Denial::Revoked);
    }
    if now_unix <= not_after_unix {
        return Standing::Valid;
    }
    let expired_for = Duration::from_secs(now_unix - not_after_unix);
    if expired_for <= grace {
        Standing::RenewOnly { expired_for }
    } else {
        Standing::Denied(Denial::PastGrace { expired_for, grace })
    }
}

/// What a parent tells a node whose expired certificate may not renew, and
/// logs: how long ago it expired, the grace period, and what to do.
pub fn past_grace_message(expired_for: Duration, grace: Duration) -> String {
    format!(
        "the certificate expired {} ago, longer than this relay's grace period for expired certificates ({}): it cannot be renewed; join again with a new token",
        humantime::format_duration(whole_seconds(expired_for)),
        humantime::format_duration(grace),
    )
}

/// What a parent tells a node that opened anything but a renewal with an
/// expired certificate.
pub fn renew_only_message(expired_for: Duration) -> String {
    format!(
        "the certificate expired {} ago: a connection made with an expired certificate may only renew it; renew, then reconnect",
        humantime::format_duration(whole_seconds(expired_for)),
    )
}

fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs())
}

/// The `notAfter` of a certificate (Unix seconds).
pub fn leaf_not_after(der: &[u8]) -> Result<u64, PkiError> {
    let cert = parse_cert(der)?;
    Ok(u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0))
}

/// A client verifier that accepts what `inner` accepts, and also a chain
/// whose leaf alone has expired: that chain must verify with `inner` at the
/// leaf's `notAfter`, and every intermediate presented must be valid now.
/// What such a connection may do is the listener's decision ([`standing`]).
#[derive(Debug)]
pub(super) struct GraceClientVerifier {
    pub(super) inner: Arc<dyn ClientCertVerifier>,
    pub(super) provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for GraceClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, TlsError> {
        let error = match self
            .inner
            .verify_client_cert(end_entity, intermediates, now)
        {
            Ok(verified) => return Ok(verified),
            Err(error) => error,
        };
        if !is_expiry(&error) {
            return Err(error);
        }
        let Ok(not_after) = leaf_not_after(end_entity.as_ref()) else {
            return Err(error);
        };
        // Only the leaf may be past its time: an issuer that expired is not
        // the node's to renew.
        let now_secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let intermediates_valid = intermediates.iter().all(|cert| {
            parse_cert(cert.as_ref()).is_ok_and(|cert| {
                let validity = cert.validity();
                validity.not_before.timestamp() <= now_secs
                    && now_secs <= validity.not_after.timestamp()
            })
        });
        if !intermediates_valid || now.as_secs() <= not_after {
            return Err(error);
        }
        let then = UnixTime::since_unix_epoch(Duration::from_secs(not_after));
        self.inner
            .verify_client_cert(end_entity, intermediates, then)
            .map_err(|_| error)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
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
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
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

/// Whether a verification failed because a certificate is past its
/// `notAfter`.
fn is_expiry(error: &TlsError) -> bool {
    matches!(
        error,
        TlsError::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. }
        )
    )
}

#[cfg(test)]
mod tests {
    use relaymesh_protocol::Role;

    use super::super::{create_mesh, identity_from_grant, new_node_keys, sign_node_cert};
    use super::*;
    use crate::identity::Identity;

    const DAY: u64 = 24 * 60 * 60;

    /// The listener's client verifier for a mesh CA.
    fn verifier(ca_der: &[u8]) -> GraceClientVerifier {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = super::super::grant::mesh_roots(&[ca_der]).expect("roots");
        let inner = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .expect("a verifier");
        GraceClientVerifier { inner, provider }
    }

    /// A node `name` with `role` signed by `parent`'s issuer, valid for a day.
    fn child(parent: &Identity, name: &str, role: Role) -> Identity {
        let issuer = parent.issuer.as_ref().expect("a relay");
        let keys = new_node_keys(name, role).expect("keys");
        let above: Vec<Vec<u8>> = if issuer.cert_der == parent.ca_cert_der {
            Vec::new()
        } else {
            std::iter::once(issuer.cert_der.clone())
                .chain(issuer.chain_der.iter().cloned())
                .collect()
        };
        let leaf = sign_node_cert(
            issuer,
            &keys.tls_csr_der,
            name,
            role,
            Duration::from_secs(DAY),
        )
        .expect("a leaf");
        let issuer_chain = keys.issuer_csr_der.as_ref().map(|csr| {
            let cert = super::super::sign_issuer_cert(issuer, csr, name).expect("an issuer");
            std::iter::once(cert).chain(above.iter().cloned()).collect()
        });
        let grant = relaymesh_protocol::message::JoinGrant {
            ca_cert_der: parent.ca_cert_der.clone(),
            tls_chain_der: std::iter::once(leaf).chain(above).collect(),
            issuer_chain_der: issuer_chain,
            token_key: parent.token_key.clone(),
            parent: parent.name.clone(),
        };
        identity_from_grant(name, role, keys, &grant).expect("an identity")
    }

    fn verify_at(
        verifier: &GraceClientVerifier,
        node: &Identity,
        unix: u64,
    ) -> Result<(), TlsError> {
        let chain: Vec<CertificateDer<'static>> = node
            .tls_chain_der
            .iter()
            .map(|der| CertificateDer::from(der.clone()))
            .collect();
        let (leaf, intermediates) = chain.split_first().expect("a leaf");
        verifier
            .verify_client_cert(
                leaf,
                intermediates,
                UnixTime::since_unix_epoch(Duration::from_secs(unix)),
            )
            .map(|_| ())
    }

    #[test]
    fn only_a_chain_whose_leaf_alone_expired_passes_the_handshake() {
        let root = create_mesh("root", &[]).expect("a mesh").identity;
        let eu = child(&root, "eu", Role::Relay);
        let edge = child(&eu, "edge-1", Role::Agent);
        let verifier = verifier(&root.ca_cert_der);
        let not_after = leaf_not_after(&edge.tls_chain_der[0]).expect("a leaf");

        // Valid, and expired a month later: both pass (what the expired one
        // may do is the listener's decision).
        verify_at(&verifier, &edge, not_after - 60).expect("valid");
        verify_at(&verifier, &edge, not_after + 30 * DAY).expect("expired leaf");
        verify_at(&verifier, &eu, not_after + 30 * DAY).expect("a relay's expired leaf");

        // Eleven years on, eu's issuer (ten years) expired too: refused.
        let later = not_after + 11 * 366 * DAY;
        assert!(verify_at(&verifier, &edge, later).is_err());

        // A node of another mesh, expired or not: refused.
        let other = create_mesh("root", &[]).expect("a mesh").identity;
        let stranger = child(&other, "edge-1", Role::Agent);
        for at in [not_after - 60, not_after + DAY] {
            assert!(verify_at(&verifier, &stranger, at).is_err(), "{at}");
        }
    }
    const GRACE: Duration = Duration::from_secs(30 * DAY);

    #[test]
    fn a_valid_certificate_may_do_everything_up_to_its_last_second() {
        assert_eq!(standing(1_000, 2_000, GRACE, false), Standing::Valid);
        assert_eq!(standing(2_000, 2_000, GRACE, false), Standing::Valid);
    }

    #[test]
    fn an_expired_certificate_may_only_renew_within_the_grace_period() {
        assert_eq!(
            standing(2_001, 2_000, GRACE, false),
            Standing::RenewOnly {
                expired_for: Duration::from_secs(1)
            }
        );
        let last = 2_000 + 30 * DAY;
        assert_eq!(
            standing(last, 2_000, GRACE, false),
            Standing::RenewOnly { expired_for: GRACE }
        );
        assert_eq!(
            standing(last + 1, 2_000, GRACE, false),
            Standing::Denied(Denial::PastGrace {
                expired_for: GRACE + Duration::from_secs(1),
                grace: GRACE,
            })
        );
    }

    #[test]
    fn a_revoked_node_may_do_nothing_expired_or_not() {
        for now in [1_000, 2_001, 2_000 + 31 * DAY] {
            assert_eq!(
                standing(now, 2_000, GRACE, true),
                Standing::Denied(Denial::Revoked),
                "{now}"
            );
        }
    }

    #[test]
    fn no_grace_means_an_expired_certificate_may_do_nothing() {
        assert_eq!(
            standing(2_001, 2_000, Duration::ZERO, false),
            Standing::Denied(Denial::PastGrace {
                expired_for: Duration::from_secs(1),
                grace: Duration::ZERO,
            })
        );
    }

    #[test]
    fn the_refusal_says_how_long_and_what_to_do() {
        let grace = Duration::from_secs(2 * DAY);
        let message = past_grace_message(Duration::from_secs(5 * DAY + 5), grace);
        assert!(message.contains("expired 5days 5s ago"), "{message}");
        assert!(
            message.contains("grace period for expired certificates (2days)"),
            "{message}"
        );
        assert!(message.contains("join again with a new token"), "{message}");
        let message = renew_only_message(Duration::from_secs(90));
        assert!(message.contains("may only renew it"), "{message}");
    }
}
