//! Making keys, requests and certificates: the mesh CA's parameters, a
//! joining node's own keys, and a parent signing its children.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
    SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use relaymesh_protocol::Role;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

use super::{bad_cert, parse_cert, NodeKeys, PkiError, SPIFFE_PREFIX};
use crate::identity::{Identity, Issuer};

/// The most intermediate CA certificates a chain may hold between a leaf and
/// the mesh CA: rustls-webpki 0.103 refuses longer paths
/// (`MAX_SUB_CA_COUNT = 6` in its `src/verify_cert.rs`).
pub const MAX_INTERMEDIATES: usize = 6;

/// The common name of relay `<name>`'s issuer is this prefix and the name.
pub(super) const ISSUER_CN_PREFIX: &str = "relaymesh issuer ";

/// The user `relay init` writes a kubeconfig for, and its group.
pub const ADMIN_USER: &str = "admin";
/// The group of [`ADMIN_USER`].
pub const ADMIN_GROUP: &str = "admins";

const CA_YEARS: u64 = 10;
/// The root's API server certificate lasts a year; the root replaces it
/// when two thirds of that have passed (`daemon::api_cert`).
const API_CERT_YEARS: u64 = 1;

/// How long a node's TLS certificate lasts unless its parent is told
/// otherwise (`relay run --node-cert-validity`); nodes renew it over the
/// link when two thirds of it have passed (see `renewal`).
pub const DEFAULT_NODE_CERT_VALIDITY: std::time::Duration =
    std::time::Duration::from_secs(24 * 60 * 60);
/// The shortest node certificate lifetime a relay hands out (short ones are
/// for tests of renewal).
pub const MIN_NODE_CERT_VALIDITY: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest node certificate lifetime a relay hands out.
pub const MAX_NODE_CERT_VALIDITY: std::time::Duration =
    std::time::Duration::from_secs(366 * 24 * 60 * 60);
const DAY_SECS: u64 = 24 * 60 * 60;
/// Certificates start being valid a little in the past, so that a node whose
/// clock lags its parent's can use a fresh certificate at once.
pub(super) const BACKDATE_SECS: u64 = 60 * 60;

/// Makes a joining node's keys and PKCS#10 requests: always a TLS key, and for
/// a relay also an issuer (CA) key. The requests carry the node's identity for
/// the record, but the parent takes name and role from the join token, not
/// from the requests.
pub fn new_node_keys(name: &str, role: Role) -> Result<NodeKeys, PkiError> {
    let issuer_key = if role == Role::Relay {
        Some(new_key()?)
    } else {
        None
    };
    node_keys(name, role, new_key()?, issuer_key)
}

/// [`new_node_keys`] for a relay that joins another parent with its subtree
/// (a move): requests for the keys it has, so that the certificates its
/// issuer signed stay valid under the new parent's signature of that key
/// (and its listener, whose stateless-reset key comes from the TLS key,
/// still resets its old connections after a restart).
pub fn relay_keys_kept(identity: &Identity) -> Result<NodeKeys, PkiError> {
    let parse = |der: &[u8], what: &str| {
        KeyPair::from_pkcs8_der_and_sign_algo(
            &PrivatePkcs8KeyDer::from(der),
            &PKCS_ECDSA_P256_SHA256,
        )
        .map_err(|e| PkiError::BadKey {
            reason: format!("{what} key: {e}"),
        })
    };
    let Some(issuer) = &identity.issuer else {
        return Err(PkiError::BadKey {
            reason: "a relay's identity without an issuer".into(),
        });
    };
    node_keys(
        &identity.name,
        Role::Relay,
        parse(&identity.tls_key_der, "TLS")?,
        Some(parse(&issuer.key_der, "issuer")?),
    )
}

