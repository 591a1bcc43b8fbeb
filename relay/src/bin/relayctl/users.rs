//! `relayctl user create|list|revoke`: users of the root's API, with
//! client certificates from the API CA.

use std::time::Duration;

use anyhow::Context as _;
use clap::Subcommand;
use relaymesh_node::pki;
use relaymesh_root::client::Client;
use relaymesh_root::kubeconfig;

use super::{columns, structured, Format};

#[derive(Debug, Subcommand)]
pub(super) enum UserCommand {
    /// Write a kubeconfig for a new user with a client certificate from the API CA.
    ///
    /// The key is made here and never sent; the root signs a certificate
    /// naming the user (CN) and group (O). viewers may get, list and watch;
    /// operators may also create, change and delete workloads and placements;
    /// admins may also issue join tokens and user certificates. Only admins
    /// may create users.
    Create {
        /// The user's name (a DNS label), as audit log lines show it.
        name: String,
        /// The user's group: viewers, operators or admins (the default
        /// ClusterRoleBindings), or any other DNS-1123 label that a
        /// RoleBinding or ClusterRoleBinding names (docs/security.md).
        #[arg(long)]
        group: String,
        /// Where to write the kubeconfig (mode 0600); - for standard output.
        #[arg(short, long, value_name = "FILE|-")]
        output: String,
        /// How long the certificate stays valid (at most 366d).
        #[arg(long, default_value = "30d", value_parser = humantime::parse_duration)]
        valid_for: Duration,
    },
    /// List the users the root issued certificates to or revoked, with
    /// their groups and state (Valid, Expired, Revoked).
    List {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Revoke a user: the root's API refuses every certificate naming it
    /// from now on (401), also after a restart, and never issues the name
    /// again. Only admins may; an admin cannot revoke itself.
    Revoke {
        /// The user's name.
        name: String,
    },
}

/// Runs `relayctl user COMMAND`; `credentials` are the kubeconfig's, whose
/// server a new user's kubeconfig names.
pub(super) async fn run(
    client: &Client,
    credentials: &kubeconfig::ClientCredentials,
    command: UserCommand,
) -> anyhow::Result<()> {
    match command {
        UserCommand::Create {
            name,
            group,
            output,
            valid_for,
        } => {
            relaymesh_root::api::check_group(&group).map_err(anyhow::Error::msg)?;
            let group = group.as_str();
            let key = pki::new_user_key(&name).context("cannot make the user's key")?;
            let csr_pem = pki::der_to_pem(&key.csr_der, "CERTIFICATE REQUEST");
            let (cert_pem, ca_pem) = client
                .create_user_certificate(&name, group, &csr_pem, valid_for)
                .await
                .with_context(|| format!("cannot create user {name:?}"))?;
            let text = kubeconfig::admin_kubeconfig(
                &format!("relaymesh-{name}"),
                &credentials.server,
                &ca_pem,
                &cert_pem,
                &pki::der_to_pem(&key.key_der, "PRIVATE KEY"),
            );
            if output == "-" {
                print!("{text}");
            } else {
                kubeconfig::write_private(std::path::Path::new(&output), &text)
                    .with_context(|| format!("cannot write {output}"))?;
                eprintln!("kubeconfig for {name} ({group}) written to {output}");
            }
        }
        UserCommand::List { output } => {
            let users = client.users().await.context("cannot list users")?;
            match output {
                Format::Json | Format::Yaml => {
                    print!("{}", structured(output, &users)?.unwrap_or_default())
                }
                Format::Text => print!("{}", user_table(&users)),
            }
        }
        UserCommand::Revoke { name } => {
            client
                .revoke_user(&name)
                .await
                .with_context(|| format!("cannot revoke user {name:?}"))?;
            println!("user {name} revoked: the API refuses its certificates");
        }
    }
    Ok(())
}

/// `relayctl user list` as a table.
fn user_table(users: &[serde_json::Value]) -> String {
    let rows = users.iter().map(|user| {
        let text = |value: &serde_json::Value| value.as_str().unwrap_or("-").to_string();
        let groups: Vec<&str> = user["spec"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        vec![
            text(&user["metadata"]["name"]),
            if groups.is_empty() {
                "-".to_string()
            } else {
                groups.join(",")
            },
            text(&user["status"]["state"]),
            text(&user["status"]["expirationTimestamp"]),
            text(&user["status"]["revokedAt"]),
        ]
    });
    columns(&["NAME", "GROUPS", "STATE", "EXPIRES", "REVOKED"], rows)
}
