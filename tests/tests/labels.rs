//! Cluster labels changed at the root without a re-join: `relayctl label
//! cluster` sets and removes labels, the cluster's record shows them, and
//! a placement that selects by them follows (the Deployment arrives, then
//! goes), while the labels the cluster joined with stay; `relayctl annotate
//! cluster` sets an annotation a template reads.

use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    app_workload, connected_under, kubectl, kubectl_get, observe, wait_for, web_deployment,
    web_workload, Mesh,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// `relayctl get clusters -o json`: the labels of cluster `name`.
fn labels_of(mesh: &Mesh, name: &str) -> anyhow::Result<Value> {
    let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
    let list: Value = serde_json::from_slice(&output.stdout)?;
    observe(&list);
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|cluster| cluster["metadata"]["name"] == name)
        .map(|cluster| cluster["metadata"]["labels"].clone())
        .unwrap_or_default())
}

#[test]
fn labels_set_at_the_root_reach_the_cluster_and_placements_follow() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for name in ["edge-1", "edge-2"] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, "eu", "region=eu", cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("both agents in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "edge-1", "eu") && connected_under(&tree, "edge-2", "eu"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;

    // Refused, each with its reason, and nothing sent.
    for (args, why) in [
        (
            vec!["label", "cluster", "edge-2", "relaymesh.dev/nodes=9"],
            "relaymesh's own",
        ),
        (
            vec!["label", "cluster", "eu", "tier=large"],
            "not a cluster",
        ),
        (
            vec!["label", "cluster", "nowhere", "tier=large"],
            "not in the tree",
        ),
        (vec!["label", "cluster", "edge-2", "tier"], "KEY=VALUE"),
    ] {
        let output = mesh.relayctl(&args)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }

    let workload = web_workload(
        "nginx:1.27",
        1,
        "{labelSelector: {matchLabels: {tier: large}}}",
        "",
    );
    let output = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(&workload))?;
    if !output.status.success() {
        bail!("kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
    }

    mesh.relayctl_ok(&["label", "cluster", "edge-2", "tier=large"])?;
    let labels = wait_for("edge-2 labelled tier=large", SETTLE, || {
        let labels = labels_of(&mesh, "edge-2")?;
        Ok((labels["tier"] == "large").then_some(labels))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(
        labels["region"], "eu",
        "the labels it joined with stay: {labels}"
    );
    wait_for("web on edge-2", SETTLE, || {
        web_deployment(clusters[1].kubeconfig())
    })
    .with_context(|| mesh.logs())?;

    mesh.relayctl_ok(&["label", "cluster", "edge-2", "tier-"])?;
    wait_for("web gone from edge-2", SETTLE, || {
        Ok(web_deployment(clusters[1].kubeconfig())?
            .is_none()
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let labels = labels_of(&mesh, "edge-2")?;
    assert!(labels.get("tier").is_none(), "{labels}");
    assert_eq!(labels["region"], "eu", "{labels}");
    // edge-1 was never labelled, and never selected.
    assert!(web_deployment(clusters[0].kubeconfig())?.is_none());

    // The agent's own flags change its labels too, without a re-join.
    agents.remove(0).stop()?;
    let refused = mesh
        .command("edge-agent", "edge-1")?
        .arg("run")
        .arg("--data-dir")
        .arg(mesh.data_dir("edge-1"))
        .args(["--labels", "relaymesh.dev/nodes=9"])
        .output()?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a reserved label was taken");
    assert!(stderr.contains("relaymesh's own"), "{stderr}");
    let detected = labels_of(&mesh, "edge-1")?;
    agents.push(mesh.start_agent_with("edge-1", &["--labels", "tier=large,region=us"])?);
    let labels = wait_for("edge-1 labelled by its own flags", SETTLE, || {
        let labels = labels_of(&mesh, "edge-1")?;
        Ok((labels["tier"] == "large" && labels["region"] == "us").then_some(labels))
    })
    .with_context(|| mesh.logs())?;
    for (key, value) in detected.as_object().into_iter().flatten() {
        if key.starts_with("relaymesh.dev/") {
            assert_eq!(&labels[key], value, "detected labels stay: {labels}");
        }
    }
    wait_for("web on edge-1", SETTLE, || {
        web_deployment(clusters[0].kubeconfig())
    })
    .with_context(|| mesh.logs())?;

    // Annotations set at the root feed templates: without it the cluster
    // fails naming the annotation; with it, its copy carries the value.
    mesh.apply(&app_workload(
        "notes",
        "api",
        "api:{{ cluster.annotations.example.com/owner }}",
        1,
        "{names: [edge-2]}",
        "",
    ))?;
    wait_for("edge-2 failing for want of the annotation", SETTLE, || {
        let status = mesh.placement_status("api", "notes")?;
        observe(&status);
        let failing = status["failing"][0]["message"].as_str().unwrap_or_default();
        Ok(failing
            .contains("has no annotation \"example.com/owner\"")
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let refused = mesh.relayctl(&["annotate", "cluster", "edge-2", "bad key=x"])?;
    assert!(!refused.status.success(), "a bad annotation key was taken");
    mesh.relayctl_ok(&["annotate", "cluster", "edge-2", "example.com/owner=team-a"])?;
    let image = |kubeconfig: &std::path::Path| -> anyhow::Result<Option<String>> {
        Ok(
            kubectl_get(kubeconfig, &["deployment", "api", "-n", "notes"])?.and_then(|api| {
                api["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .map(str::to_string)
            }),
        )
    };
    wait_for("api on edge-2 with the owner in its image", SETTLE, || {
        let now = image(clusters[1].kubeconfig())?;
        observe(format!("{now:?}"));
        Ok((now.as_deref() == Some("api:team-a")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let cluster = mesh.cluster_object("edge-2")?;
    assert_eq!(
        cluster["metadata"]["annotations"]["example.com/owner"], "team-a",
        "{cluster}"
    );
    assert!(
        cluster["metadata"]["labels"]
            .get("example.com/owner")
            .is_none(),
        "annotations are no labels: {cluster}"
    );

    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
