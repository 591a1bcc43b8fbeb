//! Admission: who gets in, who is refused and why, and that refusals never
//! use up a token.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;

use relaymesh_protocol::message::JoinRequest;
use relaymesh_protocol::{ErrorCode, Role, PROTOCOL_VERSION};

use super::*;
use crate::identity::Identity;
use crate::pki::NodeKeys;

const NOW: u64 = 1_700_000_000;

/// Records used tokens in memory and counts every write.
#[derive(Default)]
struct MemoryLedger {
    used: RefCell<HashMap<[u8; 16], u64>>,
    writes: Cell<usize>,
    broken: bool,
    revoked: Vec<[u8; 16]>,
}

impl TokenLedger for MemoryLedger {
    fn claim(&self, id: [u8; 16], not_after_unix: u64) -> Result<bool, String> {
        if self.broken {
            return Err("disk on fire".into());
        }
        self.writes.set(self.writes.get() + 1);
        Ok(self.used.borrow_mut().insert(id, not_after_unix).is_none())
    }

    fn is_revoked(&self, id: &[u8; 16]) -> bool {
        self.revoked.contains(id)
    }
}

struct Mesh {
    root: Identity,
    signing_key: Vec<u8>,
}

fn mesh() -> Mesh {
    let root = pki::create_mesh("root", &[]).expect("mesh").identity;
    let signing_key = root.token_signing_key.clone().expect("root signs tokens");
    Mesh { root, signing_key }
}

impl Mesh {
    fn token(&self, name: &str, role: Role, parent: &str) -> String {
        let claims = token::new_claims(
            name,
            role,
            token::TokenParent {
                name: parent.into(),
                addresses: vec!["127.0.0.1:7443".into()],
                issuers: Vec::new(),
                issuer_key: [0; 32],
            },
            pki::sha256(&self.root.ca_cert_der),
            Duration::from_secs(600),
            NOW,
        );
        token::issue(&self.signing_key, &claims).expect("issue")
    }
}

fn request(token: String, name: &str, role: Role, keys: &NodeKeys) -> JoinRequest {
    JoinRequest {
        version: PROTOCOL_VERSION,
        token,
        name: name.to_string(),
        role,
        tls_csr_der: keys.tls_csr_der.clone(),
        issuer_csr_der: keys.issuer_csr_der.clone(),
    }
}

