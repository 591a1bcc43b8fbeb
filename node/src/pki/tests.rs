//! Certificates along a tree, and real QUIC handshakes on localhost.

use std::net::SocketAddr;
use std::time::Duration;

use relaymesh_protocol::message::JoinGrant;
use relaymesh_protocol::Role;

use super::*;
use crate::identity::Identity;

/// What a parent would grant: the same chain assembly admission does.
fn grant_for(parent: &Identity, keys: &NodeKeys, name: &str, role: Role) -> JoinGrant {
    let issuer = parent.issuer.as_ref().expect("the parent is a relay");
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
        DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("sign leaf");
    let issuer_chain = keys.issuer_csr_der.as_ref().map(|csr| {
        let cert = sign_issuer_cert(issuer, csr, name).expect("sign issuer");
        std::iter::once(cert).chain(above.iter().cloned()).collect()
    });
    JoinGrant {
        ca_cert_der: parent.ca_cert_der.clone(),
        tls_chain_der: std::iter::once(leaf).chain(above).collect(),
        issuer_chain_der: issuer_chain,
        token_key: parent.token_key.clone(),
        parent: parent.name.clone(),
    }
}

/// A node joining below `parent`.
pub(super) fn join(parent: &Identity, name: &str, role: Role) -> Identity {
    let keys = new_node_keys(name, role).expect("keys");
    let grant = grant_for(parent, &keys, name, role);
    identity_from_grant(name, role, keys, &grant).expect("identity from grant")
}

pub(super) fn root() -> Identity {
    create_mesh("root", &[]).expect("mesh").identity
}

/// The key hash of `relay`'s issuer (the mesh CA's for the root), as the
/// root records it and tokens and grants name it.
fn issuer_key(relay: &Identity) -> [u8; 32] {
    let issuer = relay.issuer.as_ref().expect("a relay's issuer");
    public_key_sha256(&issuer.cert_der).expect("a key")
}

#[test]
fn create_mesh_makes_root_admin_and_api() {
    let hosts = vec!["10.1.2.3".to_string(), "api.example.com".to_string()];
    let mesh = create_mesh("root", &hosts).expect("mesh");
    let root = &mesh.identity;
    assert!(root.is_root());
    let issuer = root.issuer.as_ref().expect("root issuer");
    assert_eq!(issuer.cert_der, root.ca_cert_der);
    assert!(issuer.chain_der.is_empty());
    assert_eq!(
        verify_chain(&root.anchors(), &root.tls_chain_der).expect("root chain"),
        Peer {
            role: Role::Relay,
            name: "root".into()
        }
    );
    assert_eq!(root.token_key.len(), 32);

    // The admin and the API belong to the API CA, which is not the mesh CA:
    // nothing a relay's issuer signs can pass for them.
    let admin_der = pem_to_der(&mesh.admin.cert_pem);
    let api_ca = pem_to_der(&mesh.admin.ca_pem);
    assert_eq!(api_ca, mesh.api_authority.cert_der);
    assert_ne!(api_ca, root.ca_cert_der);
    assert!(is_issued_by(&admin_der, &api_ca).expect("parse"));
    assert!(is_issued_by(&mesh.api_cert.chain_der[0], &api_ca).expect("parse"));
    assert!(verify_chain(&root.anchors(), std::slice::from_ref(&admin_der)).is_err());
    let admin = relaymesh_apiserver::user_of(&admin_der).expect("a user");
    assert_eq!(admin.name, "admin");
    assert_eq!(admin.groups, vec!["admins".to_string()]);
    assert!(mesh
        .admin
        .key_pem
        .starts_with("-----BEGIN PRIVATE KEY-----\n"));

    let api = parse_cert(&mesh.api_cert.chain_der[0]).expect("parse api");
    let names = api
        .subject_alternative_name()
        .expect("san")
        .expect("has san")
        .value
        .general_names
        .iter()
        .map(|name| name.to_string())
        .collect::<Vec<_>>()
        .join(",");
    // x509-parser prints IP addresses in hex.
    for wanted in ["0a:01:02:03", "api.example.com", "localhost", "7f:00:00:01"] {
        assert!(names.contains(wanted), "{wanted} missing in {names}");
    }
    assert!(matches!(
        create_mesh("root", &["bad host!".into()]),
        Err(PkiError::InvalidHost { .. })
    ));
    assert!(matches!(
        create_mesh("Root", &[]),
        Err(PkiError::InvalidName(_))
    ));
}

#[test]
fn relay_joins_and_admits_an_agent() {
    let root = root();
    let relay = join(&root, "eu", Role::Relay);
    let relay_issuer = relay.issuer.as_ref().expect("relay issuer");
    assert!(relay_issuer.chain_der.is_empty());
    assert_eq!(relay.tls_chain_der.len(), 1);
    assert_eq!(
        peer_of(&relay.tls_chain_der[0]).expect("peer"),
        Peer {
            role: Role::Relay,
            name: "eu".into()
        }
    );

    let agent = join(&relay, "edge-1", Role::Agent);
    assert!(agent.issuer.is_none());
    assert_eq!(agent.tls_chain_der.len(), 2);
    assert_eq!(agent.tls_chain_der[1], relay_issuer.cert_der);
    let peer = verify_chain(&root.anchors(), &agent.tls_chain_der).expect("agent chain");
    assert_eq!(
        peer,
        Peer {
            role: Role::Agent,
            name: "edge-1".into()
        }
    );
    assert!(is_issued_by(&agent.tls_chain_der[0], &relay_issuer.cert_der).expect("check"));
    assert!(!is_issued_by(&agent.tls_chain_der[0], &root.ca_cert_der).expect("check"));
    // Another mesh's CA does not vouch for it.
    assert!(matches!(
        verify_chain(&super::tests::root().anchors(), &agent.tls_chain_der),
        Err(PkiError::Untrusted(_))
    ));
}

