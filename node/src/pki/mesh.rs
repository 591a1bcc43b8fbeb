//! A new mesh at `relay init`: its CA, the root's identity and token key,
//! the API CA with the admin's credentials, and the API's certificate.

use relaymesh_protocol::Role;

use super::certs::{
    api_params, ca_params, generate, new_key, node_params, ADMIN_GROUP, ADMIN_USER,
    DEFAULT_NODE_CERT_VALIDITY,
};
use super::users::{
    authority_pem, create_api_authority, new_user_key, sign_api_cert, sign_user_cert,
    MAX_USER_CERT_VALIDITY,
};
use super::{der_to_pem, AdminCredentials, MeshBootstrap, PkiError, ServerCert};
use crate::identity::{Identity, Issuer};

/// Makes a new mesh: its CA, the root relay's identity, the admin's client
/// credentials and the certificate of the root's HTTPS API.
///
/// The root's [`Issuer`] is the mesh CA itself (`chain_der` empty), its token
/// signing key a fresh Ed25519 key. The API certificate covers each of
/// `api_hosts` (an IP address or a DNS name) plus `localhost` and `127.0.0.1`.
pub fn create_mesh(root_name: &str, api_hosts: &[String]) -> Result<MeshBootstrap, PkiError> {
    relaymesh_protocol::name::validate(root_name)?;
    let ca_key = new_key()?;
    let ca_params = ca_params()?;
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(generate("self-sign the mesh CA"))?;
    let ca_cert_der = ca_cert.der().to_vec();
    let ca_issuer = Issuer {
        cert_der: ca_cert_der.clone(),
        chain_der: Vec::new(),
        key_der: ca_key.serialize_der(),
    };
    let signer = rcgen::Issuer::from_params(&ca_params, &ca_key);

    let root_key = new_key()?;
    let root_cert = node_params(root_name, Role::Relay, DEFAULT_NODE_CERT_VALIDITY)?
        .signed_by(&root_key, &signer)
        .map_err(generate("sign the root's TLS certificate"))?;

    // The API has its own CA, which relays never hold: see `users`.
    let api_authority = create_api_authority()?;
    let admin_key = new_user_key(ADMIN_USER)?;
    let admin_cert = sign_user_cert(
        &api_authority,
        &admin_key.csr_der,
        ADMIN_USER,
        &[ADMIN_GROUP],
        MAX_USER_CERT_VALIDITY,
    )?;

    let api_key = new_key()?;
    let api_cert = sign_api_cert(&api_authority, api_params(api_hosts)?, &api_key)?;

    let token_key = ring::signature::Ed25519KeyPair::generate_pkcs8(
        &ring::rand::SystemRandom::new(),
    )
    .map_err(|_| PkiError::BadKey {
        reason: "cannot generate the Ed25519 token signing key".into(),
    })?;
    let token_public = {
        use ring::signature::KeyPair as _;
        ring::signature::Ed25519KeyPair::from_pkcs8(token_key.as_ref())
            .map_err(|e| PkiError::BadKey {
                reason: format!("fresh Ed25519 key does not parse: {e}"),
            })?
            .public_key()
            .as_ref()
            .to_vec()
    };

    Ok(MeshBootstrap {
        identity: Identity {
            name: root_name.to_string(),
            role: Role::Relay,
            ca_cert_der: ca_cert_der.clone(),
            extra_anchors_der: Vec::new(),
            tls_chain_der: vec![root_cert.der().to_vec()],
            tls_key_der: root_key.serialize_der(),
            issuer: Some(ca_issuer),
            previous_issuer: None,
            token_key: token_public,
            token_signing_key: Some(token_key.as_ref().to_vec()),
        },
        admin: AdminCredentials {
            ca_pem: authority_pem(&api_authority),
            cert_pem: der_to_pem(&admin_cert, "CERTIFICATE"),
            key_pem: der_to_pem(&admin_key.key_der, "PRIVATE KEY"),
        },
        api_cert: ServerCert {
            chain_der: vec![api_cert],
            key_der: api_key.serialize_der(),
        },
        api_authority,
    })
}
