//! `relayctl token create|list|revoke`: join tokens, with which new relays
//! and agents join the tree.

use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use relaymesh_protocol::Role;
use relaymesh_root::client::Client;

use super::{columns, structured, Format};

#[derive(Debug, Subcommand)]
pub(super) enum TokenCommand {
    /// Issue a single-use join token; prints only the token on stdout.
    Create {
        /// What the joining node will be.
        #[arg(long, value_enum)]
        role: JoinRole,
        /// The joining node's name (a DNS label, unique in the mesh).
        #[arg(long)]
        name: String,
        /// The relay the node must join under. Repeat it to give the node
        /// candidate parents (at most 8, relays below the root): it measures
        /// them all and joins the nearest that admits it, and re-parents to
        /// the next nearest when its parent is silent for longer than its
        /// grace period (`edge-agent run --parent-grace`, `relay run
        /// --parent-grace`; a relay takes its subtree along).
        #[arg(long, value_name = "RELAY")]
        parent: Vec<String>,
        /// How long the token stays valid (at most 24h).
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        ttl: Duration,
    },
    /// List the join tokens the root issued (never their text): id, node, parent, expiry, state.
    ///
    /// STATE is Valid, Used, Expired or Revoked: Used when the node of the
    /// token's name, role and parent reports it joined with this very token
    /// (USED BY names it). IN TREE says whether a node of the token's name
    /// and role is in the tree under the token's parent.
    List {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Revoke a join token by its id (from `token list`): no relay admits anyone with it.
    Revoke {
        /// The token's id: 32 hex digits.
        id: String,
    },
}

/// The role a join token is for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum JoinRole {
    Relay,
    Agent,
}

/// Runs `relayctl token COMMAND`.
pub(super) async fn run(client: &Client, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            role,
            name,
            parent,
            ttl,
        } => {
            let role = match role {
                JoinRole::Relay => Role::Relay,
                JoinRole::Agent => Role::Agent,
            };
            let issued = client
                .create_token(&name, role, &parent, ttl)
                .await
                .context("cannot create the join token")?;
            println!("{}", issued.token);
            let expires = UNIX_EPOCH + Duration::from_secs(issued.expires_unix);
            eprintln!(
                "token for {role} {name:?} expires at {}",
                humantime::format_rfc3339_seconds(expires)
            );
        }
        TokenCommand::List { output } => {
            let tokens = client.tokens().await.context("cannot list join tokens")?;
            match output {
                Format::Json | Format::Yaml => {
                    print!("{}", structured(output, &tokens)?.unwrap_or_default())
                }
                Format::Text => print!("{}", token_table(&tokens)),
            }
        }
        TokenCommand::Revoke { id } => {
            let token = client
                .revoke_token(&id)
                .await
                .with_context(|| format!("cannot revoke join token {id}"))?;
            println!(
                "join token {id} for {} {:?} revoked",
                token["spec"]["role"].as_str().unwrap_or("node"),
                token["spec"]["name"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// `relayctl token list` as a table.
fn token_table(tokens: &[serde_json::Value]) -> String {
    let rows = tokens.iter().map(|token| {
        let field = |path: &[&str]| {
            path.iter()
                .fold(token, |value, key| &value[*key])
                .as_str()
                .unwrap_or("-")
                .to_string()
        };
        let in_tree = if token["status"]["nodeInTree"] == true {
            "yes"
        } else {
            "no"
        };
        vec![
            field(&["metadata", "name"]),
            field(&["spec", "name"]),
            field(&["spec", "role"]),
            field(&["spec", "parent"]),
            field(&["status", "expirationTimestamp"]),
            field(&["status", "state"]),
            field(&["status", "usedBy"]),
            in_tree.to_string(),
        ]
    });
    columns(
        &[
            "ID", "NAME", "ROLE", "PARENT", "EXPIRES", "STATE", "USED BY", "IN TREE",
        ],
        rows,
    )
}