fn node_keys(
    name: &str,
    role: Role,
    tls_key: KeyPair,
    issuer_key: Option<KeyPair>,
) -> Result<NodeKeys, PkiError> {
    relaymesh_protocol::name::validate(name)?;
    // A request's validity is the signer's to choose.
    let tls_csr = for_request(node_params(name, role, DEFAULT_NODE_CERT_VALIDITY)?)
        .serialize_request(&tls_key)
        .map_err(generate("make the TLS certificate request"))?;
    let (issuer_key_der, issuer_csr_der) = match issuer_key {
        Some(issuer_key) => {
            let csr = for_request(issuer_params(name, 0)?)
                .serialize_request(&issuer_key)
                .map_err(generate("make the issuer certificate request"))?;
            (Some(issuer_key.serialize_der()), Some(csr.der().to_vec()))
        }
        None => (None, None),
    };
    Ok(NodeKeys {
        tls_key_der: tls_key.serialize_der(),
        tls_csr_der: tls_csr.der().to_vec(),
        issuer_key_der,
        issuer_csr_der,
    })
}

/// Signs a leaf TLS certificate (not a CA) valid for `validity` (clamped to
/// [`MIN_NODE_CERT_VALIDITY`]..=[`MAX_NODE_CERT_VALIDITY`]) for `name` in `role`,
/// for the public key of `csr_der` after checking the request's
/// self-signature. Name and role come from the arguments; whatever the
/// request's subject or extensions say is ignored.
pub fn sign_node_cert(
    issuer: &Issuer,
    csr_der: &[u8],
    name: &str,
    role: Role,
    validity: std::time::Duration,
) -> Result<Vec<u8>, PkiError> {
    sign_node_cert_since(issuer, csr_der, name, role, validity, None)
}

/// [`sign_node_cert`], with `notBefore` at `since_unix` when given: a
/// renewal keeps the time the node first joined, which is what a
/// revocation is checked against (see `holders`).
pub(super) fn sign_node_cert_since(
    issuer: &Issuer,
    csr_der: &[u8],
    name: &str,
    role: Role,
    validity: std::time::Duration,
    since_unix: Option<u64>,
) -> Result<Vec<u8>, PkiError> {
    relaymesh_protocol::name::validate(name)?;
    let validity = validity.clamp(MIN_NODE_CERT_VALIDITY, MAX_NODE_CERT_VALIDITY);
    let public_key = csr_public_key(csr_der)?;
    let signer = signer(issuer)?;
    let mut params = node_params(name, role, validity)?;
    if let Some(since) = since_unix {
        let not_after = params.not_after;
        let unix = i64::try_from(since).map_err(|_| PkiError::Clock)?;
        params.not_before = x509_parser::time::ASN1Time::from_timestamp(unix)
            .map(|time| time.to_datetime())
            .map_err(|_| PkiError::Clock)?;
        params.not_after = not_after;
    }
    let cert = params
        .signed_by(&public_key, &signer)
        .map_err(generate("sign a node certificate"))?;
    Ok(cert.der().to_vec())
}

/// Signs a ten-year intermediate CA certificate (basicConstraints CA,
/// keyCertSign) for relay `name`, with which it admits its own children.
///
/// Depth limit: rustls-webpki 0.103 (used by rustls to check every link)
/// accepts at most [`MAX_INTERMEDIATES`] = 6 intermediate certificates
/// between a leaf and the trust anchor (`MAX_SUB_CA_COUNT` in its
/// `verify_cert.rs`). The root's issuer is the mesh CA (the anchor), a relay
/// it admits holds intermediate number 1, and so on; so relays down to depth
/// 6 below the root get an issuer, and their children (depth 7) are the
/// deepest nodes a chain can reach. Asking for a 7th-level issuer fails with
/// [`PkiError::ChainTooDeep`] instead of producing certificates no peer
/// would accept.
pub fn sign_issuer_cert(issuer: &Issuer, csr_der: &[u8], name: &str) -> Result<Vec<u8>, PkiError> {
    relaymesh_protocol::name::validate(name)?;
    let depth = intermediates_below(issuer)?;
    if depth > MAX_INTERMEDIATES {
        let subject = parse_cert(&issuer.cert_der)?.subject().to_string();
        return Err(PkiError::ChainTooDeep {
            issuer: subject,
            depth,
            max: MAX_INTERMEDIATES,
        });
    }
    let public_key = csr_public_key(csr_der)?;
    let signer = signer(issuer)?;
    // The new issuer may have at most this many issuers below it, so the
    // limit of chain verification is also written into each issuer.
    let below = u8::try_from(MAX_INTERMEDIATES - depth).unwrap_or(0);
    let cert = issuer_params(name, below)?
        .signed_by(&public_key, &signer)
        .map_err(generate("sign an issuer certificate"))?;
    Ok(cert.der().to_vec())
}