#[test]
fn signing_takes_name_and_role_from_the_arguments() {
    let root = root();
    let keys = new_node_keys("admin", Role::Admin).expect("keys");
    let issuer = root.issuer.as_ref().expect("issuer");
    let cert = sign_node_cert(
        issuer,
        &keys.tls_csr_der,
        "edge-2",
        Role::Agent,
        DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("sign");
    assert_eq!(
        peer_of(&cert).expect("peer"),
        Peer {
            role: Role::Agent,
            name: "edge-2".into()
        }
    );
    let is_ca = parse_cert(&cert)
        .expect("parse")
        .basic_constraints()
        .expect("bc")
        .is_some_and(|bc| bc.value.ca);
    assert!(!is_ca);
}

#[test]
fn bad_requests_are_refused() {
    let root = root();
    let issuer = root.issuer.as_ref().expect("issuer");
    let keys = new_node_keys("edge-3", Role::Agent).expect("keys");
    let mut tampered = keys.tls_csr_der.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    for csr in [&b"garbage"[..], &tampered[..], &[][..]] {
        assert!(matches!(
            sign_node_cert(
                issuer,
                csr,
                "edge-3",
                Role::Agent,
                DEFAULT_NODE_CERT_VALIDITY
            ),
            Err(PkiError::BadCsr { .. })
        ));
        assert!(matches!(
            sign_issuer_cert(issuer, csr, "edge-3"),
            Err(PkiError::BadCsr { .. })
        ));
    }
    assert!(matches!(
        sign_node_cert(
            issuer,
            &keys.tls_csr_der,
            "Not_A_Name",
            Role::Agent,
            DEFAULT_NODE_CERT_VALIDITY
        ),
        Err(PkiError::InvalidName(_))
    ));
}

#[test]
fn grants_for_other_keys_or_names_are_refused() {
    let root = root();
    let keys = new_node_keys("eu", Role::Relay).expect("keys");
    let other = new_node_keys("eu", Role::Relay).expect("other keys");
    let grant = grant_for(&root, &other, "eu", Role::Relay);
    assert!(matches!(
        identity_from_grant("eu", Role::Relay, keys.clone(), &grant),
        Err(PkiError::GrantMismatch { .. })
    ));
    let grant = grant_for(&root, &keys, "us", Role::Relay);
    assert!(matches!(
        identity_from_grant("eu", Role::Relay, keys.clone(), &grant),
        Err(PkiError::GrantMismatch { .. })
    ));
    let mut grant = grant_for(&root, &keys, "eu", Role::Relay);
    grant.issuer_chain_der = None;
    assert!(matches!(
        identity_from_grant("eu", Role::Relay, keys.clone(), &grant),
        Err(PkiError::GrantMismatch { .. })
    ));
    let mut grant = grant_for(&root, &keys, "eu", Role::Relay);
    grant.ca_cert_der = super::tests::root().ca_cert_der;
    assert!(identity_from_grant("eu", Role::Relay, keys, &grant).is_err());
}

#[test]
fn peer_of_refuses_certificates_without_identity() {
    let mesh = create_mesh("root", &[]).expect("mesh");
    assert!(matches!(
        peer_of(&mesh.api_cert.chain_der[0]),
        Err(PkiError::BadCertificate { .. })
    ));
    assert!(matches!(
        peer_of(&mesh.identity.ca_cert_der),
        Err(PkiError::BadCertificate { .. })
    ));
    assert!(matches!(
        peer_of(b"junk"),
        Err(PkiError::BadCertificate { .. })
    ));
}

/// Relays at depths 1 to 6 get issuers; the 7th-level issuer is refused, and
/// a chain with 7 intermediates (forged past that check) indeed fails to
/// verify, while one with 6 verifies.
#[test]
fn chains_stop_at_the_webpki_intermediate_limit() {
    let root = root();
    let mut relay = root.clone();
    for depth in 1..=MAX_INTERMEDIATES {
        relay = join(&relay, &format!("r{depth}"), Role::Relay);
    }
    let deepest = relay.issuer.as_ref().expect("issuer");
    assert_eq!(deepest.chain_der.len() + 1, MAX_INTERMEDIATES);
    // Each issuer says in its basic constraints how many may follow it.
    let path_len = |der: &[u8]| {
        parse_cert(der)
            .expect("parse")
            .basic_constraints()
            .expect("readable")
            .expect("present")
            .value
            .path_len_constraint
    };
    assert_eq!(path_len(&root.ca_cert_der), Some(MAX_INTERMEDIATES as u32));
    assert_eq!(path_len(&deepest.cert_der), Some(0));
    for (above, issuer) in deepest.chain_der.iter().enumerate() {
        // chain_der[0] is the issuer of depth 5, the last one of depth 1.
        assert_eq!(path_len(issuer), Some(above as u32 + 1));
    }
    let agent = join(&relay, "edge-deep", Role::Agent);
    assert_eq!(agent.tls_chain_der.len(), 1 + MAX_INTERMEDIATES);
    verify_chain(&root.anchors(), &agent.tls_chain_der).expect("6 intermediates verify");

    let keys = new_node_keys("r7", Role::Relay).expect("keys");
    let csr = keys.issuer_csr_der.as_ref().expect("issuer csr");
    assert!(matches!(
        sign_issuer_cert(deepest, csr, "r7"),
        Err(PkiError::ChainTooDeep { depth: 7, .. })
    ));

    // Forge the 7th issuer and a leaf below it, bypassing the check.
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let seventh = certs::issuer_params("r7", 0)
        .expect("params")
        .signed_by(&key, &certs::signer(deepest).expect("signer"))
        .expect("sign")
        .der()
        .to_vec();
    let leaf_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let seventh_issuer = crate::identity::Issuer {
        cert_der: seventh.clone(),
        chain_der: Vec::new(),
        key_der: key.serialize_der(),
    };
    let leaf = certs::node_params("edge-too-deep", Role::Agent, DEFAULT_NODE_CERT_VALIDITY)
        .expect("params")
        .signed_by(&leaf_key, &certs::signer(&seventh_issuer).expect("signer"))
        .expect("sign")
        .der()
        .to_vec();
    let mut chain = vec![leaf, seventh];
    chain.extend(agent.tls_chain_der[1..].iter().cloned());
    assert_eq!(chain.len(), 1 + MAX_INTERMEDIATES + 1);
    assert!(matches!(
        verify_chain(&root.anchors(), &chain),
        Err(PkiError::Untrusted(_))
    ));
}

#[test]
fn pem_and_fingerprint() {
    let root = root();
    let pem = der_to_pem(&root.ca_cert_der, "CERTIFICATE");
    assert!(pem.lines().all(|line| line.len() <= 64));
    assert_eq!(pem_to_der(&pem), root.ca_cert_der);
    assert_eq!(sha256(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    let mut reader = pem.as_bytes();
    let der = rustls_pemfile::certs(&mut reader)
        .next()
        .expect("one certificate")
        .expect("valid PEM")
        .to_vec();
    der
}

// --- QUIC handshakes ---

pub(super) struct Server {
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
}

pub(super) fn serve(identity: &Identity) -> Server {
    serve_with(quic_server_config(identity).expect("server config"))
}

/// A listener on loopback with `config`.
pub(super) fn serve_with(config: quinn::ServerConfig) -> Server {
    let endpoint =
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = endpoint.local_addr().expect("local addr");
    Server { endpoint, addr }
}

/// Connects with `config` to `server` as `server_name`; returns the client's
/// and the server's view of the handshake.
pub(super) async fn handshake(
    server: &Server,
    config: quinn::ClientConfig,
    server_name: &str,
) -> (
    Result<quinn::Connection, quinn::ConnectionError>,
    Result<quinn::Connection, quinn::ConnectionError>,
) {
    let client =
        quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("client endpoint");
    let connecting = client
        .connect_with(config, server.addr, server_name)
        .expect("connect");
    let accept = async {
        let incoming = server.endpoint.accept().await.expect("incoming");
        incoming.await
    };
    let both = async { tokio::join!(connecting, accept) };
    tokio::time::timeout(Duration::from_secs(10), both)
        .await
        .expect("handshake finishes")
}

/// The relay `eu`, joined below the root, connected to it: the child's
/// side, the root's side, and the root's listener (which must outlive them).
async fn eu_linked_to_root() -> (quinn::Connection, quinn::Connection, Server) {
    let root = root();
    let child = join(&root, "eu", Role::Relay);
    let server = serve(&root);
    let config = quic_client_config(&child).expect("client config");
    let (client_conn, server_conn) = handshake(&server, config, "root").await;
    let client_conn = client_conn.expect("client handshake");
    let server_conn = server_conn.expect("server handshake");
    (client_conn, server_conn, server)
}

fn relay_peer(name: &str) -> Option<Peer> {
    Some(Peer {
        role: Role::Relay,
        name: name.into(),
    })
}

/// The ALPN protocol the connection's handshake settled on.
fn alpn(conn: &quinn::Connection) -> Option<Vec<u8>> {
    conn.handshake_data().and_then(|data| {
        data.downcast::<quinn::crypto::rustls::HandshakeData>()
            .ok()
            .and_then(|data| data.protocol)
    })
}

#[tokio::test]
async fn mutual_tls_between_child_and_parent() {
    let (client_conn, server_conn, _server) = eu_linked_to_root().await;
    assert_eq!(
        connection_peer(&server_conn).expect("peer"),
        relay_peer("eu")
    );
    assert_eq!(
        connection_peer(&client_conn).expect("peer"),
        relay_peer("root")
    );
    assert_eq!(alpn(&client_conn), Some(relaymesh_protocol::ALPN.to_vec()));
}

/// One message there and back on a new stream.
async fn round_trip(client: &quinn::Connection, server: &quinn::Connection, word: &[u8]) {
    let (mut send, mut recv) = client.open_bi().await.expect("open stream");
    send.write_all(word).await.expect("write");
    send.finish().expect("finish");
    let (mut server_send, mut server_recv) = server.accept_bi().await.expect("accept stream");
    let heard = server_recv.read_to_end(1024).await.expect("server reads");
    server_send.write_all(&heard).await.expect("echo");
    server_send.finish().expect("finish echo");
    assert_eq!(recv.read_to_end(1024).await.expect("client reads"), word);
}

#[tokio::test]
async fn a_relay_lets_go_of_rustls_after_the_handshake_and_keeps_what_links_need() {
    let (client_conn, server_conn, _server) = eu_linked_to_root().await;
    round_trip(&client_conn, &server_conn, b"first").await;

    // rustls's connection is gone: it alone could export keying material.
    let mut exported = [0u8; 32];
    assert!(server_conn
        .export_keying_material(&mut exported, b"label", b"context")
        .is_err());
    client_conn
        .export_keying_material(&mut exported, b"label", b"context")
        .expect("the client keeps its rustls connection");
    // What the link reads after the handshake is still there.
    assert_eq!(
        connection_peer(&server_conn).expect("peer"),
        relay_peer("eu")
    );
    assert_eq!(alpn(&server_conn), Some(relaymesh_protocol::ALPN.to_vec()));
    // Key updates take their keys from the secrets the session kept, the
    // relay's and the child's alike.
    for round in 0..3 {
        server_conn.force_key_update();
        round_trip(
            &client_conn,
            &server_conn,
            format!("server {round}").as_bytes(),
        )
        .await;
        client_conn.force_key_update();
        round_trip(
            &client_conn,
            &server_conn,
            format!("client {round}").as_bytes(),
        )
        .await;
    }
    assert!(server_conn.close_reason().is_none());
}

#[tokio::test]
async fn a_client_from_another_mesh_is_refused() {
    let root = root();
    let stranger = join(
        &create_mesh("other", &[]).expect("mesh").identity,
        "eu",
        Role::Relay,
    );
    let server = serve(&root);
    let config = quic_client_config(&stranger).expect("client config");
    let (client_conn, server_conn) = handshake(&server, config, "root").await;
    assert!(client_conn.is_err());
    assert!(server_conn.is_err());
}

#[tokio::test]
async fn a_wrong_server_name_is_refused() {
    let root = root();
    let child = join(&root, "eu", Role::Relay);
    let server = serve(&root);
    let config = quic_client_config(&child).expect("client config");
    let (client_conn, _) = handshake(&server, config, "not-root").await;
    assert!(client_conn.is_err());
}

#[tokio::test]
async fn join_pins_the_mesh_ca() {
    let root = root();
    let server = serve(&root);
    let pin = sha256(&root.ca_cert_der);
    let config = quic_join_client_config(pin, issuer_key(&root)).expect("join config");
    let (client_conn, server_conn) = handshake(&server, config, "root").await;
    client_conn.expect("join handshake");
    let server_conn = server_conn.expect("server handshake");
    assert_eq!(connection_peer(&server_conn).expect("peer"), None);

    let config = quic_join_client_config([0; 32], issuer_key(&root)).expect("join config");
    let (client_conn, _) = handshake(&server, config, "root").await;
    assert!(client_conn.is_err());

    // The right pin does not make another mesh's relay acceptable.
    let impostor = serve(&create_mesh("root", &[]).expect("mesh").identity);
    let config = quic_join_client_config(pin, issuer_key(&root)).expect("join config");
    let (client_conn, _) = handshake(&impostor, config, "root").await;
    assert!(client_conn.is_err());
}

#[tokio::test]
async fn three_levels_connect() {
    let root = root();
    let first = join(&root, "eu", Role::Relay);
    let second = join(&first, "eu-west", Role::Relay);
    let agent = join(&second, "edge-1", Role::Agent);
    assert_eq!(agent.tls_chain_der.len(), 3);

    // The second-level relay dials the first.
    let server = serve(&first);
    let config = quic_client_config(&second).expect("client config");
    let (client_conn, server_conn) = handshake(&server, config, "eu").await;
    client_conn.expect("client handshake");
    let server_conn = server_conn.expect("server handshake");
    let peer = connection_peer(&server_conn)
        .expect("peer")
        .expect("has peer");
    assert_eq!(peer.name, "eu-west");

    // The agent dials the second-level relay.
    let server = serve(&second);
    let config = quic_client_config(&agent).expect("client config");
    let (client_conn, server_conn) = handshake(&server, config, "eu-west").await;
    client_conn.expect("client handshake");
    let server_conn = server_conn.expect("server handshake");
    assert_eq!(
        connection_peer(&server_conn).expect("peer"),
        Some(Peer {
            role: Role::Agent,
            name: "edge-1".into()
        })
    );

    // A joining node pins the CA even three levels down.
    let config = quic_join_client_config(sha256(&root.ca_cert_der), issuer_key(&second))
        .expect("join config");
    let (client_conn, _) = handshake(&server, config, "eu-west").await;
    client_conn.expect("join handshake");
}

/// A listener endpoint of `identity` on `socket`, as a relay opens it.
fn relay_endpoint(identity: &Identity, socket: std::net::UdpSocket) -> quinn::Endpoint {
    quinn::Endpoint::new(
        quic_endpoint_config(identity),
        Some(quic_server_config(identity).expect("server config")),
        socket,
        std::sync::Arc::new(quinn::TokioRuntime),
    )
    .expect("endpoint")
}

/// How a child's connection ends when its relay dies without a word and a
/// new relay process comes up on the same address, with the same key when
/// `same_key`, else another mesh root's.
async fn after_a_restart(same_key: bool) -> quinn::ConnectionError {
    let mesh = root();
    let child = join(&mesh, "eu", Role::Relay);
    // The old relay process: its own runtime, so that it can die mid-flight.
    let old = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let endpoint = {
        let _inside = old.enter();
        relay_endpoint(&mesh, socket)
    };
    let addr = endpoint.local_addr().expect("local addr");
    let accepting = old.spawn({
        let endpoint = endpoint.clone();
        async move { endpoint.accept().await.expect("incoming").await }
    });
    let client =
        quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("client endpoint");
    let config = quic_client_config(&child).expect("client config");
    let client_conn = client
        .connect_with(config, addr, "root")
        .expect("connect")
        .await
        .expect("client handshake");
    let server_conn = accepting
        .await
        .expect("accept task")
        .expect("server handshake");
    // It dies as kill -9 would: its tasks stop, nothing more is sent, and
    // its socket closes.
    old.shutdown_background();
    drop((server_conn, endpoint));
    let mut socket = std::net::UdpSocket::bind(addr);
    for _ in 0..500 {
        if socket.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        socket = std::net::UdpSocket::bind(addr);
    }
    // A new process takes the address.
    let other = root();
    let _new = relay_endpoint(
        if same_key { &mesh } else { &other },
        socket.expect("the old address is free"),
    );
    // The child's next keep-alive reaches it.
    tokio::time::timeout(Duration::from_secs(60), client_conn.closed())
        .await
        .expect("the link ends")
}

#[tokio::test]
async fn a_relay_restarted_on_its_address_resets_its_old_links_at_once() {
    let error = after_a_restart(true).await;
    assert!(
        matches!(error, quinn::ConnectionError::Reset),
        "a stateless reset from the restarted relay, not an idle timeout: {error:?}"
    );
}

#[tokio::test]
async fn another_key_on_the_address_cannot_reset_the_links() {
    let error = after_a_restart(false).await;
    assert!(
        matches!(error, quinn::ConnectionError::TimedOut),
        "only the idle timeout ends the link: {error:?}"
    );
}

/// What relay `minter` can make with its own issuer: a server identity that
/// claims to be relay `name`.
fn forge_relay(minter: &Identity, name: &str) -> Identity {
    let issuer = minter.issuer.as_ref().expect("a relay's issuer");
    let keys = new_node_keys(name, Role::Relay).expect("keys");
    let leaf = sign_node_cert(
        issuer,
        &keys.tls_csr_der,
        name,
        Role::Relay,
        DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("signed");
    let mut chain = vec![leaf, issuer.cert_der.clone()];
    chain.extend(issuer.chain_der.iter().cloned());
    Identity {
        name: name.into(),
        role: Role::Relay,
        ca_cert_der: minter.ca_cert_der.clone(),
        extra_anchors_der: Vec::new(),
        tls_chain_der: chain,
        tls_key_der: keys.tls_key_der,
        issuer: None,
        previous_issuer: None,
        token_key: minter.token_key.clone(),
        token_signing_key: None,
    }
}

#[tokio::test]
async fn a_relay_cannot_pose_as_the_root_to_its_children() {
    let root = root();
    let mallory = join(&root, "mallory", Role::Relay);
    let victim = join(&mallory, "victim", Role::Agent);
    let below = join(&mallory, "below", Role::Relay);
    let deeper = join(&below, "deeper", Role::Agent);
    // The forged certificate verifies against the mesh CA and names the
    // root: only its issuer gives it away.
    let forged = forge_relay(&mallory, "root");
    verify_chain(&root.anchors(), &forged.tls_chain_der).expect("a valid chain");
    let impostor = serve(&forged);
    for child in [&victim, &below] {
        let config = quic_client_config(child).expect("client config");
        let (client_conn, _) = handshake(&impostor, config, "root").await;
        let error = client_conn.expect_err("the impostor must be refused");
        assert!(error.to_string().contains("posing"), "{error}");
    }
    // Nor for below, which it admitted: below's children take only a
    // certificate below's own issuer signed.
    let impostor = serve(&forge_relay(&mallory, "below"));
    let config = quic_client_config(&deeper).expect("client config");
    let (client_conn, _) = handshake(&impostor, config, "below").await;
    let error = client_conn.expect_err("the impostor must be refused");
    assert!(error.to_string().contains("posing"), "{error}");
    // The real parents pass.
    for (parent, child, name) in [(&mallory, &victim, "mallory"), (&below, &deeper, "below")] {
        let server = serve(parent);
        let config = quic_client_config(child).expect("client config");
        let (client_conn, _) = handshake(&server, config, name).await;
        client_conn.expect("the real parent");
    }
}

#[tokio::test]
async fn a_relay_cannot_pose_as_a_sibling_to_a_joining_node() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let mallory = join(&root, "mallory", Role::Relay);
    let pin = sha256(&root.ca_cert_der);
    // A token for a node joining under eu, a child of the root.
    let impostor = serve(&forge_relay(&mallory, "eu"));
    let config = quic_join_client_config(pin, issuer_key(&eu)).expect("join config");
    let (client_conn, _) = handshake(&impostor, config, "eu").await;
    let error = client_conn.expect_err("the impostor must be refused");
    assert!(error.to_string().contains("posing"), "{error}");
    let real = serve(&eu);
    let config = quic_join_client_config(pin, issuer_key(&eu)).expect("join config");
    let (client_conn, _) = handshake(&real, config, "eu").await;
    client_conn.expect("the real parent");
    // A token that names another relay's key refuses the real one too.
    let config = quic_join_client_config(pin, issuer_key(&mallory)).expect("join config");
    let (client_conn, _) = handshake(&real, config, "eu").await;
    assert!(client_conn.is_err());
}

#[tokio::test]
async fn an_agent_certificate_cannot_serve() {
    let root = root();
    let relay = join(&root, "eu", Role::Relay);
    let agent = join(&root, "edge-1", Role::Agent);
    let server = serve(&agent);
    let config = quic_client_config(&relay).expect("client config");
    let (client_conn, _) = handshake(&server, config, "edge-1").await;
    assert!(client_conn.is_err());
}

/// `(notBefore, notAfter)` of a certificate, in Unix seconds.
fn validity(der: &[u8]) -> (i64, i64) {
    let cert = parse_cert(der).expect("parses");
    (
        cert.validity().not_before.timestamp(),
        cert.validity().not_after.timestamp(),
    )
}

#[test]
fn a_renewal_signs_the_same_key_again_and_keeps_the_join_time() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let edge = join(&eu, "edge-1", Role::Agent);
    let issuer = eu.issuer.as_ref().expect("a relay issues");
    let presented = edge.tls_chain_der[0].clone();

    let csr = renewal_request(&edge).expect("request");
    let leaf = sign_renewal(issuer, &csr, &presented, Duration::from_secs(600)).expect("signed");
    let (joined, _) = validity(&presented);
    let (since, until) = validity(&leaf);
    assert_eq!(since, joined, "a renewal keeps notBefore");
    let now = i64::try_from(crate::daemon::unix_ms() / 1000).expect("fits");
    assert!((until - now - 600).abs() <= 5, "valid for the given time");

    let chain: Vec<Vec<u8>> = std::iter::once(leaf)
        .chain(edge.tls_chain_der[1..].iter().cloned())
        .collect();
    let renewed = renewed_identity(&edge, chain.clone()).expect("accepted");
    assert_eq!(renewed.tls_chain_der, chain);
    assert_eq!(renewed.tls_key_der, edge.tls_key_der);

    // Another node's request is not renewed on this connection, and a
    // renewal for another node or from another issuer is not accepted.
    let other = join(&eu, "edge-2", Role::Agent);
    let other_csr = renewal_request(&other).expect("request");
    assert!(matches!(
        sign_renewal(issuer, &other_csr, &presented, DEFAULT_NODE_CERT_VALIDITY),
        Err(PkiError::BadCsr { .. })
    ));
    assert!(renewed_identity(&edge, other.tls_chain_der.clone()).is_err());
    let us = join(&root, "us", Role::Relay);
    let elsewhere = sign_renewal(
        us.issuer.as_ref().expect("a relay issues"),
        &csr,
        &presented,
        DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("us signs anything it is asked to");
    let mut wrong = vec![elsewhere];
    wrong.extend(us.issuer.iter().map(|issuer| issuer.cert_der.clone()));
    assert!(renewed_identity(&edge, wrong).is_err());
}

#[test]
fn the_root_renews_its_own_certificate() {
    let root = root();
    let renewed = renew_at_root(&root, Duration::from_secs(3600))
        .expect("renewed")
        .expect("the root renews itself");
    assert_ne!(renewed.tls_chain_der, root.tls_chain_der);
    assert_eq!(
        validity(&renewed.tls_chain_der[0]).0,
        validity(&root.tls_chain_der[0]).0
    );
    let eu = join(&root, "eu", Role::Relay);
    assert!(renew_at_root(&eu, Duration::from_secs(3600))
        .expect("no error")
        .is_none());
}

/// Clock skew (docs/reliability.md): rustls checks a peer's certificate
/// against the checking node's own clock. A certificate signed by a parent
/// whose clock is 10 minutes ahead must already be valid to a child (or a
/// grandparent) whose clock is 10 minutes behind, so certificates start an
/// hour in the past; and they last far longer than any skew.
#[test]
fn fresh_certificates_are_valid_to_nodes_ten_minutes_behind_or_ahead() {
    let skew = 10 * 60;
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_secs(),
    )
    .expect("fits");
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let edge = join(&eu, "edge-1", Role::Agent);
    for identity in [&root, &eu, &edge] {
        let (not_before, not_after) = validity(&identity.tls_chain_der[0]);
        assert!(not_before <= now - skew, "valid 10 min in the past");
        assert!(not_after >= now + skew, "still valid 10 min ahead");
    }
}

/// A node that re-parented to another candidate takes that candidate's
/// renewal, and only if its issuers are where the root places the new
/// parent; the path of a certificate names the relays that issued it.
#[test]
fn a_re_parented_node_takes_its_new_parents_certificate_and_no_other() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let eu_west = join(&eu, "eu-west", Role::Relay);
    let us = join(&root, "us", Role::Relay);
    let edge = join(&eu_west, "edge-1", Role::Agent);
    assert_eq!(
        chain_issuer_path(&edge.tls_chain_der, &root.anchors()).expect("a path"),
        ["eu", "eu-west"]
    );
    assert_eq!(
        chain_issuer_path(&eu_west.tls_chain_der, &root.anchors()).expect("a path"),
        ["eu"],
        "a relay's own certificate comes from its parent's issuer"
    );

    let csr = renewal_request(&edge).expect("request");
    let presented = edge.tls_chain_der[0].clone();
    let us_issuer = us.issuer.as_ref().expect("a relay issues");
    let leaf =
        sign_renewal(us_issuer, &csr, &presented, DEFAULT_NODE_CERT_VALIDITY).expect("us signs it");
    let mut chain = vec![leaf];
    chain.push(us_issuer.cert_der.clone());
    chain.extend(us_issuer.chain_der.iter().cloned());
    assert!(
        renewed_identity(&edge, chain.clone()).is_err(),
        "a plain renewal keeps its issuer"
    );
    let rehomed = rehomed_identity(&edge, chain.clone(), None, &issuer_key(&us)).expect("accepted");
    assert_eq!(rehomed.tls_chain_der, chain);
    assert_eq!(rehomed.tls_key_der, edge.tls_key_der);
    let refused = rehomed_identity(&edge, chain, None, &issuer_key(&eu_west));
    assert!(
        refused.is_err(),
        "a certificate from us is no certificate from eu-west"
    );
}

/// A node with candidate parents dials each with the certificate it holds
/// and accepts it only where the root placed it: a relay minting itself a
/// certificate for another candidate, or a relay that is no candidate, is
/// refused.
#[tokio::test]
async fn a_node_accepts_a_candidate_parent_only_where_the_root_placed_it() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let eu_west = join(&eu, "eu-west", Role::Relay);
    let us = join(&root, "us", Role::Relay);
    let mallory = join(&root, "mallory", Role::Relay);
    let edge = join(&eu_west, "edge-1", Role::Agent);
    let candidates = [
        relaymesh_protocol::CandidateParent {
            name: "eu-west".into(),
            addresses: Vec::new(),
            issuers: vec!["eu".into()],
            issuer_key: issuer_key(&eu_west),
        },
        relaymesh_protocol::CandidateParent {
            name: "us".into(),
            addresses: Vec::new(),
            issuers: Vec::new(),
            issuer_key: issuer_key(&us),
        },
    ];
    for (parent, name) in [(&eu_west, "eu-west"), (&us, "us")] {
        let server = serve(parent);
        let config = quic_client_config_among(&edge, &candidates).expect("client config");
        let (client_conn, _) = handshake(&server, config, name).await;
        client_conn.expect("a real candidate");
    }
    let impostor = serve(&forge_relay(&mallory, "us"));
    let config = quic_client_config_among(&edge, &candidates).expect("client config");
    let (client_conn, _) = handshake(&impostor, config, "us").await;
    let error = client_conn.expect_err("the impostor must be refused");
    assert!(error.to_string().contains("posing"), "{error}");
    let stranger = serve(&mallory);
    let config = quic_client_config_among(&edge, &candidates).expect("client config");
    let (client_conn, _) = handshake(&stranger, config, "mallory").await;
    let error = client_conn.expect_err("no candidate");
    assert!(error.to_string().contains("no candidate"), "{error}");
}

