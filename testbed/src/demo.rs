//! `testbed demo`: a default fleet, the storefront example applied at the
//! root, and a second-by-second view of it reaching the clusters of region
//! `eu` (read through each simulated cluster's own API with `kubectl`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;
use tokio::process::Command;

use crate::up::Fleet;

/// The example's namespace and Deployment.
const NAMESPACE: &str = "shop";
const DEPLOYMENT: &str = "storefront";
/// The label its Placement selects on.
const REGION: &str = "eu";

/// Where the storefront Deployment stands on one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Not there.
    Missing,
    /// There, not Available (yet).
    Pending,
    /// There and Available.
    Ready,
    /// There, and the simulator failed it.
    Failed,
    /// The cluster's API did not answer.
    Unreachable,
}

impl Rollout {
    fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Pending => "applied, not yet available",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Unreachable => "cluster unreachable",
        }
    }
}

/// Applies `manifests` at the root and watches the storefront reach the
/// region's clusters for up to `timeout`. Returns whether every one of them
/// has it ready.
pub async fn run(fleet: &Fleet, manifests: &Path, timeout: Duration) -> anyhow::Result<bool> {
    let root = fleet.root_kubeconfig();
    println!(
        "\n$ kubectl --kubeconfig {} apply -f {}",
        root.display(),
        manifests.display()
    );
    let applied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&root)
        .arg("apply")
        .arg("-f")
        .arg(manifests)
        .output()
        .await
        .context("cannot run kubectl (the demo needs it on PATH)")?;
    print!("{}", String::from_utf8_lossy(&applied.stdout));
    if !applied.status.success() {
        anyhow::bail!(
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
    let targets: Vec<&str> = fleet
        .plan
        .agents
        .iter()
        .filter(|agent| agent.labels.get("region").map(String::as_str) == Some(REGION))
        .map(|agent| agent.name.as_str())
        .collect();
    let started = Instant::now();
    let mut states = BTreeMap::new();
    loop {
        let placements = fleet
            .relayctl(&["get", "placements", "-A"])
            .await
            .unwrap_or_else(|error| format!("(cannot list placements: {error:#})\n"));
        for agent in &fleet.plan.agents {
            let state = rollout(&fleet.cluster_kubeconfig(&agent.name)).await;
            states.insert(agent.name.clone(), state);
        }
        println!("\n[{:>2}s] placements:", started.elapsed().as_secs());
        print!("{placements}");
        for agent in &fleet.plan.agents {
            let region = agent.labels.get("region").map_or("", String::as_str);
            let wanted = if targets.contains(&agent.name.as_str()) {
                "wanted"
            } else {
                "not selected"
            };
            println!(
                "  {:<14} region={region:<3} {wanted:<13} deploy/{DEPLOYMENT}: {}",
                agent.name,
                states[&agent.name].label()
            );
        }
        let ready = targets
            .iter()
            .all(|name| states.get(*name) == Some(&Rollout::Ready));
        if ready {
            println!(
                "\nThe storefront is ready on every {REGION} cluster ({}).",
                targets.join(", ")
            );
            return Ok(true);
        }
        if started.elapsed() >= timeout {
            let missing: Vec<String> = targets
                .iter()
                .filter(|name| states.get(**name) != Some(&Rollout::Ready))
                .map(|name| format!("{name}: {}", states[*name].label()))
                .collect();
            println!(
                "\nAfter {}s the storefront is not ready everywhere in {REGION}: {}",
                timeout.as_secs(),
                missing.join("; ")
            );
            if !fleet.agents_apply {
                println!("(this edge-agent does not apply to clusters yet: `edge-agent join` has no --kubeconfig)");
            }
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The storefront's state on the cluster `kubeconfig` reaches.
async fn rollout(kubeconfig: &Path) -> Rollout {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "get",
            "deployment",
            DEPLOYMENT,
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ])
        .output()
        .await;
    let Ok(output) = output else {
        return Rollout::Unreachable;
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return if stderr.contains("NotFound") || stderr.contains("not found") {
            Rollout::Missing
        } else {
            Rollout::Unreachable
        };
    }
    let deployment: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    state_of(&deployment)
}

/// A Deployment's state from its Available condition.
pub fn state_of(deployment: &Value) -> Rollout {
    let available = deployment["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|condition| condition["type"] == "Available");
    let current =
        deployment["status"]["observedGeneration"] == deployment["metadata"]["generation"];
    match available.and_then(|condition| condition["status"].as_str()) {
        Some("True") if current => Rollout::Ready,
        Some("False") if current => Rollout::Failed,
        _ => Rollout::Pending,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_deployment_is_ready_only_when_available_at_its_generation() {
        let mut deployment = json!({
            "metadata": {"generation": 2},
            "status": {
                "observedGeneration": 2,
                "conditions": [{"type": "Available", "status": "True"}],
            },
        });
        assert_eq!(state_of(&deployment), Rollout::Ready);
        deployment["status"]["observedGeneration"] = json!(1);
        assert_eq!(state_of(&deployment), Rollout::Pending);
        deployment["status"]["observedGeneration"] = json!(2);
        deployment["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(state_of(&deployment), Rollout::Failed);
        assert_eq!(state_of(&json!({"metadata": {}})), Rollout::Pending);
    }
}
