//! Cordon, drain and capacity: draining a cluster re-places a
//! `maxClusters: 2` placement on the spare cluster, and removes the drained
//! cluster's copy only once the spare's is ready (sampled on a thread
//! throughout). Every cluster runs at most one placement
//! (`--max-placements 1`): with the other two full and one of them
//! cordoned too, a new bounded placement finds no cluster and says so in
//! its status; uncordoning the drained cluster (empty now) gives it one.
//! `Cluster.status` shows capacity, cordon and drain.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    app_workload, connected_under, kubectl_get, observe, wait_for, web_ready, web_workload,
    ApiReader, Mesh, Sampler,
};
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(90);
const NAMES: [&str; 3] = ["edge-1", "edge-2", "edge-3"];

/// Whether a cluster has `shop/web`, and whether it is ready.
fn web(kubeconfig: &Path) -> anyhow::Result<(bool, bool)> {
    web_ready(kubeconfig, 1)
}

#[test]
fn a_drained_cluster_keeps_its_copy_until_its_replacement_is_ready() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for name in NAMES {
        // Ready a while after applied: the window in which removing the
        // drained copy too early would show.
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions {
                delay: Duration::from_secs(3),
                ..SimulatorOptions::default()
            },
        ))?;
        agents.push(mesh.add_agent_joined_with(
            name,
            "eu",
            "region=eu",
            cluster.kubeconfig(),
            &["--max-placements", "1"],
            &[],
        )?);
        clusters.push(cluster);
    }
    wait_for("every agent in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(NAMES
            .iter()
            .all(|name| connected_under(&tree, name, "eu"))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let kubeconfigs: Vec<PathBuf> = clusters
        .iter()
        .map(|cluster| cluster.kubeconfig().to_path_buf())
        .collect();

    mesh.apply(&web_workload(
        "nginx:1.27",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}\n  maxClusters: 2",
        "",
    ))?;
    let holders = wait_for("web ready on two clusters", SETTLE, || {
        let mut holders = Vec::new();
        for (index, kubeconfig) in kubeconfigs.iter().enumerate() {
            if web(kubeconfig)? == (true, true) {
                holders.push(index);
            }
        }
        observe(format!("{holders:?}"));
        Ok((holders.len() == 2).then_some(holders))
    })
    .with_context(|| mesh.logs())?;
    let drained = holders[0];
    let kept = holders[1];
    let spare = (0..3)
        .find(|index| !holders.contains(index))
        .context("a spare")?;

    // Drain the first holder, reading it and the spare throughout (the
    // drained one first: its copy gone means the spare's was ready before).
    let (read_drained, read_spare) = (
        ApiReader::new(&kubeconfigs[drained])?,
        ApiReader::new(&kubeconfigs[spare])?,
    );
    let sampler = Sampler::start(move || {
        let (on_drained, _) = read_drained.web_ready(1)?;
        let (on_spare, ready_on_spare) = read_spare.web_ready(1)?;
        Ok(Some(json!({
            "drained": on_drained, "spare": on_spare, "spareReady": ready_on_spare,
        })))
    });
    mesh.relayctl_ok(&["drain", NAMES[drained], "--wait", "--timeout", "3m"])
        .with_context(|| mesh.logs())?;
    // Read at once: the status no longer counts the drained cluster beside
    // its replacement (issue 31: READY 3/2 right after --wait).
    let right_after = mesh.placement_status("web", "shop")?;
    assert_eq!(
        (
            &right_after["selected"],
            &right_after["ready"],
            &right_after["pending"]
        ),
        (&Value::from(2), &Value::from(2), &Value::from(0)),
        "right after drain --wait: {right_after}"
    );
    wait_for("the drained copy gone", SETTLE, || {
        Ok((web(&kubeconfigs[drained])? == (false, false)).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let seen = sampler.finish();
    assert_eq!(
        web(&kubeconfigs[spare])?,
        (true, true),
        "replaced on the spare"
    );
    assert_eq!(
        web(&kubeconfigs[kept])?,
        (true, true),
        "the other holder kept it"
    );
    assert!(
        seen.iter()
            .any(|read| read["drained"] == true && read["spare"] == true),
        "both copies ran side by side for a while: {seen:?}"
    );
    for read in &seen {
        assert!(
            read["drained"] == true || read["spareReady"] == true,
            "the drained copy was gone before its replacement was ready: {read} in {seen:?}"
        );
    }
    let object = mesh.cluster_object(NAMES[drained])?;
    assert_eq!(object["status"]["cordoned"], true, "{object}");
    assert_eq!(object["status"]["drain"], "Drained", "{object}");
    // `relayctl get clusters -o wide` shows it, as kubectl shows a node.
    let table = mesh.relayctl_ok(&["get", "clusters", "-o", "wide"])?;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let row: Vec<&str> = table
        .lines()
        .find(|line| line.starts_with(NAMES[drained]))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let cell = |column: &str| {
        let index = header.iter().position(|name| *name == column)?;
        row.get(index).copied()
    };
    assert_eq!(cell("CORDONED"), Some("true"), "{table}");
    assert_eq!(cell("DRAIN"), Some("Drained"), "{table}");
    assert!(
        header.contains(&"CPU") && header.contains(&"MEMORY"),
        "{table}"
    );
    // Its AGE is since it joined, as its record says.
    let age = cell("AGE").unwrap_or("");
    assert!(age.ends_with('s') || age.ends_with('m'), "{table}");
    let joined = object["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or("");
    let joined = humantime::parse_rfc3339(joined).with_context(|| format!("{object}"))?;
    let since = std::time::SystemTime::now().duration_since(joined)?;
    assert!(
        since < Duration::from_secs(3600),
        "joined {since:?} ago: {object}"
    );
    let status = wait_for("the placement ready on two", SETTLE, || {
        let output = mesh.relayctl(&["status", "web", "-n", "shop", "-o", "json"])?;
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        observe(&status);
        Ok((status["selected"] == 2 && status["ready"] == 2).then_some(status))
    })?;
    assert_eq!(status["failed"], 0, "{status}");

    // Every cluster is full now but the drained one; cordon the holder
    // that kept web too. A new bounded placement finds no cluster, and
    // says so; the cordoned holder keeps web.
    let spare_object = mesh.cluster_object(NAMES[spare])?;
    assert_eq!(
        spare_object["status"]["capacity"]["placements"], "1",
        "{spare_object}"
    );
    mesh.relayctl_ok(&["cordon", NAMES[kept]])?;
    wait_for("the cordon in the inventory", SETTLE, || {
        let object = mesh.cluster_object(NAMES[kept])?;
        Ok((object["status"]["cordoned"] == true).then_some(()))
    })?;
    mesh.apply(&api_workload())?;
    let unsatisfied = wait_for("api unsatisfied", SETTLE, || {
        let placement = kubectl_get(&mesh.kubeconfig(), &["placement", "api", "-n", "shop"])?;
        Ok(placement.filter(|placement| placement["status"]["clusters"]["shortfall"] == 1))
    })
    .with_context(|| mesh.logs())?;
    let satisfied = unsatisfied["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|condition| condition["type"] == "Satisfied")
        .cloned()
        .unwrap_or_default();
    assert_eq!(satisfied["status"], "False", "{unsatisfied}");
    assert_eq!(satisfied["reason"], "NotEnoughClusters", "{unsatisfied}");
    for kubeconfig in &kubeconfigs {
        assert!(!api(kubeconfig)?, "no cluster has room for api");
    }
    assert_eq!(
        web(&kubeconfigs[kept])?,
        (true, true),
        "cordoned, it keeps web"
    );

    // Uncordon the drained cluster, empty now: api goes there.
    mesh.relayctl_ok(&["uncordon", NAMES[drained]])?;
    wait_for("api on the uncordoned cluster", SETTLE, || {
        Ok(api(&kubeconfigs[drained])?.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("api satisfied", SETTLE, || {
        let output = mesh.relayctl(&["status", "api", "-n", "shop", "-o", "json"])?;
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        Ok((status["ready"] == 1 && status["selected"] == 1).then_some(()))
    })?;
    assert!(!api(&kubeconfigs[kept])?);
    assert!(!api(&kubeconfigs[spare])?);
    mesh.relayctl_ok(&["uncordon", NAMES[kept]])?;
    wait_for("both schedulable again", SETTLE, || {
        let drained = mesh.cluster_object(NAMES[drained])?;
        let kept = mesh.cluster_object(NAMES[kept])?;
        let back = drained["status"]["cordoned"] == false
            && drained["status"].get("drain").is_none()
            && kept["status"]["cordoned"] == false;
        Ok(back.then_some(()))
    })?;

    // Refusals name what is wrong.
    let output = mesh.relayctl(&["drain", "eu"])?;
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("not a cluster"), "{error}");
    let output = mesh.relayctl(&["cordon", "nowhere"])?;
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not in the tree"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}

/// A second workload, on one cluster.
fn api_workload() -> String {
    app_workload(
        "shop",
        "api",
        "api:1",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}\n  maxClusters: 1",
        "",
    )
}

/// Whether a cluster has `shop/api`.
fn api(kubeconfig: &Path) -> anyhow::Result<bool> {
    Ok(kubectl_get(kubeconfig, &["deployment", "api", "-n", "shop"])?.is_some())
}

/// Whether a cluster has Deployment `shop/NAME`.
fn deployed(kubeconfig: &Path, name: &str) -> anyhow::Result<bool> {
    Ok(kubectl_get(kubeconfig, &["deployment", name, "-n", "shop"])?.is_some())
}

/// `edge-agent join --max-replicas 4`: with a placement of 3 replicas on
/// it, one of 2 more waits on the cluster, failing and saying why; the
/// cluster is labelled full, so a `maxClusters: 1` placement goes to the
/// other cluster; once the first placement is deleted, the waiting one runs
/// and the cluster is no longer full.
#[test]
fn a_cluster_runs_no_more_replicas_than_its_capacity() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _relay = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, limit) in [("small", Some("4")), ("big", None)] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        let join: Vec<&str> = limit.map_or_else(Vec::new, |limit| vec!["--max-replicas", limit]);
        agents.push(mesh.add_agent_joined_with(
            name,
            "eu",
            "region=eu",
            cluster.kubeconfig(),
            &join,
            &[],
        )?);
        clusters.push(cluster);
    }
    wait_for("both agents in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(["small", "big"]
            .iter()
            .all(|name| connected_under(&tree, name, "eu"))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let (small, big) = (clusters[0].kubeconfig(), clusters[1].kubeconfig());
    let object = mesh.cluster_object("small")?;
    assert_eq!(object["status"]["capacity"]["replicas"], "4", "{object}");

    mesh.apply(&app_workload(
        "shop",
        "web",
        "nginx:1.27",
        3,
        "{names: [small]}",
        "",
    ))?;
    wait_for("web on small", SETTLE, || {
        Ok(deployed(small, "web")?.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.apply(&app_workload(
        "shop",
        "api",
        "api:1",
        2,
        "{names: [small]}",
        "",
    ))?;
    let status = wait_for("api failing on small", SETTLE, || {
        let output = mesh.relayctl(&["status", "api", "-n", "shop", "-o", "json"])?;
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        observe(&status);
        Ok((status["failed"] == 1).then_some(status))
    })
    .with_context(|| mesh.logs())?;
    let message = status["failing"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ask for 2 replicas and this cluster runs 3 of at most 4"),
        "{status}"
    );
    assert!(!deployed(small, "api")?, "api waits");
    wait_for("small labelled full", SETTLE, || {
        let object = mesh.cluster_object("small")?;
        observe(&object);
        Ok((object["metadata"]["labels"]["relaymesh.dev/full"] == "true").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    mesh.apply(&app_workload(
        "shop",
        "batch",
        "batch:1",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}\n  maxClusters: 1",
        "",
    ))?;
    wait_for("batch on big", SETTLE, || {
        Ok(deployed(big, "batch")?.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert!(!deployed(small, "batch")?, "the full cluster gets none");

    let output = relaymesh_tests::kubectl(
        &mesh.kubeconfig(),
        &["delete", "placement", "web", "-n", "shop"],
        None,
    )?;
    assert!(output.status.success(), "{output:?}");
    wait_for("api on small, web gone", SETTLE, || {
        Ok((deployed(small, "api")? && !deployed(small, "web")?).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    wait_for("small no longer full", SETTLE, || {
        let object = mesh.cluster_object("small")?;
        observe(&object);
        Ok(object["metadata"]["labels"]
            .get("relaymesh.dev/full")
            .is_none()
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    assert!(!deployed(small, "batch")?, "batch stays where it went");

    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}
