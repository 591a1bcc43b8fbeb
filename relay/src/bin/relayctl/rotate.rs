//! `relayctl rotate mesh-ca|token-key|api-ca|api-cert`: rotating what the
//! mesh's and the API's trust rests on (docs/security.md, "Rotation").

use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Subcommand;
use relaymesh_root::client::Client;
use serde_json::Value;

use super::{structured, Format};

#[derive(Debug, Subcommand)]
pub(super) enum RotateCommand {
    /// The mesh CA and every relay's issuer key, on which every link's
    /// trust rests: start, finish, or show a rotation.
    ///
    /// `start` makes a new mesh CA, cross-signed by the old one, and signs
    /// with it from now on; every node trusts both, every relay makes a new
    /// issuer key (serving its children through it, cross-signed by the
    /// old one), and every certificate is signed again through the new CA
    /// and keys as the tree renews (nothing reaches any cluster). `status`
    /// shows which nodes have not moved over yet (their chain does not
    /// reach the new CA, they do not trust exactly the CAs the root names,
    /// their parent's new key has not signed them, or a relay's issuer has
    /// not rotated). `finish` trusts the new CA alone and retires the old
    /// keys; it is refused while a node is pending (an offline one would
    /// need a new token), unless --force.
    MeshCa(TrustArgs),
    /// The key that signs join tokens and the root's decisions: start,
    /// finish, or show a rotation.
    ///
    /// `start` makes a new key; the root keeps signing with the old one and
    /// every node accepts both. `status` shows which nodes do not accept
    /// both yet. `finish` signs with the new key alone and signs every
    /// decision again (nothing is applied again), and is refused while a
    /// node is pending unless --force. Tokens made before `finish` are
    /// refused afterwards: make new ones.
    TokenKey(TrustArgs),
    /// The API CA, which signs users' certificates and the API's own.
    ///
    /// `start` makes a new API CA: it signs new users (`relayctl user
    /// create` writes kubeconfigs that trust both CAs), clients of both
    /// are accepted, and the API keeps serving the old CA's certificate, so
    /// every kubeconfig keeps working. Give everyone a new kubeconfig, then
    /// `finish`: the API serves a certificate of the new CA and accepts its
    /// clients only; kubeconfigs made before `start` stop working.
    ApiCa {
        /// start, finish or status.
        #[arg(value_enum)]
        action: ApiCaAction,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// The API's serving certificate: replace it now, or show it.
    ///
    /// The root also replaces it on its own when two thirds of its year
    /// have passed. The API CA signs it, so kubeconfigs keep working;
    /// connections already open keep the old one.
    ApiCert {
        /// now (a new key and certificate for the same hosts) or status.
        #[arg(value_enum)]
        action: ApiCertAction,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
}

/// What `relayctl rotate mesh-ca|token-key` takes.
#[derive(Debug, clap::Args)]
pub(super) struct TrustArgs {
    /// start, finish or status.
    #[arg(value_enum)]
    action: TrustAction,
    /// finish although some nodes have not moved over (they need new
    /// join tokens afterwards).
    #[arg(long)]
    force: bool,
    /// After start or finish, wait until every node has moved over.
    #[arg(long)]
    wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// Runs `relayctl rotate WHAT`.
pub(super) async fn run(client: &Client, what: RotateCommand) -> anyhow::Result<()> {
    match what {
        RotateCommand::MeshCa(args) => trust_command(client, Trusted::MeshCa, args).await?,
        RotateCommand::TokenKey(args) => trust_command(client, Trusted::TokenKey, args).await?,
        RotateCommand::ApiCa { action, output } => {
            let object = api_ca(client, action).await?;
            match structured(output, &object)? {
                Some(text) => print!("{text}"),
                None => print!("{}", render_api_ca(&object)),
            }
        }
        RotateCommand::ApiCert { action, output } => {
            let object = api_cert(client, action).await?;
            match structured(output, &object)? {
                Some(text) => print!("{text}"),
                None => print!("{}", render_api_cert(&object)),
            }
        }
    }
    Ok(())
}

/// `relayctl rotate mesh-ca|token-key ...`.
async fn trust_command(client: &Client, trusted: Trusted, args: TrustArgs) -> anyhow::Result<()> {
    let object = trust(
        client,
        trusted,
        args.action,
        args.force,
        args.wait,
        args.timeout,
    )
    .await?;
    match structured(args.output, &object)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render(&object)),
    }
    Ok(())
}

/// What `relayctl rotate api-ca` does.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum ApiCaAction {
    /// Make a new API CA that signs new users; accept clients of both.
    Start,
    /// Serve the new CA's certificate and accept its clients only.
    Finish,
    /// Show where the API CA stands.
    Status,
}

/// Runs `relayctl rotate api-ca ACTION`.
pub(super) async fn api_ca(client: &Client, action: ApiCaAction) -> anyhow::Result<Value> {
    match action {
        ApiCaAction::Start => client.rotate_api_ca("Start").await,
        ApiCaAction::Finish => client.rotate_api_ca("Finish").await,
        ApiCaAction::Status => client.api_ca_rotation().await,
    }
    .context("the root refused")
}

