//! The API CA: the root's own certificate authority for its HTTPS API. It
//! signs the API's server certificate and every user's client certificate.
//!
//! It is deliberately not the mesh CA. Every relay holds an issuer that
//! chains to the mesh CA (it signs its children's link certificates), so if
//! the API trusted the mesh CA, any relay could mint itself an admin
//! certificate or a server certificate for the API's address. The API CA's
//! key exists only in the root's store; relays never see it.
//!
//! A user certificate names its holder the way kube-apiserver reads client
//! certificates: `CN=<user>`, one `O=<group>` per group. It carries no mesh
//! identity URI, and links trust only the mesh CA, so it opens no link.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde::{Deserialize, Serialize};

use super::certs::{base_params_for, csr_public_key, generate, new_key};
use super::{bad_cert, der_to_pem, PkiError};

/// How long an API CA lasts.
const API_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// The longest a user certificate may be valid.
pub const MAX_USER_CERT_VALIDITY: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// The API CA's certificate and key, kept in the root's store only.
#[derive(Clone, Serialize, Deserialize)]
pub struct ApiAuthority {
    /// The CA certificate (DER): what clients pin as the API's CA and what
    /// user certificates chain to.
    pub cert_der: Vec<u8>,
    /// The CA's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

// Keys are never printed.
impl std::fmt::Debug for ApiAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAuthority").finish_non_exhaustive()
    }
}

/// A user's key and the PKCS#10 request for it, made where the user's
/// kubeconfig is written; the key never travels.
pub struct UserKey {
    /// The private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
    /// The request (DER). The signer takes name and group from its own
    /// arguments, not from the request.
    pub csr_der: Vec<u8>,
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserKey").finish_non_exhaustive()
    }
}

/// Who a user certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserName {
    /// The certificate's common name.
    pub name: String,
    /// Its organizations, in order.
    pub groups: Vec<String>,
}

/// Makes a new, self-signed API CA. A random suffix keeps the subjects of
/// different meshes' CAs apart.
pub fn create_api_authority() -> Result<ApiAuthority, PkiError> {
    let key = new_key()?;
    let mut params = base_params_for(API_CA_VALIDITY)?;
    let mesh_id: [u8; 4] = rand::random();
    let mesh_id: String = mesh_id.iter().map(|b| format!("{b:02x}")).collect();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "relaymesh");
    params
        .distinguished_name
        .push(DnType::CommonName, format!("relaymesh API CA {mesh_id}"));
    // It signs leaf certificates only.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params
        .self_signed(&key)
        .map_err(generate("self-sign the API CA"))?;
    Ok(ApiAuthority {
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    })
}

/// Makes a user's key and certificate request.
pub fn new_user_key(name: &str) -> Result<UserKey, PkiError> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    let csr = params
        .serialize_request(&key)
        .map_err(generate("make the user certificate request"))?;
    Ok(UserKey {
        key_der: key.serialize_der(),
        csr_der: csr.der().to_vec(),
    })
}

/// Signs a client certificate for user `name` in `groups`, valid for
/// `valid_for` (at most [`MAX_USER_CERT_VALIDITY`]), for the public key of
/// `csr_der` after checking the request's self-signature.
pub fn sign_user_cert(
    authority: &ApiAuthority,
    csr_der: &[u8],
    name: &str,
    groups: &[&str],
    valid_for: Duration,
) -> Result<Vec<u8>, PkiError> {
    if valid_for.is_zero() || valid_for > MAX_USER_CERT_VALIDITY {
        return Err(bad_cert(format!(
            "a user certificate must be valid for more than 0 s and at most {} days",
            MAX_USER_CERT_VALIDITY.as_secs() / 86_400
        )));
    }
    let public_key = csr_public_key(csr_der)?;
    let mut params = base_params_for(valid_for)?;
    params.distinguished_name.push(DnType::CommonName, name);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&public_key, &authority_signer(authority)?)
        .map_err(generate("sign a user certificate"))?;
    Ok(cert.der().to_vec())
}

/// Signs the API's server certificate for `hosts` with the API CA.
pub(super) fn sign_api_cert(
    authority: &ApiAuthority,
    params: CertificateParams,
    key: &KeyPair,
) -> Result<Vec<u8>, PkiError> {
    let cert = params
        .signed_by(key, &authority_signer(authority)?)
        .map_err(generate("sign the API certificate"))?;
    Ok(cert.der().to_vec())
}

/// A new serving certificate for the root's API, with a new key, for the
/// same hosts as `current` (the leaf served now), signed by the API CA and
/// valid for a year: what the root serves after a rotation
/// (`relayctl rotate api-cert`, or on its own when two thirds of the
/// current one's lifetime have passed).
pub fn resign_api_cert(
    authority: &ApiAuthority,
    current: &[u8],
) -> Result<super::ServerCert, PkiError> {
    let cert = super::parse_cert(current)?;
    let names = cert
        .subject_alternative_name()
        .map_err(|e| bad_cert(format!("unreadable subject alternative names: {e}")))?
        .map(|extension| extension.value.general_names.clone())
        .unwrap_or_default();
    let hosts: Vec<String> = names
        .iter()
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
            x509_parser::extensions::GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|octets| std::net::IpAddr::from(octets).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|octets| std::net::IpAddr::from(octets).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let key = new_key()?;
    let cert = sign_api_cert(authority, super::certs::api_params(&hosts)?, &key)?;
    Ok(super::ServerCert {
        chain_der: vec![cert],
        key_der: key.serialize_der(),
    })
}

/// Unix seconds at which certificate `der`'s validity starts and ends.
pub fn validity_unix(der: &[u8]) -> Result<(u64, u64), PkiError> {
    let cert = super::parse_cert(der)?;
    let validity = cert.validity();
    Ok((
        u64::try_from(validity.not_before.timestamp()).unwrap_or(0),
        u64::try_from(validity.not_after.timestamp()).unwrap_or(0),
    ))
}

/// The API CA as PEM, as a kubeconfig's `certificate-authority-data` holds it.
pub fn authority_pem(authority: &ApiAuthority) -> String {
    der_to_pem(&authority.cert_der, "CERTIFICATE")
}

fn authority_signer(authority: &ApiAuthority) -> Result<rcgen::Issuer<'static, KeyPair>, PkiError> {
    // The API CA signs like any issuer; it just has nothing above it.
    super::certs::signer(&crate::identity::Issuer {
        cert_der: authority.cert_der.clone(),
        chain_der: Vec::new(),
        key_der: authority.key_der.clone(),
    })
}
