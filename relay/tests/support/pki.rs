//! A throwaway PKI for the API tests: an API CA, a server certificate, and
//! user certificates in each group, plus certificates from other CAs (a
//! mesh CA, as relays hold, and a foreign one).

// Each test crate uses a different part of this module.
#![allow(dead_code)]

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate and its key, in PEM and DER.
pub struct Leaf {
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    pub key_pem: String,
    pub key_der: Vec<u8>,
}

/// The PKI of one test API.
pub struct Pki {
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    /// The API CA's key (PKCS#8 DER).
    pub ca_key_der: Vec<u8>,
    pub server: Leaf,
    /// In the group admins.
    pub admin: Leaf,
    /// In the group viewers.
    pub viewer: Leaf,
    /// Signed by the API CA, but in no group the API knows.
    pub stranger: Leaf,
    /// A relay's link certificate, from a mesh CA: not a user.
    pub relay: Leaf,
    /// Says it is the admin, but is signed by another CA.
    pub foreign_admin: Leaf,
}

struct Ca {
    pem: String,
    der: Vec<u8>,
    key_der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Self {
        let api = ca("relaymesh API CA");
        let mesh = ca("relaymesh mesh CA");
        let foreign = ca("someone else's CA");
        Self {
            server: leaf(&api, "spiffe://relaymesh/relay/root", &["localhost"], &[]),
            admin: leaf(&api, "admin", &[], &["admins"]),
            viewer: leaf(&api, "vera", &[], &["viewers"]),
            stranger: leaf(&api, "stranger", &[], &["system:masters"]),
            relay: leaf(&mesh, "spiffe://relaymesh/relay/eu", &[], &[]),
            foreign_admin: leaf(&foreign, "admin", &[], &["admins"]),
            ca_pem: api.pem,
            ca_der: api.der,
            ca_key_der: api.key_der,
        }
    }
}

fn ca(common_name: &str) -> Ca {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).expect("a CA certificate");
    Ca {
        pem: cert.pem(),
        der: cert.der().to_vec(),
        key_der: key.serialize_der(),
        issuer: Issuer::new(params, key),
    }
}

/// A certificate with common name `name` (also a URI SAN if it is a URI)
/// and one organization per group.
fn leaf(ca: &Ca, name: &str, dns_names: &[&str], groups: &[&str]) -> Leaf {
    let key = KeyPair::generate().expect("a key");
    let names: Vec<String> = dns_names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    if name.contains("://") {
        params
            .subject_alt_names
            .push(SanType::URI(name.try_into().expect("an IA5 URI")));
    }
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, &ca.issuer).expect("a certificate");
    Leaf {
        cert_pem: cert.pem(),
        cert_der: cert.der().to_vec(),
        key_pem: key.serialize_pem(),
        key_der: key.serialize_der(),
    }
}