/// What `issuer` answers to `node`'s renewal: a certificate for its key,
/// then the chain above it.
pub(super) fn renewal_by(issuer: &crate::identity::Issuer, node: &Identity) -> Vec<Vec<u8>> {
    let csr = renewal_request(node).expect("request");
    let leaf = sign_renewal(
        issuer,
        &csr,
        &node.tls_chain_der[0],
        DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("signed");
    let mut chain = vec![leaf, issuer.cert_der.clone()];
    chain.extend(issuer.chain_der.iter().cloned());
    chain
}

/// `relay` joined again under `parent` with the keys it has, as a relay
/// that moves with its subtree does.
fn moved(relay: &Identity, parent: &Identity) -> Identity {
    let keys = relay_keys_kept(relay).expect("keys");
    let grant = grant_for(parent, &keys, &relay.name, Role::Relay);
    identity_from_grant(&relay.name, Role::Relay, keys, &grant).expect("identity from grant")
}

/// A relay that moved to another parent with its issuer key is still its
/// children's parent: they dial it with the certificates it issued before
/// the move, and take its renewals, which now lead through the new parent.
/// The relay that admitted it before cannot pose as it.
#[tokio::test]
async fn a_relay_that_moved_with_its_issuer_key_is_still_its_childrens_parent() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let us = join(&root, "us", Role::Relay);
    let mid = join(&eu, "mid", Role::Relay);
    let edge = join(&mid, "edge-1", Role::Agent);
    let below = join(&mid, "below", Role::Relay);
    let deeper = join(&below, "deeper", Role::Agent);
    let mid = moved(&mid, &us);
    assert_eq!(
        chain_issuer_path(&mid.tls_chain_der, &root.anchors()).expect("a path"),
        ["us"]
    );
    let server = serve(&mid);
    for child in [&edge, &below] {
        let config = quic_client_config(child).expect("client config");
        let (client_conn, _) = handshake(&server, config, "mid").await;
        client_conn.expect("the moved parent");
    }
    // Deeper down nothing changed: below's issuer still signs deeper's.
    let config = quic_client_config(&deeper).expect("client config");
    let (client_conn, _) = handshake(&serve(&below), config, "below").await;
    client_conn.expect("below");

    // The renewal through the moved relay leads through us.
    let issuer = mid.issuer.as_ref().expect("a relay's issuer");
    let renewed =
        renewed_identity(&edge, renewal_by(issuer, &edge)).expect("the same issuer, moved");
    assert_eq!(
        chain_issuer_path(&renewed.tls_chain_der, &root.anchors()).expect("a path"),
        ["us", "mid"]
    );
    let config = quic_client_config(&renewed).expect("client config");
    let (client_conn, _) = handshake(&server, config, "mid").await;
    client_conn.expect("the moved parent, after the renewal");

    // A relay below renews too, and its issuer's chain follows: a node
    // joining below it now finds it below us and mid.
    let below =
        renewed_identity(&below, renewal_by(issuer, &below)).expect("the same issuer, moved");
    let pin = sha256(&root.ca_cert_der);
    let config = quic_join_client_config(pin, issuer_key(&below)).expect("join config");
    let (client_conn, _) = handshake(&serve(&below), config, "below").await;
    client_conn.expect("a join below below, through us and mid");

    // Another issuer's renewal is still refused.
    let other = join(&us, "other", Role::Relay);
    let other_issuer = other.issuer.as_ref().expect("a relay's issuer");
    assert!(renewed_identity(&edge, renewal_by(other_issuer, &edge)).is_err());

    // The relay that admitted mid mints a certificate for it: refused.
    let impostor = serve(&forge_relay(&eu, "mid"));
    let config = quic_client_config(&edge).expect("client config");
    let (client_conn, _) = handshake(&impostor, config, "mid").await;
    let error = client_conn.expect_err("the impostor must be refused");
    assert!(error.to_string().contains("posing"), "{error}");
}

