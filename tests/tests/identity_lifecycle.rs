//! Identity for often-offline fleets, end to end: nodes that were stopped
//! past their certificates' expiry come back without new tokens (renewing
//! within their parent's grace period), a revoked one and one past the
//! grace period do not and their logs say why; `relayctl token list` shows
//! used, expired, revoked and valid tokens; a revoked user's kubectl is
//! refused while another user's still works, after a restart too.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use relaymesh_node::store::Store;
use relaymesh_node::transport::uplink::{connect_nearest, open_control, Endpoints};
use relaymesh_node::transport::LinkError;
use relaymesh_protocol::message::Hello;
use relaymesh_protocol::{ErrorCode, PROTOCOL_VERSION};
use relaymesh_tests::{connected_under, find_node, kubectl, observe, wait_for, Mesh, RelayProcess};

const SETTLE: Duration = Duration::from_secs(60);

/// What the certificates the root signs last.
const SHORT: &[&str] = &["--node-cert-validity", "20s"];

/// eu signs 20 s certificates and renews expired ones for 5 s only.
const EU: &[&str] = &["--node-cert-validity", "20s", "--expired-cert-grace", "5s"];

/// The agents apply nothing (as `Mesh::add_agent` starts them).
const NO_CLUSTER: &[&str] = &["--no-cluster"];

fn connected(mesh: &Mesh, name: &str, parent: &str) -> anyhow::Result<Option<()>> {
    Ok(connected_under(&mesh.tree()?, name, parent).then_some(()))
}

fn disconnected(mesh: &Mesh, name: &str) -> anyhow::Result<Option<()>> {
    let tree = mesh.tree()?;
    let down = find_node(&tree, name).is_none_or(|(node, _)| node["connected"] == false);
    Ok(down.then_some(()))
}

fn log_of(process: &RelayProcess) -> String {
    std::fs::read_to_string(&process.log).unwrap_or_default()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |now| now.as_secs())
}

/// Waits until the certificate in stopped node `name`'s store expired
/// more than `past` ago (as `inspect` reads it).
fn wait_expired(mesh: &Mesh, binary: &str, name: &str, past: Duration) -> anyhow::Result<()> {
    let summary = mesh.inspect_with(binary, name)?;
    let not_after = summary["certificateNotAfter"]
        .as_u64()
        .with_context(|| format!("{name}'s certificate expiry in {summary}"))?;
    observe(format_args!("{name}'s certificate expires at {not_after}"));
    wait_for(&format!("{name}'s certificate expired"), SETTLE, || {
        Ok((unix_now() > not_after + past.as_secs()).then_some(()))
    })
}

/// Waits until `process`'s log holds `text`.
fn logged(process: &RelayProcess, text: &str) -> anyhow::Result<()> {
    wait_for(
        &format!("{text:?} in {}'s log", process.name),
        SETTLE,
        || Ok(log_of(process).contains(text).then_some(())),
    )
}

/// What the parent says when node `name`, stopped, dials it with the
/// certificate in its store and opens a control stream (not a renewal).
fn control_with_stored_certificate(mesh: &Mesh, name: &str) -> anyhow::Result<String> {
    let store = Store::open(&mesh.data_dir(name))?;
    let identity = store.identity()?.context("a joined node")?;
    let parent = store
        .config()?
        .and_then(|config| config.parent)
        .context("a parent")?;
    drop(store);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let config = relaymesh_node::pki::quic_client_config(&identity)?;
        let (connection, _) = connect_nearest(&parent, &config, &mut Endpoints::default()).await?;
        let hello = Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            resume: None,
        };
        match open_control(&connection, hello).await {
            Ok(_) => bail!("the parent opened a control stream to {name}'s expired certificate"),
            Err(LinkError::Refused(refusal)) if refusal.code == ErrorCode::CertificateExpired => {
                Ok(refusal.message)
            }
            Err(other) => bail!("expected a refusal as expired, got: {other}"),
        }
    })
}