/// `name` joins below `parent` through admission.
fn join(mesh: &Mesh, parent: &Identity, name: &str, role: Role) -> Identity {
    let keys = pki::new_node_keys(name, role).expect("keys");
    let request = request(mesh.token(name, role, &parent.name), name, role, &keys);
    let grant = admit(
        parent,
        &request,
        NOW,
        &MemoryLedger::default(),
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("admitted");
    pki::identity_from_grant(name, role, keys, &grant).expect("identity")
}

#[test]
fn accepts_a_relay() {
    let mesh = mesh();
    let keys = pki::new_node_keys("eu", Role::Relay).expect("keys");
    let request = request(
        mesh.token("eu", Role::Relay, "root"),
        "eu",
        Role::Relay,
        &keys,
    );
    let ledger = MemoryLedger::default();
    let grant = admit(
        &mesh.root,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("admitted");
    assert_eq!(ledger.writes.get(), 1);
    assert_eq!(grant.parent, "root");
    assert_eq!(grant.ca_cert_der, mesh.root.ca_cert_der);
    assert_eq!(grant.token_key, mesh.root.token_key);
    // The root's issuer is the CA itself: nothing between leaf and CA.
    assert_eq!(grant.tls_chain_der.len(), 1);
    assert_eq!(grant.issuer_chain_der.as_ref().map(Vec::len), Some(1));
    let relay = pki::identity_from_grant("eu", Role::Relay, keys, &grant).expect("identity");
    assert!(relay.issuer.is_some());
    assert!(!relay.is_root());
}

#[test]
fn accepts_an_agent_below_a_relay() {
    let mesh = mesh();
    let relay = join(&mesh, &mesh.root, "eu", Role::Relay);
    let keys = pki::new_node_keys("edge-1", Role::Agent).expect("keys");
    let request = request(
        mesh.token("edge-1", Role::Agent, "eu"),
        "edge-1",
        Role::Agent,
        &keys,
    );
    let ledger = MemoryLedger::default();
    let grant = admit(
        &relay,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("admitted");
    assert_eq!(ledger.writes.get(), 1);
    assert_eq!(grant.parent, "eu");
    assert_eq!(grant.issuer_chain_der, None);
    let relay_issuer = relay.issuer.as_ref().expect("issuer");
    assert_eq!(
        grant.tls_chain_der[1..],
        *std::slice::from_ref(&relay_issuer.cert_der)
    );
    let agent = pki::identity_from_grant("edge-1", Role::Agent, keys, &grant).expect("identity");
    let peer = pki::verify_chain(&mesh.root.anchors(), &agent.tls_chain_der).expect("chain");
    assert_eq!(peer.name, "edge-1");
    assert_eq!(peer.role, Role::Agent);
}

#[test]
fn a_token_is_used_once() {
    let mesh = mesh();
    let keys = pki::new_node_keys("edge-1", Role::Agent).expect("keys");
    let request = request(
        mesh.token("edge-1", Role::Agent, "root"),
        "edge-1",
        Role::Agent,
        &keys,
    );
    let ledger = MemoryLedger::default();
    admit(
        &mesh.root,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect("first use");
    let refusal = admit(
        &mesh.root,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect_err("second use");
    assert_eq!(refusal.code, ErrorCode::TokenReused);
    assert!(refusal.message.contains("was already used"), "{refusal}");
}

#[test]
fn a_revoked_token_is_refused_and_stays_unused() {
    let mesh = mesh();
    let keys = pki::new_node_keys("edge-1", Role::Agent).expect("keys");
    let token = mesh.token("edge-1", Role::Agent, "root");
    let id = token::verify(&token, &mesh.root.token_key, NOW)
        .expect("valid")
        .id;
    let request = request(token, "edge-1", Role::Agent, &keys);
    let ledger = MemoryLedger {
        revoked: vec![id],
        ..MemoryLedger::default()
    };
    let refusal = admit(
        &mesh.root,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect_err("revoked");
    assert_eq!(refusal.code, ErrorCode::Revoked);
    assert!(refusal.message.contains("was revoked"), "{refusal}");
    assert_eq!(ledger.writes.get(), 0);
}

#[test]
fn a_broken_ledger_is_an_internal_error() {
    let mesh = mesh();
    let keys = pki::new_node_keys("edge-1", Role::Agent).expect("keys");
    let request = request(
        mesh.token("edge-1", Role::Agent, "root"),
        "edge-1",
        Role::Agent,
        &keys,
    );
    let ledger = MemoryLedger {
        broken: true,
        ..MemoryLedger::default()
    };
    let refusal = admit(
        &mesh.root,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect_err("refused");
    assert_eq!(refusal.code, ErrorCode::Internal);
}

/// Each refusal, its code, and a part of its message. None of them may write
/// to the ledger.
#[test]
fn refusals_never_touch_the_ledger() {
    let mesh = mesh();
    let other_mesh = self::mesh();
    let agent = join(&mesh, &mesh.root, "edge-9", Role::Agent);
    let relay_keys = pki::new_node_keys("eu", Role::Relay).expect("keys");
    let agent_keys = pki::new_node_keys("edge-1", Role::Agent).expect("keys");
    let relay_request = |token: String| request(token, "eu", Role::Relay, &relay_keys);
    let agent_request = |token: String| request(token, "edge-1", Role::Agent, &agent_keys);
    let good_relay_token = mesh.token("eu", Role::Relay, "root");

    let expired = {
        let claims = token::new_claims(
            "eu",
            Role::Relay,
            token::TokenParent {
                name: "root".into(),
                addresses: Vec::new(),
                issuers: Vec::new(),
                issuer_key: [0; 32],
            },
            pki::sha256(&mesh.root.ca_cert_der),
            Duration::from_secs(60),
            NOW - 120,
        );
        token::issue(&mesh.signing_key, &claims).expect("issue")
    };
    let cases: Vec<(&str, &Identity, JoinRequest, ErrorCode, &str)> = vec![
        (
            "old version",
            &mesh.root,
            JoinRequest {
                version: 0,
                ..relay_request(good_relay_token.clone())
            },
            ErrorCode::UnsupportedVersion,
            "version 0",
        ),
        (
            "new version",
            &mesh.root,
            JoinRequest {
                version: PROTOCOL_VERSION + 1,
                ..relay_request(good_relay_token.clone())
            },
            ErrorCode::UnsupportedVersion,
            "not supported",
        ),
        (
            "agent as parent",
            &agent,
            agent_request(mesh.token("edge-1", Role::Agent, "edge-9")),
            ErrorCode::Forbidden,
            "agents cannot admit children",
        ),
        (
            "garbage token",
            &mesh.root,
            relay_request("rmt1.garbage".into()),
            ErrorCode::TokenInvalid,
            "malformed",
        ),
        (
            "token of another mesh's key",
            &mesh.root,
            relay_request(other_mesh.token("eu", Role::Relay, "root")),
            ErrorCode::TokenInvalid,
            "signature",
        ),
        (
            "expired token",
            &mesh.root,
            relay_request(expired),
            ErrorCode::TokenExpired,
            "expired at 1699999940",
        ),
        (
            "token for another parent",
            &mesh.root,
            relay_request(mesh.token("eu", Role::Relay, "us")),
            ErrorCode::TokenMismatch,
            "token is for parent us, this is root",
        ),
        (
            "token for another role",
            &mesh.root,
            request(
                mesh.token("eu", Role::Agent, "root"),
                "eu",
                Role::Relay,
                &relay_keys,
            ),
            ErrorCode::TokenMismatch,
            "token is for role agent, not relay",
        ),
        (
            "token for another name",
            &mesh.root,
            relay_request(mesh.token("us", Role::Relay, "root")),
            ErrorCode::TokenMismatch,
            "token is for name us, not eu",
        ),
        (
            "invalid name",
            &mesh.root,
            request(
                mesh.token("Not_Valid", Role::Agent, "root"),
                "Not_Valid",
                Role::Agent,
                &agent_keys,
            ),
            ErrorCode::Malformed,
            "Not_Valid",
        ),
        (
            "relay without issuer request",
            &mesh.root,
            JoinRequest {
                issuer_csr_der: None,
                ..relay_request(good_relay_token.clone())
            },
            ErrorCode::Malformed,
            "issuer certificate request",
        ),
        (
            "agent with issuer request",
            &mesh.root,
            JoinRequest {
                issuer_csr_der: relay_keys.issuer_csr_der.clone(),
                ..agent_request(mesh.token("edge-1", Role::Agent, "root"))
            },
            ErrorCode::Malformed,
            "must not send an issuer",
        ),
        (
            "admin",
            &mesh.root,
            request(
                mesh.token("ops", Role::Admin, "root"),
                "ops",
                Role::Admin,
                &agent_keys,
            ),
            ErrorCode::Forbidden,
            "never admitted",
        ),
        (
            "bad TLS request",
            &mesh.root,
            JoinRequest {
                tls_csr_der: b"not a csr".to_vec(),
                ..relay_request(good_relay_token.clone())
            },
            ErrorCode::Malformed,
            "TLS certificate request",
        ),
        (
            "bad issuer request",
            &mesh.root,
            JoinRequest {
                issuer_csr_der: Some(b"not a csr".to_vec()),
                ..relay_request(good_relay_token.clone())
            },
            ErrorCode::Malformed,
            "issuer certificate request",
        ),
    ];
    for (case, parent, request, code, message) in cases {
        let ledger = MemoryLedger::default();
        let refusal = admit(
            parent,
            &request,
            NOW,
            &ledger,
            pki::DEFAULT_NODE_CERT_VALIDITY,
        )
        .expect_err(case);
        assert_eq!(refusal.code, code, "{case}: {refusal}");
        assert!(refusal.message.contains(message), "{case}: {refusal}");
        assert_eq!(ledger.writes.get(), 0, "{case} wrote to the ledger");
    }
}

#[test]
fn too_deep_relays_are_forbidden() {
    let mesh = mesh();
    let mut parent = mesh.root.clone();
    for depth in 1..=pki::MAX_INTERMEDIATES {
        parent = join(&mesh, &parent, &format!("r{depth}"), Role::Relay);
    }
    let keys = pki::new_node_keys("r7", Role::Relay).expect("keys");
    let name = parent.name.clone();
    let request = request(
        mesh.token("r7", Role::Relay, &name),
        "r7",
        Role::Relay,
        &keys,
    );
    let ledger = MemoryLedger::default();
    let refusal = admit(
        &parent,
        &request,
        NOW,
        &ledger,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )
    .expect_err("too deep");
    assert_eq!(refusal.code, ErrorCode::Forbidden, "{refusal}");
    assert_eq!(ledger.writes.get(), 0);
    // An agent still fits below the deepest relay.
    join(&mesh, &parent, "edge-deep", Role::Agent);
}
