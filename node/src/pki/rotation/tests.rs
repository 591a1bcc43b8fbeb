//! A rotation of the mesh CA along a tree, with real QUIC handshakes:
//! root ── {eu ── edge, direct}.

use std::time::Duration;

use relaymesh_protocol::Role;

use super::super::tests::{handshake, join, renewal_by, root, serve};
use super::*;
use crate::pki::{
    issuer_renewal_request, quic_client_config, rehomed_identity, renewed_identity,
    sign_issuer_cert, verify_chain,
};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A handshake of `child` with `parent` succeeds on both sides.
async fn shakes_hands(parent: &Identity, child: &Identity) {
    let server = serve(parent);
    let config = quic_client_config(child).expect("client config");
    let (client, server) = handshake(&server, config, &parent.name).await;
    client.expect("the child accepts its parent");
    server.expect("the parent accepts its child");
}

#[tokio::test]
async fn a_rotation_keeps_every_handshake_and_ends_on_the_new_ca_alone() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let edge = join(&eu, "edge", Role::Agent);
    let direct = join(&root, "direct", Role::Agent);

    assert!(finish_mesh_ca_rotation(&root, DAY)
        .expect_err("nothing to finish")
        .to_string()
        .contains("no rotation"));
    let rotating = start_mesh_ca_rotation(&root, DAY).expect("started");
    let trust = current_trust(&rotating, None).expect("the trust");
    assert_eq!(trust.token_keys, vec![root.token_key.clone()]);
    assert!(start_mesh_ca_rotation(&rotating, DAY)
        .expect_err("one at a time")
        .to_string()
        .contains("under way"));
    assert_eq!(trust.anchors.len(), 2);
    assert_eq!(trust.anchors[0], root.ca_cert_der);
    let signer = trust.signer_key;

    // Nodes that have not heard of the new CA keep their parent, which
    // signs through it now.
    shakes_hands(&rotating, &direct).await;
    shakes_hands(&rotating, &eu).await;

    // They hear, and the root signs its children again.
    let direct = with_mesh_trust(&direct, &trust).expect("trusts both");
    assert!(needs_mesh_signature(&direct, &signer));
    let issuer = rotating.issuer.as_ref().expect("the root's issuer");
    let direct = rehomed_identity(&direct, renewal_by(issuer, &direct), None, &signer)
        .expect("signed again by the new key");
    assert!(!needs_mesh_signature(&direct, &signer));
    assert_eq!(chain_ca_key(&direct).expect("a key"), signer);

    let eu = with_mesh_trust(&eu, &trust).expect("trusts both");
    assert!(needs_mesh_signature(&eu, &signer));
    let csr = issuer_renewal_request(&eu)
        .expect("a request")
        .expect("a relay's");
    let issuer_chain = vec![
        sign_issuer_cert(issuer, &csr, "eu").expect("issuer signed again"),
        issuer.cert_der.clone(),
    ];
    let eu = rehomed_identity(&eu, renewal_by(issuer, &eu), Some(issuer_chain), &signer)
        .expect("signed again, issuer too");
    assert_eq!(chain_ca_key(&eu).expect("a key"), signer);

    // Below eu, a renewal through eu's new chain: its issuer key is the same.
    let edge = with_mesh_trust(&edge, &trust).expect("trusts both");
    assert!(
        !needs_mesh_signature(&edge, &signer),
        "eu's issuer signed it"
    );
    let eu_issuer = eu.issuer.as_ref().expect("eu's issuer");
    let edge = renewed_identity(&edge, renewal_by(eu_issuer, &edge)).expect("renewed");
    assert_eq!(chain_ca_key(&edge).expect("a key"), signer);
    shakes_hands(&eu, &edge).await;

    // Finish: the new CA alone.
    let finished = finish_mesh_ca_rotation(&rotating, DAY).expect("finished");
    let trust = current_trust(&finished, None).expect("the trust");
    assert_eq!(trust.anchors.len(), 1);
    assert_eq!(trust.signer_key, signer);
    let old_ca = root.ca_cert_der.clone();
    let [eu, edge, direct] =
        [&eu, &edge, &direct].map(|node| with_mesh_trust(node, &trust).expect("trusts the new CA"));
    assert!(!eu.anchors().contains(&old_ca.as_slice()));
    shakes_hands(&finished, &eu).await;
    shakes_hands(&finished, &direct).await;
    shakes_hands(&eu, &edge).await;

    // The root's children drop the cross-signed CA from their chains.
    let issuer = finished.issuer.as_ref().expect("the root's issuer");
    assert_eq!(issuer.cert_der, trust.anchors[0]);
    let direct = renewed_identity(&direct, renewal_by(issuer, &direct)).expect("renewed");
    assert!(!direct
        .tls_chain_der
        .iter()
        .any(|cert| cert == &rotating.issuer.as_ref().expect("cross").cert_der));
    assert_eq!(chain_ca_key(&direct).expect("a key"), signer);

    // What the old CA signed and was not signed again is worth nothing now.
    let stale = join(&root, "stale", Role::Agent);
    assert!(verify_chain(&direct.anchors(), &stale.tls_chain_der).is_err());
}

#[test]
fn only_mesh_cas_become_anchors() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let relay_issuer = eu.issuer.as_ref().expect("eu's issuer").cert_der.clone();
    assert!(!is_mesh_ca(&relay_issuer));
    assert!(is_mesh_ca(&root.ca_cert_der));
    let forged = MeshTrust {
        anchors: vec![root.ca_cert_der.clone(), relay_issuer],
        signer_key: [0; 32],
        token_keys: Vec::new(),
    };
    let error = with_mesh_trust(&eu, &forged).expect_err("a relay's issuer is no mesh CA");
    assert!(error.to_string().contains("no mesh CA"), "{error}");
    let empty = MeshTrust {
        anchors: Vec::new(),
        signer_key: [0; 32],
        token_keys: Vec::new(),
    };
    assert!(with_mesh_trust(&eu, &empty).is_err());
}