/// root ── eu ── edge-2; root ── edge-1, edge-3. Every certificate lasts
/// 20 s. eu, edge-1, edge-2 and edge-3 are stopped until theirs expired;
/// edge-3 is revoked meanwhile. eu and edge-1 come back without tokens;
/// edge-3 (revoked) and edge-2 (expired longer than eu's 5 s of grace) do
/// not, and say why.
#[test]
fn nodes_offline_past_their_certificates_come_back_unless_revoked_or_past_grace(
) -> anyhow::Result<()> {
    let (mesh, root) = Mesh::init_with(SHORT)?;
    let mut eu = mesh.add_relay_with("eu", "root", EU)?;
    wait_for("eu under root", SETTLE, || connected(&mesh, "eu", "root"))
        .with_context(|| mesh.logs())?;
    let mut edge_1 = mesh.add_agent("edge-1", "root", "region=eu")?;
    let mut edge_2 = mesh.add_agent("edge-2", "eu", "region=eu")?;
    let mut edge_3 = mesh.add_agent("edge-3", "root", "region=eu")?;
    for (name, parent) in [("edge-1", "root"), ("edge-2", "eu"), ("edge-3", "root")] {
        wait_for(&format!("{name} under {parent}"), SETTLE, || {
            connected(&mesh, name, parent)
        })
        .with_context(|| mesh.logs())?;
    }

    // A token never used, and one left to expire.
    let spare = mesh.token("agent", "spare", Some("root"), "1h")?;
    let _late = mesh.token("agent", "late", Some("root"), "1s")?;

    // Offline: the agents first, so eu stays up to see edge-2 go.
    for process in [&mut edge_2, &mut edge_1, &mut edge_3] {
        process.stop()?;
    }
    wait_for("edge-2 down", SETTLE, || disconnected(&mesh, "edge-2"))?;
    eu.stop()?;
    wait_for("eu and edge-1 down", SETTLE, || {
        Ok(disconnected(&mesh, "eu")?.and(disconnected(&mesh, "edge-1")?))
    })?;
    mesh.relayctl_ok(&["revoke", "edge-3"])?;
    wait_expired(&mesh, "relay", "eu", Duration::ZERO)?;
    wait_expired(&mesh, "edge-agent", "edge-1", Duration::ZERO)?;
    wait_expired(&mesh, "edge-agent", "edge-3", Duration::ZERO)?;
    // Past eu's grace period (5 s), well within the root's (30 d).
    wait_expired(&mesh, "edge-agent", "edge-2", Duration::from_secs(6))?;

    // An expired certificate opens nothing but a renewal.
    let refused = control_with_stored_certificate(&mesh, "edge-1")?;
    assert!(refused.contains("may only renew it"), "{refused}");
    logged(&root, "refused a node whose certificate expired")?;

    // Back, without new tokens.
    let eu = mesh.start_with("eu", EU)?;
    wait_for("eu back under root", SETTLE, || {
        connected(&mesh, "eu", "root")
    })
    .with_context(|| mesh.logs())?;
    let edge_1 = mesh.start_agent_with("edge-1", NO_CLUSTER)?;
    wait_for("edge-1 back under root", SETTLE, || {
        connected(&mesh, "edge-1", "root")
    })
    .with_context(|| mesh.logs())?;
    for process in [&eu, &edge_1] {
        let log = log_of(process);
        assert!(
            log.contains("this node's certificate has expired")
                && log.contains("renewed this node's certificate"),
            "{} renewed its expired certificate:\n{log}",
            process.name
        );
    }
    logged(
        &root,
        "renewing a certificate that expired, within the grace period",
    )?;

    // Revoked: refused, expired or not, and both sides say so.
    let edge_3 = mesh.start_agent_with("edge-3", NO_CLUSTER)?;
    logged(&edge_3, "refused by the parent (revoked)")?;
    logged(&root, "refused a revoked node")?;
    logged(&edge_3, "was revoked by the root")?;
    assert!(
        !log_of(&edge_3).contains("renewed this node's certificate"),
        "a revoked node's expired certificate is never renewed"
    );

    // Past eu's grace period: refused, and both sides say so.
    let edge_2 = mesh.start_agent_with("edge-2", NO_CLUSTER)?;
    logged(
        &edge_2,
        "the parent refused to renew this node's expired certificate",
    )?;
    logged(&edge_2, "join again with a new token")?;
    logged(
        &eu,
        "longer than this relay's grace period for expired certificates (5s)",
    )?;
    let tree = mesh.tree()?;
    assert!(
        !connected_under(&tree, "edge-2", "eu") && !connected_under(&tree, "edge-3", "root"),
        "neither edge-2 nor edge-3 is back: {tree}"
    );

    // What the root says of the tokens it issued.
    let table = mesh.relayctl_ok(&["token", "list"])?;
    observe(format_args!("token list:\n{table}"));
    let state_of = |name: &str| -> anyhow::Result<(String, String)> {
        let row = table
            .lines()
            .find(|line| line.split_whitespace().nth(1) == Some(name))
            .with_context(|| format!("a row for {name} in\n{table}"))?;
        let fields: Vec<&str> = row.split_whitespace().collect();
        // ID NAME ROLE PARENT EXPIRES STATE USED-BY IN-TREE
        Ok((fields[5].to_string(), fields[6].to_string()))
    };
    assert_eq!(state_of("eu")?, ("Used".into(), "eu".into()));
    assert_eq!(state_of("edge-1")?, ("Used".into(), "edge-1".into()));
    assert_eq!(state_of("edge-3")?.0, "Revoked");
    assert_eq!(state_of("late")?, ("Expired".into(), "-".into()));
    assert_eq!(state_of("spare")?, ("Valid".into(), "-".into()));
    let json: serde_json::Value =
        serde_json::from_str(&mesh.relayctl_ok(&["token", "list", "-o", "json"])?)?;
    let eu_token = json
        .as_array()
        .into_iter()
        .flatten()
        .find(|token| token["spec"]["name"] == "eu")
        .with_context(|| format!("eu's token in {json}"))?;
    assert_eq!(eu_token["status"]["usedBy"], "eu");
    drop(spare);
    drop((edge_2, edge_3));
    Ok(())
}

