//! `Ready` follows the workloads' revision (issue 31), on four simulated
//! clusters under one relay:
//!
//! * After `kubectl set image` at the root, `kubectl wait
//!   --for=condition=Ready` and `relayctl watch` return only once every
//!   cluster runs the new image, ready: checked in every cluster right
//!   after each returns.
//! * With a failing image, neither succeeds: `relayctl watch` fails naming
//!   the clusters, `kubectl wait` runs into its timeout.
//! * The same through a Progressive rollout with `maxConcurrency: 1`.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    binary, connected_under, kubectl, kubectl_cache_dir, wait_for, web_workload, ApiReader, Mesh,
};

const SETTLE: Duration = Duration::from_secs(120);
const CLUSTERS: usize = 4;
const REPLICAS: u64 = 2;

/// What `kubectl wait` and `relayctl watch` are given: long enough for four
/// simulated clusters under load, short enough to fail a test that hangs.
const WAIT: &str = "180s";

/// Every cluster runs `image` for `shop/web`, with every replica of it
/// ready: the Deployment is the one with `image`, and its status is about
/// that spec (`observedGeneration`), not the one before.
fn all_run_ready(clusters: &[(String, ApiReader)], image: &str) -> anyhow::Result<()> {
    for (name, cluster) in clusters {
        let deployment = cluster
            .deployment("shop", "web")?
            .with_context(|| format!("{name} has no Deployment shop/web"))?;
        let running = deployment["spec"]["template"]["spec"]["containers"][0]["image"].as_str();
        anyhow::ensure!(
            running == Some(image),
            "{name} runs {running:?}, not {image}"
        );
        let status = &deployment["status"];
        anyhow::ensure!(
            status["observedGeneration"] == deployment["metadata"]["generation"]
                && status["readyReplicas"].as_u64() == Some(REPLICAS)
                && status["updatedReplicas"].as_u64() == Some(REPLICAS),
            "{name} runs {image} but is not ready on it: {status}"
        );
    }
    Ok(())
}

/// `kubectl wait --for=condition=Ready placement/web -n shop` with
/// `timeout`, started now.
fn kubectl_wait(mesh: &Mesh, timeout: &str) -> anyhow::Result<std::process::Child> {
    let kubeconfig = mesh.kubeconfig();
    Ok(Command::new("kubectl")
        .env("KUBECACHEDIR", kubectl_cache_dir(&kubeconfig)?)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "wait",
            "--for=condition=Ready",
            "placement/web",
            "-n",
            "shop",
        ])
        .arg(format!("--timeout={timeout}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

/// `relayctl watch web -n shop` with `timeout`, started now.
fn relayctl_watch(mesh: &Mesh, timeout: &str) -> anyhow::Result<std::process::Child> {
    Ok(Command::new(binary("relayctl")?)
        .arg("--kubeconfig")
        .arg(mesh.kubeconfig())
        .args(["watch", "web", "-n", "shop", "--timeout", timeout])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

/// Waits for `child` to exit; whether it succeeded, and what it printed.
fn finish(child: std::process::Child) -> anyhow::Result<(bool, String)> {
    let output = child.wait_with_output()?;
    Ok((
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    ))
}

/// `kubectl set image` of `shop/web` at the root.
fn set_image(mesh: &Mesh, image: &str) -> anyhow::Result<()> {
    let output = kubectl(
        &mesh.kubeconfig(),
        &[
            "set",
            "image",
            "deployment/web",
            &format!("web={image}"),
            "-n",
            "shop",
        ],
        None,
    )?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl set image: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[test]
fn ready_follows_the_workloads_revision() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay("r1", "root")?;
    wait_for("r1 under the root", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "r1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let mut simulated = Vec::new();
    let mut agents = Vec::new();
    let mut clusters = Vec::new();
    for i in 1..=CLUSTERS {
        let name = format!("edge-{i}");
        let sim = runtime.block_on(SimulatedCluster::start(
            &name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(&name, "r1", "fleet=demo", sim.kubeconfig())?);
        clusters.push((name, ApiReader::new(sim.kubeconfig())?));
        simulated.push(sim);
    }
    let fleet = "{labelSelector: {matchLabels: {fleet: demo}}}";

    // 1. The first revision, everywhere.
    mesh.apply(&web_workload("registry.example/web:v1", 2, fleet, ""))?;
    let (ok, output) = finish(kubectl_wait(&mesh, WAIT)?)?;
    anyhow::ensure!(ok, "kubectl wait on v1: {output}\n{}", mesh.logs());
    all_run_ready(&clusters, "registry.example/web:v1")?;

    // 2. A new image: both waits return only once every cluster runs it.
    set_image(&mesh, "registry.example/web:v2")?;
    let (ok, output) = finish(relayctl_watch(&mesh, WAIT)?)?;
    anyhow::ensure!(ok, "relayctl watch on v2: {output}\n{}", mesh.logs());
    all_run_ready(&clusters, "registry.example/web:v2")
        .with_context(|| format!("right after relayctl watch said: {output}"))?;
    set_image(&mesh, "registry.example/web:v3")?;
    let (ok, output) = finish(kubectl_wait(&mesh, WAIT)?)?;
    anyhow::ensure!(ok, "kubectl wait on v3: {output}\n{}", mesh.logs());
    all_run_ready(&clusters, "registry.example/web:v3")
        .with_context(|| format!("right after kubectl wait said: {output}"))?;
    let status = mesh.placement_status("web", "shop")?;
    assert_eq!(status["updated"], CLUSTERS as u64, "{status}");
    assert!(
        status["revision"].as_str().is_some_and(|r| r.len() == 64),
        "the status names the revision it describes: {status}"
    );

    // 3. A failing image: neither succeeds. The watch fails once every
    // cluster runs it and failed; kubectl wait runs into its timeout.
    set_image(&mesh, "registry.example/web:fail-v4")?;
    let waiting = kubectl_wait(&mesh, "20s")?;
    let (ok, output) = finish(relayctl_watch(&mesh, WAIT)?)?;
    assert!(!ok, "relayctl watch succeeded on a failing image: {output}");
    assert!(
        output.contains("clusters failed"),
        "the watch says why: {output}"
    );
    let (ok, output) = finish(waiting)?;
    assert!(!ok, "kubectl wait succeeded on a failing image: {output}");
    let status = mesh.placement_status("web", "shop")?;
    assert_eq!(status["failed"], CLUSTERS as u64, "{status}");

    // 4. A Progressive rollout one cluster at a time: Ready only at its end.
    let progressive =
        "  rollout:\n    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessTime: 1s\n";
    mesh.apply(&web_workload(
        "registry.example/web:v5",
        2,
        fleet,
        progressive,
    ))?;
    let (ok, output) = finish(kubectl_wait(&mesh, WAIT)?)?;
    anyhow::ensure!(
        ok,
        "kubectl wait on the rollout of v5: {output}\n{}",
        mesh.logs()
    );
    all_run_ready(&clusters, "registry.example/web:v5")
        .with_context(|| format!("right after kubectl wait said: {output}"))?;
    set_image(&mesh, "registry.example/web:v6")?;
    let (ok, output) = finish(relayctl_watch(&mesh, WAIT)?)?;
    anyhow::ensure!(
        ok,
        "relayctl watch on the rollout of v6: {output}\n{}",
        mesh.logs()
    );
    all_run_ready(&clusters, "registry.example/web:v6")
        .with_context(|| format!("right after relayctl watch said: {output}"))?;
    let status = mesh.placement_status("web", "shop")?;
    assert_eq!(status["rollout"]["phase"], "Complete", "{status}");
    drop(agents);
    Ok(())
}
