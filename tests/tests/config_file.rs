//! Every flag from a TOML file (`--config FILE`, docs/install.md, "Config
//! files"): a relay and an edge agent run with their settings from files
//! (metrics address, log format, labels), and a key that is no flag stops
//! the program before it starts, naming the key and the file.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use relaymesh_tests::{connected_under, free_tcp_port, run_ok, scrape_metrics, wait_for, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

/// Whether `address` serves a node's metrics.
fn serves_metrics(address: &str) -> anyhow::Result<bool> {
    Ok(scrape_metrics(address)?.is_some_and(|body| body.contains("relaymesh_link_up")))
}

fn write(path: &Path, text: &str) -> anyhow::Result<String> {
    std::fs::write(path, text)?;
    Ok(path.display().to_string())
}

#[test]
fn a_relay_and_an_agent_take_their_flags_from_files() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let relay_metrics = format!("127.0.0.1:{}", free_tcp_port()?);
    let relay_toml = write(
        &mesh.dir.path().join("relay.toml"),
        &format!(
            "# relay run's flags, without their dashes\n\
             metrics-listen = \"{relay_metrics}\"\n\
             log-format = \"json\"\n\
             parent-grace = \"45s\"\n"
        ),
    )?;
    let site = mesh.add_relay_with("site", "root", &["--config", &relay_toml])?;
    wait_for("site in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "site", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("site's metrics where its file says", SETTLE, || {
        Ok(serves_metrics(&relay_metrics)?.then_some(()))
    })?;
    // Its log is JSON, as the file says (`log-format` is a flag of `relay`).
    let log = std::fs::read_to_string(&site.log)?;
    let run_lines: Vec<&str> = log
        .lines()
        .skip_while(|line| !line.contains("serving metrics"))
        .collect();
    ensure!(!run_lines.is_empty(), "{log}");
    for line in run_lines {
        serde_json::from_str::<Value>(line).with_context(|| format!("not JSON: {line}"))?;
    }

    // An agent whose labels and metrics address come from its file.
    let agent_metrics = format!("127.0.0.1:{}", free_tcp_port()?);
    let agent_toml = write(
        &mesh.dir.path().join("agent.toml"),
        &format!(
            "labels = \"region=eu,tier=gold\"\n\
             metrics-listen = \"{agent_metrics}\"\n\
             no-cluster = true\n"
        ),
    )?;
    let token = mesh.token("agent", "edge-1", Some("site"), "10m")?;
    run_ok(
        mesh.command("edge-agent", "edge-1")?
            .arg("join")
            .arg("--data-dir")
            .arg(mesh.data_dir("edge-1"))
            .args([
                "--name",
                "edge-1",
                "--token",
                &token,
                "--labels",
                "region=eu",
            ])
            .arg("--no-cluster"),
    )?;
    let _agent = mesh.start_agent_with("edge-1", &["--config", &agent_toml])?;
    wait_for("edge-1 with the file's labels", SETTLE, || {
        let cluster = mesh.cluster_object("edge-1")?;
        Ok((cluster["metadata"]["labels"]["tier"] == "gold").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("edge-1's metrics where its file says", SETTLE, || {
        Ok(serves_metrics(&agent_metrics)?.then_some(()))
    })?;

    // A typo stops the program before anything starts.
    let typo = write(
        &mesh.dir.path().join("typo.toml"),
        "metrics_listen = \"127.0.0.1:1\"\n",
    )?;
    let output = mesh
        .command("relay", "site")?
        .args(["run", "--config", &typo, "--data-dir"])
        .arg(mesh.data_dir("site"))
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{typo}: `metrics_listen` is no flag of `relay run`"
        )) && stderr.contains("metrics-listen"),
        "{stderr}"
    );

    // The examples in deploy/config name only flags their commands take.
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for (binary, file) in [("relay", "relay.toml"), ("edge-agent", "edge-agent.toml")] {
        let example = repo.join("deploy/config").join(file);
        let output = mesh
            .command(binary, "site")?
            .arg("--config")
            .arg(&example)
            .args(["run", "--help"])
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{}: {stderr}", example.display());
    }
    Ok(())
}
