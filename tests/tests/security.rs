//! Refusals: every bad join and every bad link is refused with a clear error,
//! and the refusing root's store does not change by a byte.

use anyhow::Context as _;
use relaymesh_node::config::ParentConfig;
use relaymesh_node::store::Store;
use relaymesh_node::transport::uplink::{connect_nearest, open_control, Endpoints};
use relaymesh_node::transport::{expect_frame, LinkError};
use relaymesh_node::{pki, token};
use relaymesh_protocol::message::{DownMessage, Hello};
use relaymesh_protocol::{ErrorCode, PROTOCOL_VERSION};
use relaymesh_root::client::{Client, ClientError};
use relaymesh_root::kubeconfig;
use relaymesh_tests::{binary, free_tcp_port, free_udp_port, run_ok, wait_for, Mesh};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn refused_joins_and_links_change_nothing_at_the_root() -> anyhow::Result<()> {
    let (mesh, mut root) = Mesh::init()?;
    let expired = mesh.token("relay", "late", None, "1s")?;
    let once = mesh.token("relay", "once", None, "10m")?;
    let agent = mesh.token("agent", "edge-1", None, "10m")?;
    let first = mesh.join("once", &once)?;
    assert!(first.status.success(), "{}", stderr(&first));

    // A second mesh, never started: its CA signs certificates the first
    // mesh must not accept.
    let other_dir = mesh.dir.path().join("other");
    run_ok(
        std::process::Command::new(binary("relay")?)
            .arg("init")
            .arg("--data-dir")
            .arg(&other_dir)
            .args(["--name", "other"])
            .args(["--listen", &format!("127.0.0.1:{}", free_udp_port()?)])
            .args(["--api-listen", &format!("127.0.0.1:{}", free_tcp_port()?)]),
    )?;
    let other_identity = Store::open(&other_dir)?
        .identity()?
        .context("the other mesh has an identity")?;

    root.stop()?;
    let before = mesh.inspect("root")?["digest"].clone();
    root = mesh.start("root")?;
    mesh.wait_for_api()?;
    // The 1s token is valid through its last whole second: wait until the
    // clock has passed the expiry the token itself carries.
    let not_after = token::read_unverified(&expired)?.not_after_unix;
    wait_for(
        "the 1s token to expire",
        std::time::Duration::from_secs(10),
        || {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            Ok((now.as_secs() > not_after).then_some(()))
        },
    )?;

    let refused = mesh.join("late", &expired)?;
    assert!(!refused.status.success(), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("token expired"),
        "{}",
        stderr(&refused)
    );

    let refused = mesh.join_in("once-again", "once", &once)?;
    assert!(!refused.status.success(), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("already used"),
        "{}",
        stderr(&refused)
    );

    let refused = mesh.join("edge-1", &agent)?;
    assert!(!refused.status.success(), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("token is for role agent, not relay"),
        "{}",
        stderr(&refused)
    );

    let claims = token::read_unverified(&once)?;
    let parent = ParentConfig {
        name: claims.parent.clone(),
        addresses: claims.parent_addresses.clone(),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let hello = Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            resume: None,
        };
        // No certificate: the handshake succeeds (joining needs that), but a
        // control stream is refused.
        let anonymous = pki::quic_join_client_config(claims.ca_sha256, claims.parent_issuer_key)?;
        let (connection, _) =
            connect_nearest(&parent, &anonymous, &mut Endpoints::default()).await?;
        match open_control(&connection, hello.clone()).await {
            Err(LinkError::Refused(refusal)) => {
                assert_eq!(refusal.code, ErrorCode::Unauthenticated);
                assert!(refusal.message.contains("no certificate"), "{refusal}");
            }
            other => panic!("an anonymous control stream must be refused: {other:?}"),
        }
        // An opening frame that announces 1 MiB, before any certificate:
        // refused at once for its length (the limit is 64 KiB), so a stranger
        // cannot make the relay allocate and wait for it.
        let (mut send, mut recv) = connection.open_bi().await?;
        send.write_all(&(1u32 << 20).to_be_bytes()).await?;
        let reply = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            expect_frame::<DownMessage>(&mut recv),
        )
        .await??;
        match reply {
            DownMessage::Refused(refusal) => {
                assert_eq!(refusal.code, ErrorCode::Malformed);
                assert!(refusal.message.contains("limit of 65536"), "{refusal}");
            }
            other => panic!("an oversized opening frame must be refused: {other:?}"),
        }
        // A certificate from another mesh's CA: the TLS handshake fails.
        let foreign = pki::quic_client_config(&other_identity)?;
        match connect_nearest(&parent, &foreign, &mut Endpoints::default()).await {
            Err(error) => assert!(
                error.to_string().contains("certificate")
                    || error.to_string().contains("UnknownIssuer")
                    || error.to_string().contains("handshake"),
                "unclear error for a foreign certificate: {error}"
            ),
            Ok(_) => panic!("a certificate from another CA must be refused"),
        }
        // The API: a foreign client certificate and no certificate get 401.
        let admin = kubeconfig::load_file(&mesh.kubeconfig(), None)?;
        let other_admin = kubeconfig::load_file(&other_dir.join("admin.kubeconfig"), None)?;
        let mut foreign_client = admin.clone();
        foreign_client.cert_pem = other_admin.cert_pem.clone();
        foreign_client.key_pem = other_admin.key_pem.clone();
        let mut anonymous_client = admin.clone();
        anonymous_client.cert_pem = None;
        anonymous_client.key_pem = None;
        for credentials in [foreign_client, anonymous_client] {
            match Client::new(&credentials)?.relays().await {
                Err(ClientError::Api { code: 401, .. }) => {}
                other => panic!("expected 401 Unauthorized, got {other:?}"),
            }
        }
        anyhow::Ok(())
    })?;

    root.stop()?;
    let after = mesh.inspect("root")?["digest"].clone();
    assert_eq!(before, after, "a refused request changed the root's store");
    Ok(())
}

#[test]
fn data_directories_are_private_and_a_loose_one_is_refused() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &std::path::Path| -> anyhow::Result<u32> {
        Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
    };
    let (mesh, mut root) = Mesh::init()?;
    root.stop()?;
    let data_dir = mesh.data_dir("root");
    // The mesh CA's key and the admin's key live in these.
    assert_eq!(mode(&data_dir)?, 0o700);
    assert_eq!(mode(&data_dir.join("store"))?, 0o700);
    assert_eq!(mode(&data_dir.join("store").join("db"))?, 0o600);
    assert_eq!(mode(&mesh.kubeconfig())?, 0o600);

    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755))?;
    let refused = std::process::Command::new(binary("relay")?)
        .arg("run")
        .arg("--data-dir")
        .arg(&data_dir)
        .output()?;
    assert!(!refused.status.success(), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("mode 0755") && stderr(&refused).contains("chmod -R go-rwx"),
        "{}",
        stderr(&refused)
    );

    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o700))?;
    let _root = mesh.start("root")?;
    mesh.wait_for_api()?;
    Ok(())
}
