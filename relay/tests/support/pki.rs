//! A throwaway mesh PKI for the API tests: a CA, a server certificate, and
//! client certificates for several identities, plus one from a foreign CA.

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

/// The PKI of one test mesh.
pub struct Pki {
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    pub server: Leaf,
    pub admin: Leaf,
    pub relay: Leaf,
    /// Says it is the admin, but is signed by another CA.
    pub foreign_admin: Leaf,
}

struct Ca {
    pem: String,
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Self {
        let mesh = ca("relaymesh CA");
        let foreign = ca("someone else's CA");
        Self {
            server: leaf(&mesh, "spiffe://relaymesh/relay/root", &["localhost"]),
            admin: leaf(&mesh, "spiffe://relaymesh/admin/admin", &[]),
            relay: leaf(&mesh, "spiffe://relaymesh/relay/eu", &[]),
            foreign_admin: leaf(&foreign, "spiffe://relaymesh/admin/admin", &[]),
            ca_pem: mesh.pem,
            ca_der: mesh.der,
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
        issuer: Issuer::new(params, key),
    }
}

fn leaf(ca: &Ca, spiffe: &str, dns_names: &[&str]) -> Leaf {
    let key = KeyPair::generate().expect("a key");
    let names: Vec<String> = dns_names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("parameters");
    params.distinguished_name.push(DnType::CommonName, spiffe);
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params
        .subject_alt_names
        .push(SanType::URI(spiffe.try_into().expect("an IA5 URI")));
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
