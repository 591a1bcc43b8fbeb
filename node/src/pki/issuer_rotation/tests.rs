//! A relay's issuer key rotating under its children, with real QUIC
//! handshakes: root ── eu ── {edge, deep ── leaf}.

use relaymesh_protocol::Role;

use super::super::tests::{handshake, join, renewal_by, root, serve};
use super::*;
use crate::admission::chain_above_leaf;
use crate::pki::quic_tls::server_chain;
use crate::pki::{
    issuer_renewal_request, public_key_sha256, quic_client_config, renewed_identity,
    renewed_through, resigned_identity, sign_issuer_cert,
};

/// Whether `child` and `parent` complete a handshake, both sides agreeing.
async fn shake(parent: &Identity, child: &Identity) -> Result<(), String> {
    let server = serve(parent);
    let config = quic_client_config(child).expect("client config");
    let (client, server) = handshake(&server, config, &parent.name).await;
    client.map_err(|error| format!("client: {error}"))?;
    server.map_err(|error| format!("server: {error}"))?;
    Ok(())
}

/// `node`'s issuer signed again by `parent`'s (a new key or the same).
fn issuer_chain(parent: &Identity, csr: &[u8], name: &str) -> Vec<Vec<u8>> {
    let issuer = parent.issuer.as_ref().expect("the parent's issuer");
    std::iter::once(sign_issuer_cert(issuer, csr, name).expect("issuer signed"))
        .chain(chain_above_leaf(parent, issuer))
        .collect()
}

#[tokio::test]
async fn children_keep_their_relay_through_its_new_issuer_key_and_leave_the_old_at_the_finish() {
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let edge = join(&eu, "edge", Role::Agent);
    let deep = join(&eu, "deep", Role::Relay);
    let leaf = join(&deep, "leaf", Role::Agent);
    let old_key =
        public_key_sha256(&eu.issuer.as_ref().expect("eu's issuer").cert_der).expect("a key");

    assert!(new_issuer_request(&root).expect("no error").is_none());
    let request = new_issuer_request(&eu)
        .expect("a request")
        .expect("a relay's");
    let root_issuer = root.issuer.as_ref().expect("the root's issuer");
    let renewal = std::iter::once(renewal_by(root_issuer, &eu)[0].clone())
        .chain(chain_above_leaf(&root, root_issuer))
        .collect();
    let during_ca = public_key_sha256(&root.ca_cert_der).expect("the CA's key");
    assert!(
        rotated_identity(
            &eu,
            renewal_by(root_issuer, &eu),
            None,
            request.key_der.clone(),
            during_ca,
            &[]
        )
        .is_err(),
        "the new key must come signed"
    );
    let rotated = rotated_identity(
        &eu,
        renewal,
        Some(issuer_chain(&root, &request.csr_der, "eu")),
        request.key_der,
        during_ca,
        &[],
    )
    .expect("rotated");
    let new_issuer = rotated.issuer.as_ref().expect("the new issuer");
    let new_key = public_key_sha256(&new_issuer.cert_der).expect("a key");
    assert_ne!(new_key, old_key);
    assert_eq!(
        rotated
            .previous_issuer
            .as_ref()
            .map(|previous| previous.during_ca),
        Some(during_ca)
    );

    // Children the old key signed keep their parent, which serves them a
    // certificate the new key signed, through the cross-signed issuer.
    shake(&rotated, &edge)
        .await
        .expect("the old child connects");
    shake(&rotated, &deep)
        .await
        .expect("the old relay child connects");

    // They renew through the new key, which the chain their parent served
    // vouches for (signed by the old one); nothing else does.
    let served = server_chain(&rotated).expect("the served chain");
    let error = renewed_identity(&edge, renewal_by(new_issuer, &edge))
        .expect_err("another key, and no word from the old one");
    assert!(error.to_string().contains("another issuer"), "{error}");
    let edge_renewed =
        renewed_through(&edge, renewal_by(new_issuer, &edge), &served).expect("renewed");
    shake(&rotated, &edge_renewed)
        .await
        .expect("the renewed child connects");

    // A relay child's issuer, which the old key signed, is signed again.
    let renewal = renewal_by(new_issuer, &deep);
    assert!(parent_rekeyed(&deep, &renewal));
    assert!(!parent_rekeyed(&deep, &deep.tls_chain_der));
    let csr = issuer_renewal_request(&deep)
        .expect("a request")
        .expect("a relay's");
    let deep_renewed = resigned_identity(
        &deep,
        renewal,
        issuer_chain(&rotated, &csr, "deep"),
        &served,
    )
    .expect("signed again, issuer too");
    assert!(!parent_rekeyed(
        &deep_renewed,
        &renewal_by(new_issuer, &deep)
    ));
    shake(&rotated, &deep_renewed)
        .await
        .expect("the renewed relay child connects");
    shake(&deep_renewed, &leaf)
        .await
        .expect("below it, nothing changes");
    let deep_issuer = deep_renewed.issuer.as_ref().expect("deep's issuer");
    let leaf_renewed = renewed_identity(&leaf, renewal_by(deep_issuer, &leaf)).expect("renewed");
    shake(&deep_renewed, &leaf_renewed)
        .await
        .expect("a grandchild renews through the new chain");

    // The finish: the old key is gone; what it signed opens nothing.
    let finished = without_previous_issuer(&rotated);
    shake(&finished, &edge_renewed)
        .await
        .expect("renewed children stay");
    shake(&finished, &deep_renewed)
        .await
        .expect("renewed relay children stay");
    let refused = shake(&finished, &edge).await.expect_err("refused");
    assert!(refused.contains("another relay may be posing"), "{refused}");
}

#[tokio::test]
async fn a_child_relay_cannot_pass_for_its_parent_with_the_parent_s_old_key() {
    // deep's issuer, which eu's key signed, is a CA certificate too, but
    // under deep's name: it does not make deep eu's successor.
    let root = root();
    let eu = join(&root, "eu", Role::Relay);
    let edge = join(&eu, "edge", Role::Agent);
    let deep = join(&eu, "deep", Role::Relay);
    let posing = Identity {
        name: "eu".into(),
        ..join(&deep, "eu", Role::Relay)
    };
    let refused = shake(&posing, &edge).await.expect_err("refused");
    assert!(refused.contains("another relay may be posing"), "{refused}");
}
