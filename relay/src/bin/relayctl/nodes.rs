//! `relayctl revoke` and `relayctl move`: taking a node out of the tree
//! for good, and moving one under another relay.

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_root::client::{settle, Client};

use super::{columns, structured, waits, Format};

/// `relayctl revoke --list`.
pub(super) async fn revocations(client: &Client, output: Format) -> anyhow::Result<()> {
    let revocations = client
        .revocations()
        .await
        .context("cannot list revocations")?;
    match output {
        Format::Json | Format::Yaml => {
            print!("{}", structured(output, &revocations)?.unwrap_or_default())
        }
        Format::Text => print!("{}", revocation_table(&revocations)),
    }
    Ok(())
}

/// `relayctl revoke NODE`.
pub(super) async fn revoke(client: &Client, node: &str, output: Format) -> anyhow::Result<()> {
    let revoked = client
        .revoke_node(node)
        .await
        .with_context(|| format!("cannot revoke {node:?}"))?;
    match output {
        Format::Json | Format::Yaml => {
            print!("{}", structured(output, &revoked)?.unwrap_or_default())
        }
        Format::Text => {
            let status = &revoked["status"];
            let list = |key: &str| {
                let names: Vec<&str> = status[key]
                    .as_array()
                    .map(|items| items.iter().filter_map(serde_json::Value::as_str).collect())
                    .unwrap_or_default();
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            };
            println!(
                "revoked {node:?} at {}",
                status["revokedAt"].as_str().unwrap_or_default()
            );
            println!("removed from the tree: {}", list("removedFromTree"));
            println!("join tokens revoked with it: {}", list("tokensRevoked"));
        }
    }
    Ok(())
}

/// `relayctl move --list`.
pub(super) async fn moves(client: &Client, output: Format) -> anyhow::Result<()> {
    let moves = client.moves().await.context("cannot list moves")?;
    match output {
        Format::Json | Format::Yaml => {
            print!("{}", structured(output, &moves)?.unwrap_or_default())
        }
        Format::Text => print!("{}", move_table(&moves)),
    }
    Ok(())
}

/// `relayctl move NODE --to RELAY [--wait [--timeout T]]`.
pub(super) async fn move_node(
    client: &Client,
    node: &str,
    to: &str,
    ttl: Duration,
    wait: bool,
    timeout: Duration,
    output: Format,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    let before = waits::heard_if(client, wait).await?;
    let moved = client
        .move_node(node, to, ttl)
        .await
        .with_context(|| format!("cannot move {node:?} to {to:?}"))?;
    let moved = if let Some(before) = before {
        let moved = waits::wait_settled(client, node, timeout).await?;
        waits::wait_statuses(
            client,
            &before,
            settle::Selection::Kept,
            deadline,
            &format!("the move of {node:?}"),
        )
        .await?;
        moved
    } else {
        moved
    };
    match output {
        Format::Json | Format::Yaml => {
            print!("{}", structured(output, &moved)?.unwrap_or_default())
        }
        Format::Text => println!(
            "{node:?}: {} from {:?} to {to:?}",
            moved["status"]["state"].as_str().unwrap_or("Moving"),
            moved["status"]["from"].as_str().unwrap_or_default()
        ),
    }
    Ok(())
}

/// `relayctl revoke --list` as a table.
fn revocation_table(revocations: &[serde_json::Value]) -> String {
    let rows = revocations.iter().map(|revocation| {
        let spec = &revocation["spec"];
        let status = &revocation["status"];
        match spec["node"].as_str() {
            Some(node) => vec![
                "node".to_string(),
                node.to_string(),
                status["revokedAt"].as_str().unwrap_or("-").to_string(),
            ],
            None => vec![
                "token".to_string(),
                format!(
                    "{} (for {})",
                    spec["token"].as_str().unwrap_or("-"),
                    spec["tokenName"].as_str().unwrap_or("-")
                ),
                "-".to_string(),
            ],
        }
    });
    columns(&["WHAT", "NAME", "REVOKED AT"], rows)
}

/// The moves as a table: node, from, to, state, when ordered.
fn move_table(moves: &[serde_json::Value]) -> String {
    let mut out = format!(
        "{:<24} {:<16} {:<16} {:<8} {}\n",
        "NODE", "FROM", "TO", "STATE", "ORDERED"
    );
    for moved in moves {
        let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_string();
        out.push_str(&format!(
            "{:<24} {:<16} {:<16} {:<8} {}\n",
            text(&moved["spec"]["node"]),
            text(&moved["status"]["from"]),
            text(&moved["spec"]["to"]),
            text(&moved["status"]["state"]),
            text(&moved["metadata"]["creationTimestamp"]),
        ));
    }
    out
}
