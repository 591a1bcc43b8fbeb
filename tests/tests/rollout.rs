//! Staged rollouts over 12 clusters in 3 regions (a relay each).
//!
//! * Progressive, `maxConcurrency: 2`, `minSuccessTime`, `orderBy: carbon`:
//!   sampled throughout through `relayctl status -o json` and every
//!   cluster's own API, never more than 2 clusters are updating and the
//!   clusters start in the order of their `carbon` label.
//! * A failing image with `maxFailures: 1` halts after the first wave and
//!   leaves the other clusters on the previous revision; `rollout abort`
//!   sends the failed ones back; a revision applied while paused reaches
//!   nobody until `rollout resume`.
//! * Canary per region: exactly one cluster per region gets the new
//!   revision first; `rollout promote` sends it everywhere.
//! * `maxUnavailablePerGroup` over the regional relays: never more than one
//!   cluster of a region in flight; a failure in eu (a template gives its
//!   clusters a failing image) halts the rollout, naming eu, while eu's
//!   other clusters keep the previous revision.
//! * `maxUnavailablePerGroup` over a label that cuts across the relays:
//!   never more than one cluster of a value in flight, to completion.
//! * `orderBy` on a `maxClusters: 6` placement: one at a time, in the
//!   order of the chosen clusters' carbon intensity.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    app_workload, connected_under, kubectl_get, observe, wait_for, web_workload, ApiReader, Mesh,
    Sampler,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(120);
const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// Cluster `i` (0-based): its name, region and carbon intensity (1 to 12,
/// in another order than the names, compared as numbers).
fn cluster(i: usize) -> (String, &'static str, u32) {
    let carbon = (i * 7 % 12) as u32 + 1;
    (format!("edge-{:02}", i + 1), REGIONS[i % 3], carbon)
}

const PROGRESSIVE: &str = "  rollout:
    strategy: Progressive
    maxConcurrency: 2
    minSuccessTime: 1s
    maxFailures: 1
    orderBy: carbon
";

/// Waits until the rollout of `shop/web` is in `phase`.
fn wait_phase(mesh: &Mesh, phase: &str, what: &str) -> anyhow::Result<Value> {
    wait_for(what, SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status["rollout"]);
        Ok((status["rollout"]["phase"] == phase).then_some(status))
    })
    .with_context(|| mesh.logs())
}

/// Reads `shop/web`'s `status.rollout` on a thread until finished.
fn rollout_sampler(mesh: &Mesh) -> anyhow::Result<Sampler> {
    let root = ApiReader::new(&mesh.kubeconfig())?;
    Ok(Sampler::start(move || {
        let placement = root.get("/apis/relaymesh.dev/v1alpha1/namespaces/shop/placements/web")?;
        Ok(placement.map(|placement| placement["status"]["rollout"].clone()))
    }))
}

/// Every cluster's image of `shop/web`, by name, read one cluster after
/// the other in `clusters`' order.
fn images(clusters: &[(String, ApiReader)]) -> BTreeMap<String, Option<String>> {
    clusters
        .iter()
        .map(|(name, cluster)| {
            (
                name.clone(),
                cluster.deployment_image("shop", "web").ok().flatten(),
            )
        })
        .collect()
}