/// How many intermediates an issuer signed by `issuer` would be preceded by
/// plus itself: the intermediate count of chains through it.
fn intermediates_below(issuer: &Issuer) -> Result<usize, PkiError> {
    let cert = parse_cert(&issuer.cert_der)?;
    // The root's issuer is a mesh CA, also while it signs through the
    // cross-signed new CA of a rotation (which stands for the new CA).
    let self_signed =
        cert.subject().as_raw() == cert.issuer().as_raw() || is_mesh_ca(&issuer.cert_der);
    let issuer_count = if self_signed {
        0
    } else {
        1 + issuer.chain_der.len()
    };
    Ok(issuer_count + 1)
}

/// Parses a PKCS#10 request, checks its self-signature and key type, and
/// returns its public key.
pub(super) fn csr_public_key(csr_der: &[u8]) -> Result<rcgen::PublicKey, PkiError> {
    let request = CertificateSigningRequestParams::from_der(&csr_der.into()).map_err(|e| {
        PkiError::BadCsr {
            reason: e.to_string(),
        }
    })?;
    if request.public_key.algorithm() != &PKCS_ECDSA_P256_SHA256 {
        return Err(PkiError::BadCsr {
            reason: "the key must be ECDSA P-256 (signed with SHA-256)".into(),
        });
    }
    Ok(request.public_key)
}

/// An rcgen signer for `issuer`, after checking its key belongs to its
/// certificate.
pub(super) fn signer(issuer: &Issuer) -> Result<rcgen::Issuer<'static, KeyPair>, PkiError> {
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(issuer.key_der.as_slice()),
        &PKCS_ECDSA_P256_SHA256,
    )
    .map_err(|e| PkiError::BadKey {
        reason: format!("issuer key: {e}"),
    })?;
    let cert = parse_cert(&issuer.cert_der)?;
    if cert.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
        return Err(PkiError::BadKey {
            reason: "the issuer key does not belong to the issuer certificate".into(),
        });
    }
    rcgen::Issuer::from_ca_cert_der(&CertificateDer::from(issuer.cert_der.as_slice()), key)
        .map_err(|e| bad_cert(format!("issuer certificate: {e}")))
}

/// Drops what a PKCS#10 request cannot carry (the signer chooses those).
pub(super) fn for_request(mut params: CertificateParams) -> CertificateParams {
    params.serial_number = None;
    params.use_authority_key_identifier_extension = false;
    params
}

pub(super) fn new_key() -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate("generate a P-256 key"))
}

pub(super) fn generate(what: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Generate { what, source }
}

