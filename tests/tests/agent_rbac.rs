//! An edge agent with exactly the RBAC `deploy/edge-agent` grants: the base
//! is applied with `kubectl apply -k` to a simulated cluster that enforces
//! RBAC as a real one does, the agent runs as that ServiceAccount (a client
//! certificate naming `system:serviceaccount:relaymesh-system:relaymesh-agent`),
//! and a placement lands. What the RBAC leaves out stays forbidden.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, kubectl, kubectl_ok, wait_for, Mesh};

const SETTLE: Duration = Duration::from_secs(60);

/// The ServiceAccount of `deploy/edge-agent/rbac.yaml`, as the cluster's
/// RBAC names it.
const AGENT: &str = "system:serviceaccount:relaymesh-system:relaymesh-agent";

#[test]
fn an_agent_with_the_deployed_rbac_applies_a_placement() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start_with_rbac(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/edge-agent");
    kubectl_ok(
        cluster.kubeconfig(),
        &["apply", "-k", &base.display().to_string()],
        None,
    )?;
    let agent_kubeconfig = cluster.kubeconfig_for(
        AGENT,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:relaymesh-system",
        ],
    )?;

    // The cluster enforces it: what rbac.yaml leaves out is forbidden.
    for forbidden in [
        &["get", "pods", "-n", "kube-system"][..],
        &["get", "clusterrolebindings"][..],
        &["create", "namespace", "elsewhere", "--dry-run=server"][..],
    ] {
        let output = kubectl(&agent_kubeconfig, forbidden, None)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if forbidden[0] == "create" {
            // Namespaces are the agent's to create: allowed.
            ensure!(output.status.success(), "{forbidden:?}: {stderr}");
            continue;
        }
        ensure!(!output.status.success(), "{forbidden:?} was allowed");
        ensure!(stderr.contains("forbidden"), "{forbidden:?}: {stderr}");
    }

    let mut agent = mesh.add_agent_for("edge-1", "root", "region=eu", &agent_kubeconfig)?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    wait_for("web ready at the root", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        Ok((status["ready"] == 1).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // The writes were the service account's.
    let audit = std::fs::read_to_string(cluster.audit_log())?;
    let by_agent: Vec<&str> = audit
        .lines()
        .filter(|line| line.contains(&format!("\"user\":\"{AGENT}\"")))
        .collect();
    ensure!(
        by_agent.iter().any(|line| line.contains("/deployments")),
        "no Deployment write by {AGENT}: {audit}"
    );
    agent.stop()?;
    Ok(())
}
