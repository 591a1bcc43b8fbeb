//! One cluster's exact copy, on demand: `relayctl get deploy/web --cluster`
//! and `relayctl events --cluster` ask the cluster's edge agent through the
//! tree, and once the agent is gone, its relay answers with the last state
//! it passed up, marked stale with its age.
//!
//! Real processes: a root, a relay "site", and an edge agent applying to a
//! simulated cluster (the relay's own API server with the status simulator,
//! in this test process) through the kube crate.

use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, kubectl, observe, wait_for, web_image, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

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
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {names: [edge-1]}
"#;

const GET_WEB: &[&str] = &[
    "get",
    "deploy/web",
    "-n",
    "shop",
    "--cluster",
    "edge-1",
    "-o",
    "json",
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs relayctl and records what it printed for a timeout's message.
fn relayctl(mesh: &Mesh, args: &[&str]) -> anyhow::Result<Output> {
    let output = mesh.relayctl(args)?;
    observe(format_args!(
        "relayctl {}: {}{}",
        args.join(" "),
        text(&output.stdout),
        text(&output.stderr)
    ));
    Ok(output)
}

/// The live Deployment relayctl printed, once it has an available replica.
fn available(output: &Output) -> anyhow::Result<Option<Value>> {
    if !output.status.success() {
        return Ok(None);
    }
    let object: Value = serde_json::from_slice(&output.stdout).context("relayctl -o json")?;
    let ready = object["status"]["availableReplicas"].as_u64().unwrap_or(0) > 0;
    Ok(ready.then_some(object))
}

#[test]
fn a_clusters_live_object_and_events_are_read_through_the_tree_then_stale() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    let _site = mesh.add_relay("site", "root")?;
    wait_for("site in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "site", "root").then_some(()))
    })?;
    let mut agent = mesh.add_agent_for("edge-1", "site", "region=eu", &kubeconfig)?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "site").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let applied = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(MANIFESTS))?;
    if !applied.status.success() {
        bail!("kubectl apply: {}", text(&applied.stderr));
    }
    wait_for("web applied in the cluster", SETTLE, || {
        Ok(web_image(&kubeconfig)?.is_some().then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // The live object, status included, as edge-1 holds it: read by its
    // agent and passed up through site.
    let live = wait_for("edge-1's web with an available replica", SETTLE, || {
        available(&relayctl(&mesh, GET_WEB)?)
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(live["kind"], "Deployment");
    assert_eq!(live["metadata"]["name"], "web");
    assert_eq!(live["metadata"]["namespace"], "shop");
    assert_eq!(live["spec"]["replicas"], 2);
    assert!(live["metadata"].get("managedFields").is_none(), "{live}");
    let output = relayctl(&mesh, GET_WEB)?;
    assert!(output.stderr.is_empty(), "live: {}", text(&output.stderr));
    // As a table, the kind's own columns, as kubectl on edge-1 prints them.
    let table = relayctl(&mesh, &GET_WEB[..6])?;
    let table = text(&table.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("web ")),
        "{table}"
    );
    // Without a name: every Deployment relaymesh manages there.
    for args in [
        &["get", "deploy", "-n", "shop", "--cluster", "edge-1"][..],
        &["get", "deployments", "-A", "--cluster", "edge-1"][..],
    ] {
        let output = relayctl(&mesh, args)?;
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        let table = text(&output.stdout);
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|line| line.split_whitespace().collect())
            .collect();
        let web = if args.contains(&"-A") {
            ["shop", "web"].as_slice()
        } else {
            ["web"].as_slice()
        };
        assert_eq!(rows.len(), 2, "{table}");
        assert_eq!(&rows[1][..web.len()], web, "{table}");
    }
    let list = relayctl(
        &mesh,
        &[
            "get",
            "deploy",
            "-n",
            "shop",
            "--cluster",
            "edge-1",
            "-o",
            "json",
        ],
    )?;
    let list: Value = serde_json::from_slice(&list.stdout).context("a list as JSON")?;
    assert_eq!(list["kind"], "List", "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "web", "{list}");
    // Nothing relaymesh manages in another namespace.
    let none = relayctl(
        &mesh,
        &["get", "deploy", "-n", "kube-system", "--cluster", "edge-1"],
    )?;
    assert!(
        none.status.success() && none.stdout.is_empty(),
        "{}",
        text(&none.stderr)
    );
    let yaml = relayctl(
        &mesh,
        &[
            "get",
            "deployments.apps/web",
            "-n",
            "shop",
            "--cluster",
            "edge-1",
            "-o",
            "yaml",
        ],
    )?;
    assert!(yaml.status.success(), "{}", text(&yaml.stderr));
    assert!(
        text(&yaml.stdout).contains("availableReplicas:"),
        "{}",
        text(&yaml.stdout)
    );

    // What relaymesh did not put there is not shown.
    let foreign = kubectl(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "mine",
            "-n",
            "shop",
            "--from-literal=a=b",
        ],
        None,
    )?;
    assert!(foreign.status.success(), "{}", text(&foreign.stderr));
    let refused = relayctl(
        &mesh,
        &["get", "cm/mine", "-n", "shop", "--cluster", "edge-1"],
    )?;
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("only objects relaymesh manages"),
        "{}",
        text(&refused.stderr)
    );
    // Nor can a relay be read as a cluster.
    let relay = relayctl(
        &mesh,
        &["get", "deploy/web", "-n", "shop", "--cluster", "site"],
    )?;
    assert!(!relay.status.success());
    assert!(
        text(&relay.stderr).contains("not found"),
        "{}",
        text(&relay.stderr)
    );

    // Events: the simulated cluster may have none, but the question is
    // answered by the agent.
    let events = relayctl(&mesh, &["events", "--cluster", "edge-1"])?;
    assert!(events.status.success(), "{}", text(&events.stderr));
    let table = text(&events.stdout);
    assert!(
        table.starts_with("LAST SEEN") || table == "No events found.\n",
        "{table}"
    );
    let events = relayctl(
        &mesh,
        &["events", "--cluster", "edge-1", "-n", "shop", "-o", "json"],
    )?;
    assert!(events.status.success(), "{}", text(&events.stderr));
    let events: Value = serde_json::from_slice(&events.stdout)?;
    assert_eq!(events["kind"], "ClusterEvents");
    assert_eq!(events["stale"], false);
    assert!(events["items"].is_array(), "{events}");

    // The agent goes away: site answers with what it last passed up,
    // marked stale with its age.
    agent.kill()?;
    wait_for("site to see edge-1 gone", SETTLE, || {
        let tree = mesh.tree()?;
        observe(&tree);
        Ok((!connected_under(&tree, "edge-1", "site")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let path = "/apis/relaymesh.dev/v1alpha1/clusters/edge-1/object\
                ?group=apps&version=v1&kind=Deployment&namespace=shop&name=web";
    let stale = wait_for("a stale answer about edge-1", SETTLE, || {
        let raw = kubectl(&mesh.kubeconfig(), &["get", "--raw", path], None)?;
        if !raw.status.success() {
            return Ok(None);
        }
        let reply: Value = serde_json::from_slice(&raw.stdout)?;
        Ok((reply["stale"] == true).then_some(reply))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(stale["kind"], "ClusterObject");
    assert_eq!(stale["cluster"], "edge-1");
    assert!(stale["ageSeconds"].is_u64(), "{stale}");
    assert_eq!(stale["object"]["metadata"]["name"], "web");
    let available = &stale["object"]["status"]["availableReplicas"];
    assert!(available.as_u64().unwrap_or(0) > 0, "{stale}");

    let output = relayctl(&mesh, GET_WEB)?;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let note = text(&output.stderr);
    assert!(
        note.contains("edge-1 is not reachable; this is its last reported state,")
            && note.trim_end().ends_with(" old"),
        "{note}"
    );
    let object: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(object["metadata"]["name"], "web");

    // A question never answered live has nothing to show.
    let never = relayctl(
        &mesh,
        &["get", "deploy/other", "-n", "shop", "--cluster", "edge-1"],
    )?;
    assert!(!never.status.success());
    assert!(
        text(&never.stderr).contains("kept no earlier answer"),
        "{}",
        text(&never.stderr)
    );
    Ok(())
}
