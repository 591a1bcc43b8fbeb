//! Placement status end to end: 20 simulated clusters under a three-level
//! tree, 3 of them failing the workload. What the root writes on the
//! Placement (read with kubectl and `relayctl status`) counts them as
//! failed, names them with their agents' messages, and carries conditions
//! `kubectl wait` understands. A status rule sums readyReplicas by region,
//! and the phase counts are grouped by region (`relayctl status --by`).
//! A placement on one cluster by name gets
//! that cluster's status onto the root's own Deployment, so `kubectl
//! rollout status` at the root follows the real rollout.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::status::share;
use relaymesh_testbed::up::plan::Plan;
use relaymesh_tests::{kubectl, observe, wait_for, Testbed};
use serde_json::Value;

const UP: Duration = Duration::from_secs(300);
const SETTLE: Duration = Duration::from_secs(120);
const AGENTS: usize = 20;
const FAILING: usize = 3;

/// A Deployment placed on exactly one cluster (named in the test).
const SOLO: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: shop, labels: {app: solo}}
spec:
  replicas: 3
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec: {containers: [{name: solo, image: "nginx:1.27"}]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: solo, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: solo}}}]
  clusters: {names: [CLUSTER]}
"#;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop, labels: {app: api}}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: "nginx:1.27"}]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {labelSelector: {matchExpressions: [{key: region, operator: Exists}]}}
  statusRules:
  - name: ready-replicas
    select: object.status.readyReplicas
    filter: object.kind == 'Deployment'
    aggregate: sum
    groupBy: region
  statusGroupBy: [region]
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: api, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: api}}}]
  clusters: {labelSelector: {matchExpressions: [{key: region, operator: Exists}]}}
  statusGroupBy: [region]
"#;

/// A `--fail` fraction of shop/web that fails exactly [`FAILING`] of the
/// fleet's clusters (the testbed picks them by a hash of cluster and
/// workload), and their names.
fn failing_share(relays_per_level: &[usize]) -> (f64, BTreeSet<String>) {
    let plan = Plan::new(relays_per_level, AGENTS);
    let mut shares: Vec<(f64, String)> = plan
        .agents
        .iter()
        .map(|agent| (share(&agent.name, "shop/web"), agent.name.clone()))
        .collect();
    shares.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fraction = (shares[FAILING - 1].0 + shares[FAILING].0) / 2.0;
    let names = shares[..FAILING]
        .iter()
        .map(|(_, name)| name.clone())
        .collect();
    (fraction, names)
}

fn relayctl_status(testbed: &Testbed, placement: &str) -> anyhow::Result<Value> {
    let output = testbed.relayctl(&["status", placement, "-n", "shop", "-o", "json"])?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl status: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status: Value = serde_json::from_slice(&output.stdout)?;
    observe(&status);
    Ok(status)
}

fn names(failing: &Value) -> BTreeSet<String> {
    failing
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["cluster"].as_str().map(str::to_string))
        .collect()
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|condition| condition["type"] == kind))
        .map_or(&Value::Null, |condition| &condition["status"])
}