/// A leaf certificate for a node: spiffe URI and DNS SANs, `CN=<name>`,
/// `O=relaymesh:<role>`. Relays are TLS servers and clients; agents and
/// admins only clients.
pub(super) fn node_params(
    name: &str,
    role: Role,
    validity: std::time::Duration,
) -> Result<CertificateParams, PkiError> {
    let mut params = base_params_for(validity)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.distinguished_name.push(
        DnType::OrganizationName,
        format!("relaymesh:{}", role.as_str()),
    );
    params.subject_alt_names = vec![
        SanType::URI(ia5(format!("{SPIFFE_PREFIX}{}/{name}", role.as_str()))?),
        SanType::DnsName(ia5(name.to_string())?),
    ];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match role {
        Role::Relay => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        _ => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    Ok(params)
}

/// An intermediate CA with which relay `name` admits its children; at most
/// `below` further issuers may follow it in a chain (its basic constraints'
/// path length).
pub(super) fn issuer_params(name: &str, below: u8) -> Result<CertificateParams, PkiError> {
    let mut params = base_params(CA_YEARS)?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{ISSUER_CN_PREFIX}{name}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(below));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// The common name of every mesh CA starts with this.
pub(super) const MESH_CA_CN_PREFIX: &str = "relaymesh mesh CA ";

/// Whether `der` is a mesh CA certificate: a CA whose only common name
/// starts with [`MESH_CA_CN_PREFIX`]. Relays' issuers cannot be one: their
/// parent names them `relaymesh issuer <name>`.
pub(crate) fn is_mesh_ca(der: &[u8]) -> bool {
    let Ok(cert) = parse_cert(der) else {
        return false;
    };
    let is_ca = cert
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|constraints| constraints.value.ca);
    let mut names = cert.subject().iter_common_name();
    let named = match (names.next(), names.next()) {
        (Some(name), None) => name
            .as_str()
            .is_ok_and(|name| name.starts_with(MESH_CA_CN_PREFIX)),
        _ => false,
    };
    is_ca && named
}

/// The self-signed mesh CA. A random suffix keeps the subjects of different
/// meshes' CAs apart, and of a mesh's CAs before and after a rotation.
pub(super) fn ca_params() -> Result<CertificateParams, PkiError> {
    let mut params = issuer_params("", MAX_INTERMEDIATES as u8)?;
    let mesh_id: [u8; 4] = rand::random();
    let mesh_id: String = mesh_id.iter().map(|b| format!("{b:02x}")).collect();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "relaymesh");
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{MESH_CA_CN_PREFIX}{mesh_id}"));
    Ok(params)
}

/// The root's HTTPS API server certificate.
pub(super) fn api_params(api_hosts: &[String]) -> Result<CertificateParams, PkiError> {
    let mut params = base_params(API_CERT_YEARS)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "relaymesh API");
    let defaults = ["localhost".to_string(), "127.0.0.1".to_string()];
    for host in api_hosts.iter().chain(defaults.iter()) {
        let san = match host.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) if valid_dns_name(host) => SanType::DnsName(ia5(host.clone())?),
            Err(_) => return Err(PkiError::InvalidHost { host: host.clone() }),
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    Ok(params)
}

/// Dot-separated labels of letters, digits and `-`, as a certificate's DNS
/// name.
fn valid_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Parameters shared by every certificate: a random serial, and a validity
/// from an hour ago to `years` from now.
fn base_params(years: u64) -> Result<CertificateParams, PkiError> {
    base_params_for(std::time::Duration::from_secs(years * 365 * DAY_SECS))
}

/// Parameters shared by every certificate: a random serial, and a validity
/// from an hour ago to `valid_for` from now.
pub(super) fn base_params_for(
    valid_for: std::time::Duration,
) -> Result<CertificateParams, PkiError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| PkiError::Clock)?
        .as_secs();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    set_validity(
        &mut params,
        now.saturating_sub(BACKDATE_SECS),
        now.saturating_add(valid_for.as_secs()),
    )?;
    let mut serial: [u8; 16] = rand::random();
    serial[0] &= 0x7f; // a positive INTEGER
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

/// Sets the validity from Unix seconds. The dates go through x509-parser's
/// `ASN1Time`, which converts to the date type rcgen takes, so this crate
/// needs no direct `time` dependency.
fn set_validity(params: &mut CertificateParams, from: u64, to: u64) -> Result<(), PkiError> {
    let date = |unix: u64| {
        let unix = i64::try_from(unix).map_err(|_| PkiError::Clock)?;
        x509_parser::time::ASN1Time::from_timestamp(unix)
            .map(|time| time.to_datetime())
            .map_err(|_| PkiError::Clock)
    };
    params.not_before = date(from)?;
    params.not_after = date(to)?;
    Ok(())
}

fn ia5(text: String) -> Result<rcgen::string::Ia5String, PkiError> {
    rcgen::string::Ia5String::try_from(text.clone())
        .map_err(|_| PkiError::InvalidHost { host: text })
}
