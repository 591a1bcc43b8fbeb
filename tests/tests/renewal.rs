//! Certificate renewal end to end: with certificates that last 20 s, relays
//! renew theirs over their links while they run, and reconnect after the
//! certificates they joined with have expired, as children (with their
//! own renewed certificate) and as parents (serving theirs).

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_tests::{connected_under, find_node, observe, wait_for, Mesh, RelayProcess};

const SETTLE: Duration = Duration::from_secs(60);

/// What the certificates these relays sign last.
const SHORT: &[&str] = &["--node-cert-validity", "20s"];

/// How many renewals `process` logged.
fn renewals(process: &RelayProcess) -> anyhow::Result<usize> {
    let log = std::fs::read_to_string(&process.log)?;
    let count = log.matches("renewed this node's certificate").count();
    observe(format_args!("{} renewed {count} times", process.name));
    Ok(count)
}

/// Waits for `process`'s next renewal.
fn just_renewed(process: &RelayProcess) -> anyhow::Result<()> {
    let before = renewals(process)?;
    wait_for("one more renewal", SETTLE, || {
        Ok((renewals(process)? > before).then_some(()))
    })
}

fn connected(mesh: &Mesh, name: &str, parent: &str) -> anyhow::Result<Option<()>> {
    Ok(connected_under(&mesh.tree()?, name, parent).then_some(()))
}

fn disconnected(mesh: &Mesh, name: &str) -> anyhow::Result<Option<()>> {
    let tree = mesh.tree()?;
    let down = find_node(&tree, name).is_some_and(|(node, _)| node["connected"] == false);
    Ok(down.then_some(()))
}

/// root ── eu ── eu-west; root and eu sign 20 s certificates.
#[test]
fn relays_renew_their_certificates_over_the_link_and_reconnect_after_expiry() -> anyhow::Result<()>
{
    let (mesh, _root) = Mesh::init_with(SHORT)?;
    let mut eu = mesh.add_relay_with("eu", "root", SHORT)?;
    wait_for("eu under root", SETTLE, || connected(&mesh, "eu", "root"))?;
    let mut west = mesh.add_relay("eu-west", "eu")?;
    wait_for("eu-west under eu", SETTLE, || {
        connected(&mesh, "eu-west", "eu")
    })
    .with_context(|| mesh.logs())?;

    // Two renewals each: the certificates they joined with (20 s) are past.
    wait_for("two renewals of eu and of eu-west", SETTLE, || {
        Ok((renewals(&eu)? >= 2 && renewals(&west)? >= 2).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    // The links opened with the old certificates were never dropped.
    let tree = mesh.tree()?;
    assert!(connected_under(&tree, "eu", "root") && connected_under(&tree, "eu-west", "eu"));

    // eu-west dials eu again: its renewed certificate, and eu's renewed
    // server certificate, make a new handshake. It restarts right after a
    // renewal, so its certificate cannot run out while it is down.
    just_renewed(&west)?;
    west.stop()?;
    wait_for("eu-west down", SETTLE, || disconnected(&mesh, "eu-west"))?;
    let west = mesh.start("eu-west")?;
    wait_for("eu-west back under eu", SETTLE, || {
        connected(&mesh, "eu-west", "eu")
    })
    .with_context(|| mesh.logs())?;

    // eu restarts from its data directory with the stored renewal.
    just_renewed(&eu)?;
    eu.stop()?;
    wait_for("eu down", SETTLE, || disconnected(&mesh, "eu"))?;
    let _eu = mesh.start_with("eu", SHORT)?;
    wait_for("eu back, eu-west under it", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "eu", "root") && connected_under(&tree, "eu-west", "eu"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;
    drop(west);
    Ok(())
}