#[test]
fn failures_are_named_and_kubectl_wait_and_relayctl_watch_follow() -> anyhow::Result<()> {
    let levels = [2, 2];
    let (fraction, expected) = failing_share(&levels);
    let mut testbed = Testbed::up(
        &[
            "--relays-per-level",
            "2,2",
            "--agents",
            &AGENTS.to_string(),
            "--base-port",
            "0",
            "--status-delay",
            "1s",
            "--fail",
            &format!("shop/web={fraction}"),
        ],
        UP,
    )?;
    let root = testbed.root_kubeconfig();
    let applied = kubectl(&root, &["apply", "-f", "-"], Some(MANIFESTS))?;
    anyhow::ensure!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    // The placement of the workload that fails on 3 clusters.
    let status = wait_for("web: 17 ready, 3 failed and named", SETTLE, || {
        let status = relayctl_status(&testbed, "web")?;
        let settled = status["ready"] == 17 && status["failed"] == 3;
        Ok((settled && names(&status["failing"]).len() == FAILING).then_some(status))
    })
    .with_context(|| testbed.logs())?;
    assert_eq!(status["selected"], AGENTS, "{status}");
    assert_eq!(names(&status["failing"]), expected, "{status}");
    for failing in status["failing"].as_array().into_iter().flatten() {
        let message = failing["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Deployment shop/web") && message.contains("CrashLoopBackOff"),
            "{failing}"
        );
    }
    assert_eq!(status["conditions"]["Degraded"], "True", "{status}");
    assert_eq!(status["conditions"]["Ready"], "False", "{status}");

    // The rule: readyReplicas (2 on a healthy cluster, 0 on a failing one)
    // summed per region, exactly as the plan puts clusters in regions.
    let plan = Plan::new(&levels, AGENTS);
    let mut expected_sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for agent in &plan.agents {
        let region = agent.labels.get("region").cloned().unwrap_or_default();
        let entry = expected_sums.entry(region).or_default();
        entry.0 += 1;
        if !expected.contains(&agent.name) {
            entry.1 += 2;
        }
    }
    let status = wait_for("the rule's sums per region", SETTLE, || {
        let status = relayctl_status(&testbed, "web")?;
        let rule = &status["rules"][0];
        let sums: BTreeMap<String, (u64, u64)> = rule["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|group| {
                let key = group["key"].as_str().unwrap_or_default().to_string();
                let count = group["count"].as_u64().unwrap_or(0);
                (key, (count, group["value"].as_u64().unwrap_or(0)))
            })
            .collect();
        Ok((sums == expected_sums).then_some(status))
    })
    .with_context(|| testbed.logs())?;
    let rule = &status["rules"][0];
    assert_eq!(rule["name"], "ready-replicas", "{rule}");
    assert_eq!(rule["value"], 2 * (AGENTS - FAILING) as u64, "{rule}");
    assert_eq!(rule["count"], AGENTS as u64, "{rule}");

    // The phase counts per region, from the same tree.
    let output = testbed.relayctl(&[
        "status", "web", "-n", "shop", "--by", "region", "-o", "json",
    ])?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl status --by: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let grouped: Value = serde_json::from_slice(&output.stdout)?;
    let mut expected_groups: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for agent in &plan.agents {
        let region = agent.labels.get("region").cloned().unwrap_or_default();
        let entry = expected_groups.entry(region).or_default();
        entry.0 += 1;
        if expected.contains(&agent.name) {
            entry.2 += 1;
        } else {
            entry.1 += 1;
        }
    }
    let groups: BTreeMap<String, (u64, u64, u64)> = grouped["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|group| {
            let count = |field: &str| group[field].as_u64().unwrap_or(0);
            let key = group["key"].as_str().unwrap_or_default().to_string();
            (key, (count("clusters"), count("ready"), count("failed")))
        })
        .collect();
    assert_eq!(groups, expected_groups, "{grouped}");
    // relayctl tree --placement: every subtree's counts, as its parent
    // relay says, down to each agent's own.
    let output = testbed.relayctl(&["tree", "--placement", "web", "-n", "shop", "-o", "json"])?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl tree --placement: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(tree["placement"]["total"], AGENTS as u64, "{tree}");
    assert_eq!(
        tree["placement"]["ready"],
        (AGENTS - FAILING) as u64,
        "{tree}"
    );
    let mut nodes = vec![&tree];
    let mut agents_seen = 0;
    while let Some(node) = nodes.pop() {
        nodes.extend(node["children"].as_array().into_iter().flatten());
        if node["role"] == "agent" {
            agents_seen += 1;
            let name = node["name"].as_str().unwrap_or_default();
            let field = if expected.contains(name) {
                "failed"
            } else {
                "ready"
            };
            assert_eq!(node["placement"][field], 1, "{name}: {node}");
            assert_eq!(node["placement"]["total"], 1, "{name}: {node}");
        }
    }
    assert_eq!(agents_seen, AGENTS);

    let output = testbed.relayctl(&["status", "web", "-n", "shop", "--by", "zone"])?;
    assert!(!output.status.success(), "web does not group by zone");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("spec.statusGroupBy"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // kubectl at the root reads the same from the Placement itself.
    let output = kubectl(
        &root,
        &["get", "placement", "web", "-n", "shop", "-o", "json"],
        None,
    )?;
    let placement: Value = serde_json::from_slice(&output.stdout)?;
    let written = &placement["status"];
    assert_eq!(written["clusters"]["ready"], 17, "{written}");
    assert_eq!(written["clusters"]["failed"], 3, "{written}");
    assert_eq!(names(&written["failing"]), expected, "{written}");
    assert_eq!(condition(written, "Degraded"), "True");
    assert_eq!(written["rules"][0], status["rules"][0], "{written}");
    assert_eq!(
        written["observedGeneration"],
        placement["metadata"]["generation"]
    );

    // kubectl wait returns once the other placement is ready everywhere,
    // and does not for the failing one.
    let waited = kubectl(
        &root,
        &[
            "wait",
            "--for=condition=Ready",
            "placement/api",
            "-n",
            "shop",
            "--timeout=120s",
        ],
        None,
    )?;
    assert!(
        waited.status.success(),
        "{}{}",
        String::from_utf8_lossy(&waited.stderr),
        testbed.logs()
    );
    let api = relayctl_status(&testbed, "api")?;
    assert_eq!(
        (api["ready"].as_u64(), api["failed"].as_u64()),
        (Some(AGENTS as u64), Some(0))
    );
    let not_ready = kubectl(
        &root,
        &[
            "wait",
            "--for=condition=Ready",
            "placement/web",
            "-n",
            "shop",
            "--timeout=2s",
        ],
        None,
    )?;
    assert!(!not_ready.status.success(), "web is not ready");

    // relayctl watch, for scripts: 0 once ready; non-zero, naming the
    // failures, once nothing is still on its way.
    let watched = testbed.relayctl(&[
        "watch",
        "api",
        "-n",
        "shop",
        "--timeout",
        "120s",
        "--by",
        "region",
    ])?;
    let text = String::from_utf8_lossy(&watched.stdout).to_string();
    assert!(
        watched.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    assert!(
        text.contains("placement shop/api is ready: 20/20 ready"),
        "{text}"
    );
    for (region, (clusters, _, _)) in &expected_groups {
        let line = format!("  {region}: {clusters}/{clusters} ready, 0 failed\n");
        assert!(text.contains(&line), "{line:?} in {text}");
    }
    let watched = testbed.relayctl(&["watch", "web", "-n", "shop", "--timeout", "120s"])?;
    let error = String::from_utf8_lossy(&watched.stderr).to_string();
    assert!(!watched.status.success(), "web fails");
    assert!(error.contains("3 of 20 clusters failed"), "{error}");
    for name in &expected {
        assert!(
            error.contains(&format!("{name}: Deployment shop/web")),
            "{error}"
        );
    }

    // Singleton status: one destination by name, and the root's own
    // Deployment shows that cluster's rollout.
    let solo = plan.agents[0].name.clone();
    let applied = kubectl(
        &root,
        &["apply", "-f", "-"],
        Some(&SOLO.replace("CLUSTER", &solo)),
    )?;
    anyhow::ensure!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let rollout = kubectl(
        &root,
        &[
            "rollout",
            "status",
            "deploy/solo",
            "-n",
            "shop",
            "--timeout=120s",
        ],
        None,
    )?;
    assert!(
        rollout.status.success(),
        "{}{}{}",
        String::from_utf8_lossy(&rollout.stdout),
        String::from_utf8_lossy(&rollout.stderr),
        testbed.logs()
    );
    assert!(
        String::from_utf8_lossy(&rollout.stdout).contains("successfully rolled out"),
        "{}",
        String::from_utf8_lossy(&rollout.stdout)
    );
    let output = kubectl(
        &root,
        &["get", "deploy", "solo", "-n", "shop", "-o", "json"],
        None,
    )?;
    let deployment: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(deployment["status"]["readyReplicas"], 3, "{deployment}");
    assert_eq!(
        deployment["status"]["observedGeneration"],
        deployment["metadata"]["generation"]
    );
    // A placement on many clusters copies no status onto its objects.
    let output = kubectl(
        &root,
        &["get", "deploy", "api", "-n", "shop", "-o", "json"],
        None,
    )?;
    let api: Value = serde_json::from_slice(&output.stdout)?;
    assert!(
        api.get("status")
            .is_none_or(|status| status.get("readyReplicas").is_none()),
        "{api}"
    );
    testbed.stop()?;
    Ok(())
}
