//! The `relayctl` binary against a running API: what it prints on stdout
//! and stderr, and how it fails.

use std::path::{Path, PathBuf};
use std::process::Output;

use relaymesh_protocol::BundleId;
use relaymesh_root::kubeconfig;
use serde_json::Value;

#[path = "support/pki.rs"]
mod pki;
#[path = "support/server.rs"]
mod server;

use pki::Leaf;
use server::Server;

/// Writes a kubeconfig for `leaf` at `server_url` into `directory`.
fn write_kubeconfig(directory: &Path, server: &Server, server_url: &str, leaf: &Leaf) -> PathBuf {
    let path = directory.join(format!("{}.kubeconfig", server.address.port()));
    let text = kubeconfig::admin_kubeconfig(
        "relaymesh",
        server_url,
        &server.pki.ca_pem,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    kubeconfig::write_private(&path, &text).expect("written");
    path
}

/// Runs relayctl with `args`, finding the kubeconfig through `KUBECONFIG`.
async fn relayctl(kubeconfig: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_relayctl"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("relayctl runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn token_tree_and_bundle() {
    let server = Server::start().await;
    let directory = tempfile::tempdir().expect("a temporary directory");
    let config = write_kubeconfig(
        directory.path(),
        &server,
        &server.url(""),
        &server.pki.admin,
    );

    let output = relayctl(
        &config,
        &[
            "token",
            "create",
            "--role",
            "relay",
            "--name",
            "eu-west-2",
            "--parent",
            "eu",
            "--ttl",
            "30m",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "token-for-eu-west-2\n");
    assert!(
        text(&output.stderr).contains("expires at"),
        "{}",
        text(&output.stderr)
    );

    let output = relayctl(&config, &["tree"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let tree = text(&output.stdout);
    assert!(tree.starts_with("root "), "{tree}");
    assert!(tree.contains("└─ us "), "{tree}");
    assert!(tree.contains("(since 2026-11-21T23:50:00Z)"), "{tree}");

    let output = relayctl(&config, &["tree", "-o", "json"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["name"], "root");
    assert_eq!(json["children"][0]["name"], "eu");

    let bundle = directory.path().join("demo.bin");
    std::fs::write(&bundle, b"demo bytes").expect("written");
    let bundle_arg = bundle.to_string_lossy().into_owned();
    let output = relayctl(&config, &["bundle", "push", &bundle_arg, "--name", "demo"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        format!("bundle demo {} (10 bytes)\n", BundleId::of(b"demo bytes"))
    );
    server.stop().await;
}

#[tokio::test]
async fn failures_are_one_clear_line() {
    let server = Server::start().await;
    let directory = tempfile::tempdir().expect("a temporary directory");

    let relay = write_kubeconfig(
        directory.path(),
        &server,
        &server.url(""),
        &server.pki.stranger,
    );
    let output = relayctl(&relay, &["tree"]).await;
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot list the tree's nodes: Error from server (Forbidden): "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let closed = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().expect("an address").port()
    );
    drop(listener);
    let unreachable_directory = directory.path().join("unreachable");
    std::fs::create_dir(&unreachable_directory).expect("a directory");
    let config = write_kubeconfig(&unreachable_directory, &server, &closed, &server.pki.admin);
    let output = relayctl(
        &config,
        &["token", "create", "--role", "agent", "--name", "e"],
    )
    .await;
    assert!(!output.status.success());
    assert_eq!(
        text(&output.stderr),
        format!("error: cannot create the join token: cannot reach the root at {closed}: connection refused\n")
    );
    assert!(output.stdout.is_empty());

    let missing = directory.path().join("missing.kubeconfig");
    let output = relayctl(&missing, &["tree"]).await;
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot load the kubeconfig: "),
        "{stderr}"
    );
    server.stop().await;
}

#[test]
fn help_and_version() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_relayctl"))
        .arg("--help")
        .output()
        .expect("relayctl runs");
    let help = text(&output.stdout);
    assert!(output.status.success());
    for expected in [
        "token",
        "tree",
        "bundle",
        "--kubeconfig",
        "--context",
        "Examples:",
    ] {
        assert!(help.contains(expected), "{expected}: {help}");
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_relayctl"))
        .arg("--version")
        .output()
        .expect("relayctl runs");
    assert_eq!(
        text(&output.stdout),
        format!("relayctl {}\n", env!("CARGO_PKG_VERSION"))
    );
}
