//! Which side of a link keeps it alive while idle: the child, unless its
//! parent ends idle links sooner than the child's keep-alive comes.

use std::time::Duration;

use relaymesh_protocol::Role;

use super::tests::{handshake, join, root, serve_with, Server};
use super::{quic_client_config, quic_server_config, quic_server_config_idle};
use crate::identity::Identity;

/// A child's and its parent's ends of one link to `mesh`'s root served
/// with `server`, and the listener, kept for the link's life.
async fn link(
    mesh: &Identity,
    server: quinn::ServerConfig,
) -> (quinn::Connection, quinn::Connection, Server) {
    let child = join(mesh, "eu", Role::Relay);
    let server = serve_with(server);
    let config = quic_client_config(&child).expect("client config");
    let (child_end, parent_end) = handshake(&server, config, "root").await;
    (
        child_end.expect("the child's handshake"),
        parent_end.expect("the parent's handshake"),
        server,
    )
}

/// The keep-alives `end` sent: its PING frames but the path MTU probes,
/// which are PINGs too.
fn keep_alives(end: &quinn::Connection) -> u64 {
    let stats = end.stats();
    stats
        .frame_tx
        .ping
        .saturating_sub(stats.path.sent_plpmtud_probes)
}

/// Waits (up to a minute) until `end` has sent `pings` keep-alives.
async fn pinged(end: &quinn::Connection, pings: u64) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while keep_alives(end) < pings {
            assert!(end.close_reason().is_none(), "the link ended while idle");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("keep-alives sent");
}

// Counted from a first keep-alive on: by then the handshake's frames are
// acknowledged, so no loss probe (a PING too) can come from a slow test
// machine; afterwards the quiet side sends only acknowledgements, which
// nothing probes for.

#[tokio::test]
async fn a_child_keeps_an_idle_link_to_its_parent_alive_alone() {
    let mesh = root();
    let (child_end, parent_end, _server) =
        link(&mesh, quic_server_config(&mesh).expect("server config")).await;
    pinged(&child_end, 1).await;
    let parent_before = keep_alives(&parent_end);
    pinged(&child_end, 3).await;
    assert_eq!(
        keep_alives(&parent_end),
        parent_before,
        "a parent's own pings would double what each idle child costs it"
    );
}

#[tokio::test]
async fn a_parent_that_ends_idle_links_sooner_keeps_them_alive_itself() {
    let mesh = root();
    let idle = Duration::from_millis(1500);
    let (child_end, parent_end, _server) = link(
        &mesh,
        quic_server_config_idle(&mesh, idle).expect("server config"),
    )
    .await;
    pinged(&parent_end, 2).await;
    let child_before = keep_alives(&child_end);
    // Twelve more a third of the idle timeout apart: the link outlived the
    // timeout four times over, and the child's own keep-alive (a third of
    // its 15 s) would have come in between.
    pinged(&parent_end, 14).await;
    assert!(child_end.close_reason().is_none(), "the child's end is up");
    assert_eq!(
        keep_alives(&child_end),
        child_before,
        "the parent's pings restart the child's keep-alive timer"
    );
}

#[tokio::test]
async fn a_child_asks_its_parent_to_acknowledge_its_packets_at_once() {
    let mesh = root();
    let (_child_end, parent_end, _server) =
        link(&mesh, quic_server_config(&mesh).expect("server config")).await;
    tokio::time::timeout(Duration::from_secs(60), async {
        while parent_end.stats().frame_rx.ack_frequency == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("an ACK_FREQUENCY frame reaches the parent");
}