/// The text `relayctl rotate api-ca` prints.
pub(super) fn render_api_ca(object: &Value) -> String {
    let status = &object["status"];
    let field = |name: &str| status[name].as_str().unwrap_or("-").to_string();
    format!(
        "phase:       {}\nsigning CA:  {}\nretiring CA: {}\nserving:     {}\n",
        field("phase"),
        field("signingCA"),
        field("retiringCA"),
        field("servingCertificate")
    )
}

/// What `relayctl rotate api-cert` does.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum ApiCertAction {
    /// Serve a new key and certificate from the next handshake on.
    Now,
    /// Show the certificate served now.
    Status,
}

/// Runs `relayctl rotate api-cert ACTION`.
pub(super) async fn api_cert(client: &Client, action: ApiCertAction) -> anyhow::Result<Value> {
    match action {
        ApiCertAction::Now => client.rotate_api_cert().await,
        ApiCertAction::Status => client.api_cert_rotation().await,
    }
    .context("the root refused")
}

/// The text `relayctl rotate api-cert` prints.
pub(super) fn render_api_cert(object: &Value) -> String {
    let status = &object["status"];
    let field = |name: &str| status[name].as_str().unwrap_or("?").to_string();
    format!(
        "sha256:     {}\nnot before: {}\nnot after:  {}\n",
        field("sha256"),
        field("notBefore"),
        field("notAfter")
    )
}

/// What `relayctl rotate mesh-ca|token-key` does.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum TrustAction {
    /// Trust a new one beside the old one (the mesh CA also signs with it).
    Start,
    /// Trust and sign with the new one alone.
    Finish,
    /// Show where it stands and which nodes have not moved over.
    Status,
}

/// What is rotated: the mesh CA or the token-signing key.
#[derive(Debug, Clone, Copy)]
pub(super) enum Trusted {
    /// `relayctl rotate mesh-ca`.
    MeshCa,
    /// `relayctl rotate token-key`.
    TokenKey,
}

impl Trusted {
    /// The API resource and kind.
    fn resource(self) -> (&'static str, &'static str) {
        match self {
            Self::MeshCa => ("meshcarotations", "MeshCARotation"),
            Self::TokenKey => ("tokenkeyrotations", "TokenKeyRotation"),
        }
    }
}

/// Runs `relayctl rotate mesh-ca|token-key ACTION`.
pub(super) async fn trust(
    client: &Client,
    trusted: Trusted,
    action: TrustAction,
    force: bool,
    wait: bool,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let (resource, kind) = trusted.resource();
    let object = match action {
        TrustAction::Status => client.trust_rotation(resource).await,
        TrustAction::Start => client.rotate_trust(resource, kind, "Start", false).await,
        TrustAction::Finish => client.rotate_trust(resource, kind, "Finish", force).await,
    }
    .context("the root refused")?;
    if !wait || matches!(action, TrustAction::Status) {
        return Ok(object);
    }
    wait_moved_over(client, resource, timeout).await
}

/// Polls the root until no node is pending.
async fn wait_moved_over(
    client: &Client,
    resource: &str,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let object = client
            .trust_rotation(resource)
            .await
            .context("cannot read the rotation")?;
        if object["status"]["nodes"]["pending"].as_u64() == Some(0) {
            return Ok(object);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "after {}, {}",
                humantime::format_duration(timeout),
                render(&object).trim_end()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The text `relayctl rotate mesh-ca|token-key` prints of a
/// `MeshCARotation` or a `TokenKeyRotation`.
pub(super) fn render(object: &Value) -> String {
    let status = &object["status"];
    let list = |value: &Value| {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let nodes = &status["nodes"];
    let pending = nodes["pending"].as_u64().unwrap_or(0);
    // A mesh CA's status says which CAs are trusted, a token key's which
    // keys are accepted.
    let (named, names) = match status.get("trusted") {
        Some(trusted) => ("trusted: ", trusted),
        None => ("accepted:", &status["accepted"]),
    };
    let mut text = format!(
        "phase:    {}\nsigner:   {}\n{named} {}\nnodes:    {} of {} moved over\n",
        status["phase"].as_str().unwrap_or("?"),
        status["signer"].as_str().unwrap_or("?"),
        list(names),
        nodes["movedOver"].as_u64().unwrap_or(0),
        nodes["total"].as_u64().unwrap_or(0),
    );
    if pending > 0 {
        let names = list(&nodes["pendingNames"]);
        let shown = nodes["pendingNames"].as_array().map_or(0, Vec::len) as u64;
        let more = pending.saturating_sub(shown);
        text.push_str(&format!("pending:  {names}"));
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_names_what_is_pending() {
        let object = serde_json::json!({"status": {
            "phase": "Rotating", "signer": "aa", "trusted": ["bb", "aa"],
            "nodes": {"total": 3, "movedOver": 1, "pending": 2, "pendingNames": ["x1", "x2"]}
        }});
        let text = render(&object);
        assert!(text.contains("phase:    Rotating"), "{text}");
        assert!(text.contains("trusted:  bb, aa"), "{text}");
        assert!(text.contains("1 of 3 moved over"), "{text}");
        assert!(text.contains("pending:  x1, x2\n"), "{text}");
    }
}
