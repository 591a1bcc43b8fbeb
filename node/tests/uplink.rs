//! The child side of a link: given several addresses of its parent, the
//! uplink dials them all and keeps one that answers; a dead address costs no
//! more than the dial timeout.

use std::net::{SocketAddr, UdpSocket};

use relaymesh_node::config::ParentConfig;
use relaymesh_node::pki;
use relaymesh_node::transport::uplink::{connect_nearest, Endpoints, CONNECT_TIMEOUT};

#[tokio::test]
async fn the_uplink_keeps_the_address_that_answers() -> anyhow::Result<()> {
    let mesh = pki::create_mesh("root", &["127.0.0.1".into()])?;
    let server = quinn::Endpoint::server(
        pki::quic_server_config(&mesh.identity)?,
        "127.0.0.1:0".parse()?,
    )?;
    let live = server.local_addr()?;
    // A socket that never answers: the dial there never completes. It stays
    // bound for the whole test, so no other socket can take its port.
    let silent = UdpSocket::bind("127.0.0.1:0")?;
    let dead: SocketAddr = silent.local_addr()?;
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Some(incoming) = server.accept().await {
            if let Ok(connection) = incoming.await {
                open.push(connection);
            }
        }
    });
    let parent = ParentConfig {
        name: "root".into(),
        addresses: vec![dead.to_string(), live.to_string()],
    };
    // A joining node's client: no certificate, the CA pinned.
    let client = pki::quic_join_client_config(
        pki::sha256(&mesh.identity.ca_cert_der),
        pki::public_key_sha256(&mesh.identity.ca_cert_der)?,
    )?;
    // The live address's connection comes back while the dead address's
    // attempt is still under way: a dial does not wait for the slowest
    // address (it once waited for every attempt, so the dead one's timeout).
    let (connection, address) = tokio::time::timeout(
        CONNECT_TIMEOUT / 2,
        connect_nearest(&parent, &client, &mut Endpoints::default()),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the dial waited for the address that never answers"))??;
    assert_eq!(address, live);
    assert!(
        connection.close_reason().is_none(),
        "the kept connection is open"
    );

    // With only the dead address, the error says so.
    let parent = ParentConfig {
        name: "root".into(),
        addresses: vec![dead.to_string()],
    };
    let error = connect_nearest(&parent, &client, &mut Endpoints::default())
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(error.contains("timed out"), "{error}");
    drop(silent);
    Ok(())
}

#[test]
fn parent_addresses_are_replaced_durably() -> anyhow::Result<()> {
    use relaymesh_node::config::NodeConfig;
    use relaymesh_node::store::Store;
    let dir = tempfile::tempdir()?;
    let mesh = pki::create_mesh("root", &["127.0.0.1".into()])?;
    let store = Store::open(dir.path())?;
    let config = NodeConfig {
        listen: None,
        advertise: vec![],
        api_listen: None,
        parent: None,
        labels: Default::default(),
        capacity: Default::default(),
    };
    store.initialize(&mesh.identity, &config, 7)?;
    assert!(
        !store.set_parent_addresses(vec!["a:1".into()])?,
        "the root has no parent"
    );
    let child = NodeConfig {
        parent: Some(ParentConfig {
            name: "root".into(),
            addresses: vec!["old:1".into()],
        }),
        ..config
    };
    store.set_config(&child)?;
    assert!(store.set_parent_addresses(vec!["a:1".into(), "b:2".into()])?);
    let addresses = store.config()?.and_then(|c| c.parent).map(|p| p.addresses);
    assert_eq!(addresses, Some(vec!["a:1".to_string(), "b:2".to_string()]));
    Ok(())
}
