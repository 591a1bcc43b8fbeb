//! Version skew (docs/production.md, "Version skew"): the previous
//! release's binaries (the newest `v*` tag older than this build, built by
//! `scripts/previous-release`) and this build's in one tree. Placements
//! flow down and status flows up with an old root above new relays and
//! agents, and with an old agent below new relays; an old agent's data
//! directory is then run by the new agent, which keeps its identity and
//! migrates the store after a backup, and the downgrade back (docs/
//! production.md, "Downgrades") is refused until that backup is restored.

use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    bin_dir, connected_under, kubectl_ok, observe, previous_release, wait_for, Mesh,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// This build's version.
const CURRENT: &str = env!("CARGO_PKG_VERSION");

/// The version each node reports (`status.version` of Relays and Agents).
fn versions(mesh: &Mesh) -> anyhow::Result<Vec<(String, String)>> {
    let mut versions = Vec::new();
    for kind in ["relays.relaymesh.dev", "agents.relaymesh.dev"] {
        let list: Value = serde_json::from_str(&kubectl_ok(
            &mesh.kubeconfig(),
            &["get", kind, "-o", "json"],
            None,
        )?)?;
        for item in list["items"].as_array().into_iter().flatten() {
            versions.push((
                item["metadata"]["name"].as_str().unwrap_or("").to_string(),
                item["status"]["version"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    versions.sort();
    observe(format_args!("{versions:?}"));
    Ok(versions)
}

fn reported(mesh: &Mesh, expected: &[(&str, &str)]) -> anyhow::Result<Option<()>> {
    let versions = versions(mesh)?;
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(name, version)| (name.to_string(), version.to_string()))
        .collect();
    Ok((versions == want).then_some(()))
}

/// The previous release's version, as its relay says it.
fn previous_version(dir: &std::path::Path) -> anyhow::Result<String> {
    let output = std::process::Command::new(dir.join("relay"))
        .arg("--version")
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .trim()
        .strip_prefix("relay ")
        .context("relay --version")?;
    anyhow::ensure!(version != CURRENT, "the previous release is this one");
    Ok(version.to_string())
}

fn ready(mesh: &Mesh, clusters: u64) -> anyhow::Result<()> {
    wait_for("web ready at the root", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == clusters && status["selected"] == clusters).then_some(()))
    })
    .with_context(|| mesh.logs())
}

#[test]
fn an_old_root_runs_new_relays_and_agents() -> anyhow::Result<()> {
    let old = previous_release()?;
    let old_version = previous_version(&old)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init_with_binaries(&old)?;
    let _site = mesh.add_relay_connected("site", "root", SETTLE)?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let _agent = mesh.add_agent_for("edge-1", "site", "region=eu", cluster.kubeconfig())?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "site").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("each node's version", SETTLE, || {
        reported(
            &mesh,
            &[
                ("edge-1", CURRENT),
                ("root", &old_version),
                ("site", CURRENT),
            ],
        )
    })?;
    // Down: the old root's placement applied by the new agent; up: its
    // status counted at the old root.
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    ready(&mesh, 1)?;
    mesh.place_web("nginx:1.28", "{names: [edge-1]}", cluster.kubeconfig())?;
    ready(&mesh, 1)
}

/// Waits for agent edge-1 to report `version` below this build's root and
/// relay.
fn agent_runs(mesh: &Mesh, what: &str, version: &str) -> anyhow::Result<()> {
    wait_for(what, SETTLE, || {
        reported(
            mesh,
            &[("edge-1", version), ("root", CURRENT), ("site", CURRENT)],
        )
    })
    .with_context(|| mesh.logs())
}

/// Waits for a node started on a store it must refuse to exit with an
/// error, and returns its log.
fn refused(process: &mut relaymesh_tests::RelayProcess) -> anyhow::Result<String> {
    let status = wait_for("the old agent to refuse the store", SETTLE, || {
        process.exit_status()
    })?;
    anyhow::ensure!(!status.success(), "the old agent ran on a newer store");
    Ok(std::fs::read_to_string(&process.log)?)
}

#[test]
fn new_relays_run_an_old_agent_which_upgrades_in_place_and_back() -> anyhow::Result<()> {
    let old = previous_release()?;
    let old_version = previous_version(&old)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _site = mesh.add_relay_connected("site", "root", SETTLE)?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    mesh.use_binaries("edge-1", &old)?;
    let mut agent = mesh.add_agent_for("edge-1", "site", "region=eu", cluster.kubeconfig())?;
    agent_runs(&mesh, "the old agent's version", &old_version)?;
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    ready(&mesh, 1)?;

    // The upgrade: the same data directory, this build's agent.
    agent.stop()?;
    mesh.use_binaries("edge-1", &bin_dir()?)?;
    agent = mesh.start_agent("edge-1")?;
    agent_runs(&mesh, "the upgraded agent's version", CURRENT)?;
    mesh.place_web("nginx:1.28", "{names: [edge-1]}", cluster.kubeconfig())?;
    ready(&mesh, 1)?;

    // The upgrade migrated the store, and kept the old format beside it.
    let data_dir = mesh.data_dir("edge-1");
    let backup = data_dir.join("store.format-2.backup");
    anyhow::ensure!(backup.is_dir(), "no backup at {}", backup.display());

    // The downgrade: the old agent refuses the migrated store, untouched,
    // and runs once the backup is back in its place.
    agent.stop()?;
    mesh.use_binaries("edge-1", &old)?;
    let mut refusing = mesh.start_agent("edge-1")?;
    let log = refused(&mut refusing)?;
    anyhow::ensure!(log.contains("has format 3"), "{log}");
    std::fs::rename(data_dir.join("store"), data_dir.join("store.format-3"))?;
    std::fs::rename(&backup, data_dir.join("store"))?;
    let _agent = mesh.start_agent("edge-1")?;
    agent_runs(&mesh, "the downgraded agent's version", &old_version)?;
    mesh.place_web("nginx:1.29", "{names: [edge-1]}", cluster.kubeconfig())?;
    ready(&mesh, 1)
}