/// `kubectl get namespaces` as `kubeconfig`'s user: its stderr if refused.
fn get_namespaces(kubeconfig: &Path) -> anyhow::Result<Result<(), String>> {
    let output = kubectl(kubeconfig, &["get", "namespaces"], None)?;
    Ok(if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    })
}

/// `relayctl user list`: each user's groups and state.
fn user_states(mesh: &Mesh) -> anyhow::Result<Vec<(String, String, String)>> {
    let table = mesh.relayctl_ok(&["user", "list"])?;
    observe(format_args!("user list:\n{table}"));
    Ok(table
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let field = |index: usize| fields.get(index).copied().unwrap_or("").to_string();
            (field(0), field(1), field(2))
        })
        .collect())
}

#[test]
fn a_revoked_users_kubectl_is_refused_while_another_user_still_works() -> anyhow::Result<()> {
    let (mesh, mut root) = Mesh::init()?;
    let alice = mesh.user_kubeconfig("alice", "viewers")?;
    let bob = mesh.user_kubeconfig("bob", "operators")?;
    for user in [&alice, &bob] {
        if let Err(error) = get_namespaces(user)? {
            bail!("{} works before: {error}", user.display());
        }
    }

    mesh.relayctl_ok(&["user", "revoke", "alice"])?;
    let refused = get_namespaces(&alice)?.err().context("alice is refused")?;
    assert!(
        // kubectl's words for a 401, then the root's.
        refused.contains("You must be logged in to the server")
            && refused.contains(r#"user "alice" was revoked by an admin"#),
        "a clear refusal: {refused}"
    );
    if let Err(error) = get_namespaces(&bob)? {
        bail!("bob still works: {error}");
    }
    assert_eq!(
        user_states(&mesh)?,
        [
            ("alice".into(), "viewers".into(), "Revoked".into()),
            ("bob".into(), "operators".into(), "Valid".into()),
        ]
    );
    // The name is not issued again: a new certificate would pass for the
    // revoked user's.
    let again = mesh.relayctl(&["user", "create", "alice", "--group", "viewers", "-o", "-"])?;
    assert!(!again.status.success(), "alice is not issued again");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("revoked"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // The revocation is in the root's store.
    root.stop()?;
    let _root = mesh.start("root")?;
    mesh.wait_for_api()?;
    let refused = get_namespaces(&alice)?
        .err()
        .context("alice is still refused")?;
    assert!(refused.contains("was revoked"), "{refused}");
    if let Err(error) = get_namespaces(&bob)? {
        bail!("bob still works after the restart: {error}");
    }
    Ok(())
}