/// A relay that re-parented to a candidate has the new parent sign its
/// issuer key again in the renewal; without that signature the renewal is
/// refused, and with it the relay's subtree chains through the new parent.
#[tokio::test]
async fn a_re_parented_relay_has_its_issuer_signed_again_by_its_new_parent() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let us = join(&root, "us", Role::Relay);
    let mid = join(&eu, "mid", Role::Relay);
    let edge = join(&mid, "edge-1", Role::Agent);

    let us_issuer = us.issuer.as_ref().expect("a relay issues");
    let chain = renewal_by(us_issuer, &mid);
    let above = [us_issuer.cert_der.clone()];
    let path = issuer_key(&us);
    let refused = rehomed_identity(&mid, chain.clone(), None, &path);
    assert!(
        refused
            .expect_err("no issuer")
            .to_string()
            .contains("issuer"),
        "a relay needs its issuer signed again"
    );
    let issuer_csr = issuer_renewal_request(&mid)
        .expect("request")
        .expect("a relay has an issuer");
    let issuer_cert = sign_issuer_cert(us_issuer, &issuer_csr, "mid").expect("signed");
    let issuer_chain: Vec<Vec<u8>> = std::iter::once(issuer_cert)
        .chain(above.iter().cloned())
        .collect();
    let moved = rehomed_identity(&mid, chain, Some(issuer_chain), &path).expect("accepted");
    let issuer = moved.issuer.as_ref().expect("an issuer");
    assert_eq!(
        issuer.key_der,
        mid.issuer.as_ref().expect("an issuer").key_der,
        "the same key"
    );
    assert_eq!(
        chain_issuer_path(
            &[issuer.cert_der.clone(), us_issuer.cert_der.clone()],
            &root.anchors()
        )
        .expect("a path"),
        ["us"]
    );
    // Its child keeps it as parent; a node joining below it finds it by the
    // key it kept, wherever it sits now.
    let server = serve(&moved);
    let config = quic_client_config(&edge).expect("client config");
    let (client_conn, _) = handshake(&server, config, "mid").await;
    client_conn.expect("the re-parented relay");
    let pin = sha256(&root.ca_cert_der);
    assert_eq!(issuer_key(&moved), issuer_key(&mid), "a move keeps the key");
    let config = quic_join_client_config(pin, issuer_key(&mid)).expect("join config");
    let (client_conn, _) = handshake(&server, config, "mid").await;
    client_conn.expect("a join below it, by its key");
    let config = quic_join_client_config(pin, issuer_key(&eu)).expect("join config");
    let (client_conn, _) = handshake(&server, config, "mid").await;
    assert!(client_conn.is_err(), "eu's key is not mid's");
    // The root has no issuer to renew this way.
    assert!(issuer_renewal_request(&root).expect("request").is_none());
}