#[test]
fn revisions_roll_out_in_waves_in_order_halt_on_failures_and_obey_commands() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let mut relays = Vec::new();
    for region in REGIONS {
        relays.push(mesh.add_relay(region, "root")?);
    }
    wait_for("the three relays in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(REGIONS
            .iter()
            .all(|region| connected_under(&tree, region, "root"))
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let mut simulated = Vec::new();
    let mut agents = Vec::new();
    let mut clusters: Vec<(String, ApiReader)> = Vec::new();
    let mut carbon: BTreeMap<String, u32> = BTreeMap::new();
    let mut region_of: BTreeMap<String, &str> = BTreeMap::new();
    for i in 0..12 {
        let (name, region, intensity) = cluster(i);
        let sim = runtime.block_on(SimulatedCluster::start(
            &name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        // `flavor` makes section 6's image fail in eu alone.
        let flavor = if region == "eu" { "fail" } else { "ok" };
        let labels = format!("region={region},carbon={intensity},flavor={flavor}");
        agents.push(mesh.add_agent_for(&name, region, &labels, sim.kubeconfig())?);
        clusters.push((name.clone(), ApiReader::new(sim.kubeconfig())?));
        carbon.insert(name.clone(), intensity);
        region_of.insert(name, region);
        simulated.push(sim);
    }
    wait_for("every agent in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok((0..12)
            .all(|i| {
                let (name, region, _) = cluster(i);
                connected_under(&tree, &name, region)
            })
            .then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // 1. The first revision, from nothing, two clusters at a time, the
    //    smallest carbon intensity first. The sampler reads the clusters
    //    largest intensity first: a cluster seen running was in the wave
    //    then, and so were all smaller ones, read later, each running by
    //    then unless one of the two in flight.
    let mut watched = clusters.clone();
    watched.sort_by_key(|(name, _)| std::cmp::Reverse(carbon[name]));
    let sampled = watched.clone();
    let sampler = Sampler::start(move || {
        let images = images(&sampled);
        Ok(Some(serde_json::to_value(images)?))
    });
    let kubeconfig = mesh.kubeconfig();
    let status_sampler = Sampler::start(move || {
        let output = relaymesh_tests::run_ok(
            std::process::Command::new(relaymesh_tests::binary("relayctl")?)
                .args(["--kubeconfig"])
                .arg(&kubeconfig)
                .args(["status", "web", "-n", "shop", "-o", "json"]),
        )?;
        Ok(Some(serde_json::from_slice(&output.stdout)?))
    });
    mesh.apply(&web_workload(
        "nginx:1.27",
        1,
        "{labelSelector: {matchLabels: {}}}",
        PROGRESSIVE,
    ))?;
    let done = wait_phase(&mesh, "Complete", "the first revision everywhere")?;
    assert_eq!(done["rollout"]["clusters"]["succeeded"], 12, "{done}");
    let mut samples = sampler.finish();
    // One read after completion: a sample (twelve reads) can take
    // longer than the last cluster's minimum success time on a loaded
    // machine, so the sampler alone may miss the last one starting.
    samples.push(serde_json::to_value(images(&watched))?);
    let statuses = status_sampler.finish();
    let mut started: Vec<String> = Vec::new();
    for sample in &samples {
        let running: BTreeSet<&str> = sample
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, image)| image.as_str() == Some("nginx:1.27"))
            .map(|(name, _)| name.as_str())
            .collect();
        // Never ahead of the order by more than the two in flight.
        let highest = running.iter().map(|name| carbon[*name]).max().unwrap_or(0);
        assert!(
            highest as usize <= running.len() + 2,
            "clusters started out of carbon order: {running:?}"
        );
        let mut new: Vec<&str> = running
            .into_iter()
            .filter(|name| !started.iter().any(|seen| seen == name))
            .collect();
        new.sort_by_key(|name| carbon[*name]);
        started.extend(new.into_iter().map(str::to_string));
    }
    assert_eq!(
        started.len(),
        12,
        "every cluster seen starting: {started:?}"
    );
    for (index, name) in started.iter().enumerate() {
        assert!(
            carbon[name] as usize <= index + 3,
            "{name} (carbon {}) started as number {}: {started:?}",
            carbon[name],
            index + 1
        );
    }
    let mut updating_seen = 0;
    for status in &statuses {
        let updating = status["rollout"]["clusters"]["updating"]
            .as_u64()
            .unwrap_or(0);
        assert!(updating <= 2, "more than 2 updating: {status}");
        updating_seen = updating_seen.max(updating);
    }
    assert!(updating_seen > 0, "the sampler saw the rollout run");

    // 2. A failing image: the first two clusters fail, and the rollout
    //    halts there; the others keep 1.27.
    mesh.apply(&web_workload(
        "nginx:fail",
        1,
        "{labelSelector: {matchLabels: {}}}",
        PROGRESSIVE,
    ))?;
    let halted = wait_phase(&mesh, "Halted", "the failing revision to halt")?;
    let rollout = &halted["rollout"];
    assert_eq!(rollout["clusters"]["failed"], 2, "{halted}");
    assert!(
        rollout["message"]
            .as_str()
            .unwrap_or_default()
            .contains("2 clusters failed"),
        "{halted}"
    );
    let now = images(&clusters);
    let failing: Vec<&String> = now
        .iter()
        .filter(|(_, image)| image.as_deref() == Some("nginx:fail"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(failing.len(), 2, "{now:?}");
    assert!(
        failing.iter().all(|name| carbon[*name] <= 2),
        "the two smallest go first: {failing:?}"
    );
    assert!(
        now.iter()
            .filter(|(name, _)| !failing.contains(name))
            .all(|(_, image)| image.as_deref() == Some("nginx:1.27")),
        "untouched clusters keep the previous revision: {now:?}"
    );
    let text = mesh.relayctl_ok(&["rollout", "status", "web", "-n", "shop"])?;
    assert!(text.contains("Halted"), "{text}");

    // 3. Abort: the two go back to 1.27. `--wait` returns once they run it,
    //    ready, and every reading says so at once (issue 31: `rollout
    //    status` said "every cluster runs the previous revision" beside
    //    "1 failed, 3 waiting").
    mesh.relayctl_ok(&[
        "rollout",
        "abort",
        "web",
        "-n",
        "shop",
        "--wait",
        "--timeout",
        "2m",
    ])
    .with_context(|| mesh.logs())?;
    let now = images(&clusters);
    assert!(
        now.values()
            .all(|image| image.as_deref() == Some("nginx:1.27")),
        "right after abort --wait, every cluster runs 1.27: {now:?}"
    );
    let aborted = mesh.placement_status("web", "shop")?;
    assert_eq!(aborted["rollout"]["phase"], "Aborted", "{aborted}");
    assert_eq!(
        aborted["rollout"]["message"], "aborted: every cluster runs the previous revision",
        "{aborted}"
    );
    assert_eq!(aborted["revision"], aborted["rollout"]["previousRevision"]);
    assert_eq!(
        (&aborted["ready"], &aborted["updated"], &aborted["failed"]),
        (&Value::from(12), &Value::from(12), &Value::from(0)),
        "{aborted}"
    );
    assert_eq!(aborted["conditions"]["Ready"], "True", "{aborted}");

    // 4. Paused, a new revision reaches nobody; resumed, everyone.
    mesh.relayctl_ok(&["rollout", "pause", "web", "-n", "shop"])?;
    wait_for("the pause in the spec", SETTLE, || {
        let placement = kubectl_get(&mesh.kubeconfig(), &["placement", "web", "-n", "shop"])?;
        Ok(placement.filter(|p| p["spec"]["rollout"]["paused"] == true))
    })?;
    let paused_spec = PROGRESSIVE.replace("orderBy: carbon", "orderBy: carbon\n    paused: true");
    mesh.apply(&web_workload(
        "nginx:1.28",
        1,
        "{labelSelector: {matchLabels: {}}}",
        &paused_spec,
    ))?;
    let paused = wait_phase(&mesh, "Paused", "the paused rollout")?;
    assert_eq!(paused["rollout"]["admitted"], 0, "{paused}");
    assert!(
        images(&clusters)
            .values()
            .all(|image| image.as_deref() == Some("nginx:1.27")),
        "nobody got the paused revision"
    );
    mesh.relayctl_ok(&[
        "rollout",
        "resume",
        "web",
        "-n",
        "shop",
        "--wait",
        "--timeout",
        "3m",
    ])
    .with_context(|| mesh.logs())?;
    let resumed = mesh.placement_status("web", "shop")?;
    assert_eq!(resumed["rollout"]["phase"], "Complete", "{resumed}");
    assert_eq!(resumed["conditions"]["Ready"], "True", "{resumed}");
    assert!(images(&clusters)
        .values()
        .all(|image| image.as_deref() == Some("nginx:1.28")));
    let history = mesh.relayctl_ok(&["rollout", "history", "web", "-n", "shop"])?;
    for outcome in ["Complete", "Aborted"] {
        assert!(history.contains(outcome), "{history}");
    }

    // 5. Canary per region: one cluster per region first. A success time
    //    longer than the test keeps it at the canary until promoted.
    mesh.apply(&canary_workload())?;
    let canary = wait_for("one canary per region", SETTLE, || {
        let running = api_clusters(&clusters);
        observe(format!("{running:?}"));
        Ok((running.len() >= 3).then_some(running))
    })
    .with_context(|| mesh.logs())?;
    let regions: BTreeSet<&str> = canary.iter().map(|name| region_of[name.as_str()]).collect();
    assert_eq!(canary.len(), 3, "exactly one per region: {canary:?}");
    assert_eq!(regions.len(), 3, "{canary:?}");
    let api = wait_for("the canary's status", SETTLE, || {
        let status = mesh.placement_status("api", "canary")?;
        observe(&status["rollout"]);
        Ok((status["rollout"]["clusters"]["updating"] == 3).then_some(status))
    })?;
    assert_eq!(api["rollout"]["canaryDone"], false, "{api}");
    assert_eq!(api_clusters(&clusters), canary, "still only the canaries");
    mesh.relayctl_ok(&[
        "rollout",
        "promote",
        "api",
        "-n",
        "canary",
        "--wait",
        "--timeout",
        "3m",
    ])
    .with_context(|| mesh.logs())?;
    assert_eq!(
        api_clusters(&clusters).len(),
        12,
        "right after promote --wait, everywhere"
    );
    let promoted = mesh.placement_status("api", "canary")?;
    assert_eq!(promoted["ready"], 12, "{promoted}");
    assert_eq!(promoted["conditions"]["Ready"], "True", "{promoted}");

    // 6. Per-group budgets over the three regional relays, with eu's
    //    clusters given a failing image by their `flavor` label (a template
    //    of the new revision only): never more than one
    //    cluster of a region in flight (from the root's per-group counts,
    //    sampled throughout); eu's failure halts the rollout, naming eu,
    //    and eu's other clusters keep the previous revision.
    let groups_sampler = rollout_sampler(&mesh)?;
    mesh.apply(&web_workload(
        "nginx:1.29-{{ cluster.labels.flavor }}",
        1,
        "{labelSelector: {matchLabels: {}}}",
        PER_REGION,
    ))?;
    let halted = wait_phase(&mesh, "Halted", "the per-region rollout to halt on eu")?;
    let message = halted["rollout"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("below eu") && message.contains("maxUnavailablePerGroup"),
        "{halted}"
    );
    let now = images(&clusters);
    let eu: Vec<Option<&str>> = now
        .iter()
        .filter(|(name, _)| region_of[name.as_str()] == "eu")
        .map(|(_, image)| image.as_deref())
        .collect();
    assert_eq!(
        eu.iter()
            .filter(|image| **image == Some("nginx:1.29-fail"))
            .count(),
        1,
        "one eu cluster took the failing revision: {now:?}"
    );
    assert_eq!(
        eu.iter()
            .filter(|image| **image == Some("nginx:1.28"))
            .count(),
        3,
        "the other eu clusters keep the previous revision: {now:?}"
    );
    let text = mesh.relayctl_ok(&["rollout", "status", "web", "-n", "shop"])?;
    assert!(text.contains("group eu:"), "{text}");
    let seen = groups_sampler.finish();
    let mut groups_seen = 0;
    for rollout in &seen {
        for group in rollout["groups"].as_array().into_iter().flatten() {
            groups_seen += 1;
            let in_flight =
                group["updating"].as_u64().unwrap_or(0) + group["failed"].as_u64().unwrap_or(0);
            assert!(
                in_flight <= 1,
                "more than one cluster of {} in flight: {rollout}",
                group["name"]
            );
            assert!(group["admitted"].as_u64().unwrap_or(0) <= 4, "{rollout}");
        }
    }
    assert!(groups_seen > 0, "the sampler saw the groups: {seen:?}");

    // 7. Per-group budgets over a label that cuts across the relays
    //    (`flavor`: eu's four clusters are `fail`, the eight of us and ap
    //    `ok`): never more than one cluster of a value in flight, and the
    //    revision completes.
    let groups_sampler = rollout_sampler(&mesh)?;
    mesh.apply(&web_workload(
        "nginx:1.30",
        1,
        "{labelSelector: {matchLabels: {}}}",
        PER_FLAVOR,
    ))?;
    wait_phase(&mesh, "Complete", "the rollout grouped by flavor")?;
    let seen = groups_sampler.finish();
    let mut values: BTreeSet<String> = BTreeSet::new();
    for rollout in &seen {
        for group in rollout["groups"].as_array().into_iter().flatten() {
            let in_flight =
                group["updating"].as_u64().unwrap_or(0) + group["failed"].as_u64().unwrap_or(0);
            if let Some(name) = group["name"].as_str() {
                values.insert(name.to_string());
            }
            if rollout["revision"]
                == seen
                    .last()
                    .map_or(Value::Null, |last| last["revision"].clone())
            {
                assert!(
                    in_flight <= 1,
                    "more than one {} cluster in flight: {rollout}",
                    group["name"]
                );
            }
        }
    }
    assert!(
        values.contains("fail") && values.contains("ok"),
        "the groups are the label's values: {values:?}"
    );
    assert!(images(&clusters)
        .values()
        .all(|image| image.as_deref() == Some("nginx:1.30")));

    // 8. `orderBy` on a count-bounded placement: of the six clusters the
    //    relays choose, one at a time, smallest carbon intensity first.
    //    Clusters only ever start (a sample holds every one before it),
    //    and all six end up running. The order is checked only once every
    //    relay has reported its choice: the root splits a wave by what its
    //    relay children have reported selected, so a holder whose relay
    //    has not reported yet can be passed over for a larger one (a known
    //    gap, docs/api.md "Rollouts"; CI run 50 saw edge-05 start
    //    before edge-03). The order of the rest is asserted below.
    let mut watched = clusters.clone();
    watched.sort_by_key(|(name, _)| std::cmp::Reverse(carbon[name]));
    let sampled = watched.clone();
    let sampler = Sampler::start(move || Ok(Some(serde_json::to_value(batch_clusters(&sampled))?)));
    mesh.apply(&app_workload(
        "bounded",
        "batch",
        "batch:1",
        1,
        "{labelSelector: {matchLabels: {}}}\n  maxClusters: 6",
        BOUNDED_IN_ORDER,
    ))?;
    let done = wait_for("the bounded rollout complete", SETTLE, || {
        let status = mesh.placement_status("batch", "bounded")?;
        observe(&status["rollout"]);
        Ok((status["rollout"]["phase"] == "Complete").then_some(status))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(done["rollout"]["clusters"]["succeeded"], 6, "{done}");
    let mut samples = sampler.finish();
    // One read after completion: on a loaded machine a sample (twelve
    // reads) can take longer than the last cluster's minimum
    // success time, so the sampler alone may miss the last one starting.
    samples.push(serde_json::to_value(batch_clusters(&watched))?);
    let mut holders: Vec<String> = batch_clusters(&clusters).into_iter().collect();
    assert_eq!(holders.len(), 6, "{holders:?}");
    holders.sort_by_key(|name| carbon[name]);
    let mut most = 0;
    let mut before: BTreeSet<String> = BTreeSet::new();
    let mut order: Vec<String> = Vec::new();
    for sample in &samples {
        let running: BTreeSet<String> = serde_json::from_value(sample.clone()).unwrap_or_default();
        assert!(
            running.is_superset(&before),
            "a cluster stopped running: {before:?} then {running:?}"
        );
        // Two seen starting at once are taken in the intended order.
        let mut started: Vec<String> = running.difference(&before).cloned().collect();
        started.sort_by_key(|name| carbon[name]);
        order.extend(started);
        before = running;
        most = most.max(before.len());
    }
    // After the first start, each next start is the smallest holder not
    // yet running, but for the one a late report let through first.
    let mut passed_over = 0;
    for (i, name) in order.iter().enumerate() {
        let smallest_left = holders
            .iter()
            .find(|holder| !order[..i].contains(holder))
            .cloned();
        if smallest_left.as_ref() != Some(name) {
            passed_over += 1;
        }
    }
    assert!(
        passed_over <= 1,
        "started {order:?}, not the holders' order {holders:?} (carbon {carbon:?})"
    );
    assert_eq!(most, 6, "the last read shows all six running");
    drop(agents);
    drop(relays);
    Ok(())
}

/// Progressive, one cluster at a time, smallest carbon intensity first.
const BOUNDED_IN_ORDER: &str = "  rollout:
    strategy: Progressive
    maxConcurrency: 1
    minSuccessTime: 1s
    orderBy: carbon
";

/// The clusters running `bounded/batch`, read in `clusters`' order.
fn batch_clusters(clusters: &[(String, ApiReader)]) -> BTreeSet<String> {
    running("bounded", "batch", clusters)
}

/// Progressive with one cluster in flight per value of `flavor` at most.
const PER_FLAVOR: &str = "  rollout:
    strategy: Progressive
    maxConcurrency: 12
    minSuccessTime: 1s
    maxUnavailablePerGroup: {max: 1, label: flavor}
";

/// Progressive with one cluster in flight per regional relay at most (the
/// image's template gives eu's clusters a failing one).
const PER_REGION: &str = "  rollout:
    strategy: Progressive
    maxConcurrency: 12
    minSuccessTime: 1s
    maxFailures: 5
    maxUnavailablePerGroup: {max: 1, groupBy: Relays}
";

/// A second workload, rolled out by canary: one cluster per region first.
/// A success time longer than the test keeps it at the canary.
fn canary_workload() -> String {
    app_workload(
        "canary",
        "api",
        "api:1",
        1,
        "{labelSelector: {matchLabels: {}}}",
        "  rollout:
    strategy: Canary
    canary: {groupBy: region}
    maxConcurrency: 2
    minSuccessTime: 1h
",
    )
}

/// The clusters running `canary/api`.
fn api_clusters(clusters: &[(String, ApiReader)]) -> BTreeSet<String> {
    running("canary", "api", clusters)
}

/// The clusters that have Deployment `namespace/name`, read one after the
/// other in `clusters`' order.
fn running(namespace: &str, name: &str, clusters: &[(String, ApiReader)]) -> BTreeSet<String> {
    clusters
        .iter()
        .filter(|(_, cluster)| {
            cluster
                .get(&format!(
                    "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
                ))
                .ok()
                .flatten()
                .is_some()
        })
        .map(|(name, _)| name.clone())
        .collect()
}
