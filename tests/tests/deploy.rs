//! The deployment artifacts in `deploy/`:
//!
//! * `kubectl apply -k deploy/edge-agent` against a (simulated) cluster
//!   creates the agent's Deployment, ServiceAccount, least-privilege RBAC
//!   and volume, as the files say;
//! * `edge-agent run --join-as`, what that Deployment runs, joins on its
//!   first start (an empty data directory) and only runs after that, with
//!   the token spent;
//! * the systemd units pass `systemd-analyze verify` without a warning.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    binary, connected_under, kubectl_get, kubectl_ok, wait_for, web_image, Mesh,
};

const SETTLE: Duration = Duration::from_secs(90);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
}

#[test]
fn the_edge_agent_kustomization_applies_to_a_cluster() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let dir = tempfile::tempdir()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &dir.path().join("cluster"),
        SimulatorOptions::default(),
    ))?;
    let base = repo().join("deploy/edge-agent");
    kubectl_ok(
        cluster.kubeconfig(),
        &["apply", "-k", &base.display().to_string()],
        None,
    )?;
    let namespace = "relaymesh-system";
    let deployment = kubectl_get(
        cluster.kubeconfig(),
        &["deployment", "relaymesh-edge-agent", "-n", namespace],
    )?
    .context("no Deployment")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "relaymesh-agent");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|arg| arg.as_str())
        .collect();
    assert!(args.contains(&"--in-cluster"), "{args:?}");
    assert!(
        args.iter().any(|arg| arg.starts_with("--join-as=")),
        "{args:?}"
    );
    assert!(kubectl_get(
        cluster.kubeconfig(),
        &["serviceaccount", "relaymesh-agent", "-n", namespace]
    )?
    .is_some());
    assert!(kubectl_get(
        cluster.kubeconfig(),
        &["pvc", "relaymesh-edge-agent", "-n", namespace]
    )?
    .is_some());
    assert!(kubectl_get(
        cluster.kubeconfig(),
        &["role", "relaymesh-agent-applysets", "-n", namespace]
    )?
    .is_some());
    let binding = kubectl_get(
        cluster.kubeconfig(),
        &["clusterrolebinding", "relaymesh-agent"],
    )?
    .context("no ClusterRoleBinding")?;
    assert_eq!(binding["subjects"][0]["namespace"], namespace);
    // Least privilege: never a wildcard, never update, events readable.
    let role = kubectl_get(cluster.kubeconfig(), &["clusterrole", "relaymesh-agent"])?
        .context("no ClusterRole")?;
    let rules = role["rules"].as_array().context("rules")?;
    for rule in rules {
        for field in ["verbs", "resources", "apiGroups"] {
            let values: Vec<&str> = rule[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|value| value.as_str())
                .collect();
            assert!(!values.contains(&"*"), "a wildcard in {rule}");
            assert!(field != "verbs" || !values.contains(&"update"), "{rule}");
            assert!(
                !values
                    .iter()
                    .any(|value| ["escalate", "bind", "impersonate"].contains(value)),
                "{rule}"
            );
        }
    }
    assert!(
        rules.iter().any(|rule| rule["resources"]
            .as_array()
            .is_some_and(|resources| resources.iter().any(|r| r == "events"))),
        "no rule lets the agent list events: {role}"
    );
    runtime.block_on(cluster.shutdown())?;
    Ok(())
}

#[test]
fn run_join_as_joins_on_the_first_start_only() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let args = [
        "--join-as",
        "edge-1",
        "--labels",
        "region=eu",
        "--kubeconfig",
        &kubeconfig,
    ];

    // No token and nothing joined: a clear refusal, nothing written.
    let output = mesh
        .command("edge-agent", "edge-1")?
        .args(["run", "--data-dir"])
        .arg(mesh.data_dir("edge-1"))
        .args(args)
        .env_remove("RELAYMESH_TOKEN")
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("RELAYMESH_TOKEN"), "{stderr}");

    let token = mesh.token("agent", "edge-1", None, "10m")?;
    mesh.set_env("edge-1", &[("RELAYMESH_TOKEN", &token)])?;
    let mut agent = mesh.start_agent_with("edge-1", &args)?;
    wait_for("edge-1 joined and running", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    // relayctl get clusters shows labels as kubectl does.
    let table = mesh.relayctl_ok(&[
        "get",
        "clusters",
        "--show-labels",
        "-L",
        "region",
        "-o",
        "wide",
    ])?;
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("REGION") && lines[0].ends_with("LABELS"),
        "{table}"
    );
    let row = lines
        .iter()
        .find(|line| line.starts_with("edge-1"))
        .context("no edge-1 row")?;
    assert!(
        row.contains("   eu   ") && row.contains("region=eu"),
        "{table}"
    );

    // Started again with the same token, spent now (a second join would be
    // refused): it just runs.
    agent.stop()?;
    let _agent = mesh.start_agent_with("edge-1", &args)?;
    wait_for("edge-1 back", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.place_web("nginx:1.28", "{names: [edge-1]}", cluster.kubeconfig())?;
    assert_eq!(
        web_image(cluster.kubeconfig())?.as_deref(),
        Some("nginx:1.28")
    );
    let log = std::fs::read_to_string(mesh.dir.path().join("edge-1.log"))?;
    assert_eq!(log.matches("transport::join: joining").count(), 1, "{log}");
    Ok(())
}

#[test]
fn the_systemd_units_verify_without_a_warning() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let units = repo().join("deploy/systemd");
    let mut verified = 0;
    for entry in std::fs::read_dir(&units)? {
        let path = entry?.path();
        if path.extension().is_none_or(|ext| ext != "service") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        // verify checks that ExecStart's program exists: point it at the
        // binaries this build made.
        let mut local = text.clone();
        for program in ["relay", "edge-agent"] {
            local = local.replace(
                &format!("/usr/local/bin/{program} "),
                &format!("{} ", binary(program)?.display()),
            );
        }
        assert_ne!(local, text, "{} runs no relaymesh program", path.display());
        let copy = dir.path().join(path.file_name().context("a file name")?);
        std::fs::write(&copy, local)?;
        let output = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(&copy)
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{}: {stderr}", path.display());
        // A value systemd cannot parse is only a warning, and ignored.
        assert!(stderr.trim().is_empty(), "{}: {stderr}", path.display());
        for hardening in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "User=relaymesh",
        ] {
            assert!(
                text.contains(hardening),
                "{}: no {hardening}",
                path.display()
            );
        }
        verified += 1;
    }
    assert_eq!(
        verified, 2,
        "a unit for the relay and one for the edge agent"
    );
    Ok(())
}