/// Issue 29, finding 3: a relay above another (`eu` above `eu-west`)
/// admits a new "eu-west" with its own issuer: a CA certificate named
/// `relaymesh issuer eu-west` and a leaf for `eu-west`, both valid against
/// the mesh CA and signed through the same issuer names as the real ones.
/// Only the key tells them apart, and every check goes by key: a node
/// joining under eu-west (agent or relay), a node failing over to eu-west
/// as a candidate, eu-west's own child, and a renewal through eu-west after
/// it moved all refuse the impostor.
#[tokio::test]
async fn an_ancestor_cannot_pose_as_a_relay_below_it_with_an_issuer_in_its_name() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let us = join(&root, "us", Role::Relay);
    let eu_west = join(&eu, "eu-west", Role::Relay);
    let edge = join(&eu_west, "edge-1", Role::Agent);
    let impostor = join(&eu, "eu-west", Role::Relay);
    let names = |identity: &Identity| {
        let issuer = identity.issuer.as_ref().expect("an issuer");
        let leaf = sign_node_cert(
            issuer,
            &renewal_request(identity).expect("request"),
            "eu-west",
            Role::Relay,
            DEFAULT_NODE_CERT_VALIDITY,
        )
        .expect("signed");
        let mut chain = vec![leaf, issuer.cert_der.clone()];
        chain.extend(issuer.chain_der.iter().cloned());
        chain_issuer_path(&chain, &root.anchors()).expect("a path")
    };
    assert_eq!(names(&impostor), ["eu", "eu-west"]);
    assert_eq!(
        names(&impostor),
        names(&eu_west),
        "by issuer names the impostor is eu-west"
    );
    assert_ne!(issuer_key(&impostor), issuer_key(&eu_west));
    let refused = |error: quinn::ConnectionError| {
        let text = error.to_string();
        assert!(text.contains("issuer key mismatch"), "{text}");
        assert!(text.contains("posing"), "{text}");
    };

    // (a, b) A node joining under eu-west, with a token naming eu-west's
    // key (the join's client does not depend on the role).
    let pin = sha256(&root.ca_cert_der);
    let fake = serve(&impostor);
    let real = serve(&eu_west);
    for _role in [Role::Agent, Role::Relay] {
        let config = quic_join_client_config(pin, issuer_key(&eu_west)).expect("join config");
        let (client_conn, server_conn) = handshake(&fake, config, "eu-west").await;
        refused(client_conn.expect_err("the impostor must be refused"));
        assert!(server_conn.is_err(), "the impostor never sees a join");
        let config = quic_join_client_config(pin, issuer_key(&eu_west)).expect("join config");
        let (client_conn, _) = handshake(&real, config, "eu-west").await;
        client_conn.expect("the real eu-west");
    }

    // (c) A node failing over to eu-west as a candidate parent.
    let candidates = [
        relaymesh_protocol::CandidateParent {
            name: "eu-west".into(),
            addresses: Vec::new(),
            issuers: vec!["eu".into()],
            issuer_key: issuer_key(&eu_west),
        },
        relaymesh_protocol::CandidateParent {
            name: "us".into(),
            addresses: Vec::new(),
            issuers: Vec::new(),
            issuer_key: issuer_key(&us),
        },
    ];
    let stranded = join(&us, "edge-2", Role::Agent);
    let config = quic_client_config_among(&stranded, &candidates).expect("client config");
    let (client_conn, _) = handshake(&fake, config, "eu-west").await;
    refused(client_conn.expect_err("the impostor must be refused"));
    let config = quic_client_config_among(&stranded, &candidates).expect("client config");
    let (client_conn, _) = handshake(&real, config, "eu-west").await;
    client_conn.expect("the real candidate");
    // And eu-west's own child, dialing its parent.
    let config = quic_client_config(&edge).expect("client config");
    let (client_conn, _) = handshake(&fake, config, "eu-west").await;
    assert!(client_conn.is_err(), "a child knows its parent's issuer");

    // (d) Renewals: eu-west moved to us; the node re-parented to it takes a
    // renewal only from eu-west's key, and a child of eu-west only from the
    // issuer that signed it before.
    let eu_west = moved(&eu_west, &us);
    let fake_issuer = impostor.issuer.as_ref().expect("an issuer");
    let real_issuer = eu_west.issuer.as_ref().expect("an issuer");
    let error = rehomed_identity(
        &stranded,
        renewal_by(fake_issuer, &stranded),
        None,
        &issuer_key(&eu_west),
    )
    .expect_err("the impostor's renewal must be refused");
    assert!(error.to_string().contains("issuer key mismatch"), "{error}");
    rehomed_identity(
        &stranded,
        renewal_by(real_issuer, &stranded),
        None,
        &issuer_key(&eu_west),
    )
    .expect("the real eu-west's renewal, through its new place");
    assert!(renewed_identity(&edge, renewal_by(fake_issuer, &edge)).is_err());
    renewed_identity(&edge, renewal_by(real_issuer, &edge)).expect("the moved eu-west");
}
