//! `testbed bench storm`: a reconnect storm. Two relays under the root,
//! N hollow agents under each. Relay A is killed with SIGKILL while its
//! agents hold a placed ConfigMap, the Placement moves them to a new one,
//! and A is started again from its store: measured is the time until every
//! agent below A has reconnected and applied the new object (each agent
//! redials with jittered exponential backoff). Meanwhile an unrelated busy
//! link (the root to relay B to one of B's agents) carries revision after
//! revision of a 100 KB ConfigMap, one at a time; its throughput during the
//! storm is compared with before it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::report::{
    cpu_seconds, spread, udp_receive_drops, udp_receive_drops_since, Figure, Report,
};
use super::root::{create_namespace, filler, placements_api};
use crate::hollow::HollowCluster;
use crate::up::{Fleet, UpOptions};

/// The namespace the benchmark's objects live in.
const NAMESPACE: &str = "storm";
/// How often the clusters are looked at while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Busy-link revisions that make the baseline before the kill.
const BASELINE_REVISIONS: usize = 10;

/// What to run.
#[derive(Debug, Clone)]
pub struct StormOptions {
    /// Hollow agents below each of the two relays.
    pub agents_per_relay: usize,
    /// The payloads' size in bytes.
    pub payload_bytes: usize,
    /// Where the fleet lives.
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long each wait may take.
    pub timeout: Duration,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct StormRun {
    /// Agents below the killed relay.
    pub agents: usize,
    /// Seconds from the restart until every agent below it applied the new
    /// object.
    pub all_converged: f64,
    /// Per-agent seconds from the restart, median and 99th percentile.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
    /// Seconds the relay was down (kill to restart).
    pub down: f64,
    /// Busy-link revisions per second before the kill.
    pub busy_before: f64,
    /// Busy-link revisions per second from the kill until all converged.
    pub busy_during: f64,
    /// Busy-link revisions completed during the storm.
    pub busy_during_revisions: usize,
    /// CPU seconds the restarted relay used from its restart until all
    /// converged.
    pub relay_cpu: Option<f64>,
    /// CPU seconds this process (every hollow agent) used meanwhile.
    pub agents_cpu: Option<f64>,
    /// Datagrams dropped at full UDP receive buffers meanwhile, host-wide
    /// (each was sent again).
    pub udp_receive_drops: Option<u64>,
}

/// Brings up the fleet, runs the storm, stops the fleet.
pub async fn run_fleet(options: &StormOptions) -> anyhow::Result<StormRun> {
    let up = UpOptions::fresh(
        options
            .dir
            .join(format!("storm-{}", options.agents_per_relay)),
        vec![2],
        options.agents_per_relay * 2,
        true,
        options.bin_dir.clone(),
    )?;
    println!(
        "storm | bringing up 2 relays with {} hollow agents each",
        options.agents_per_relay
    );
    let mut fleet = Fleet::start(&up).await?;
    let result = measure(&mut fleet, options).await;
    fleet.shutdown().await;
    result
}

async fn measure(fleet: &mut Fleet, options: &StormOptions) -> anyhow::Result<StormRun> {
    let client = fleet.root_client().await?;
    let relays: Vec<(String, String)> = fleet
        .plan
        .relays
        .iter()
        .map(|relay| (relay.name.clone(), relay.parent.clone()))
        .collect();
    let [(victim, _), (other, _)] = relays.as_slice() else {
        bail!("the storm fleet has two relays, not {}", relays.len());
    };
    let (victim, other) = (victim.clone(), other.clone());
    let below = |relay: &str| -> Vec<String> {
        fleet
            .plan
            .agents
            .iter()
            .filter(|agent| agent.parent == relay)
            .map(|agent| agent.name.clone())
            .collect()
    };
    let victims = below(&victim);
    let busy_agent = below(&other)
        .into_iter()
        .next()
        .context("the other relay has no agent")?;
    let hollow = fleet.hollow().context("the fleet has no hollow agents")?;
    let victim_clusters: BTreeMap<String, HollowCluster> = victims
        .iter()
        .filter_map(|name| Some((name.clone(), hollow.cluster(name)?.clone())))
        .collect();
    let busy_cluster = hollow
        .cluster(&busy_agent)
        .context("no hollow cluster for the busy agent")?
        .clone();

    create_namespace(&client, NAMESPACE).await?;
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
    for (name, seed) in [("storm-1", 1), ("storm-2", 2), ("busy", 0)] {
        let object: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {"revision": "0", "payload": filler(seed, options.payload_bytes)},
        }))?;
        configmaps
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("cannot create ConfigMap {name}"))?;
    }
    let placements = placements_api(&client, NAMESPACE);
    for (name, object, clusters) in [
        (
            "storm",
            "storm-1",
            json!({"labelSelector": {"matchLabels": {"region": victim}}}),
        ),
        ("busy", "busy", json!({"names": [busy_agent]})),
    ] {
        let placement: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "Placement",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "workloads": [{"namespaces": [NAMESPACE], "kind": "ConfigMap", "names": [object]}],
                "clusters": clusters,
            },
        }))?;
        placements
            .create(&PostParams::default(), &placement)
            .await
            .with_context(|| format!("cannot create Placement {name}"))?;
    }
    println!(
        "storm | waiting until the {} agents below {victim} hold storm-1",
        victims.len()
    );
    wait_applied(&victim_clusters, "storm-1", options.timeout, Instant::now()).await?;

    // The busy link: one revision in flight at a time, each completion
    // recorded.
    let stop = CancellationToken::new();
    let completions = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let busy = busy_loop(
        configmaps.clone(),
        busy_cluster,
        options.payload_bytes,
        completions.clone(),
        stop.clone(),
    );
    let storm = async {
        let baseline_start = Instant::now();
        wait_until(options.timeout, || {
            completions.lock().map_or(0, |done| done.len()) >= BASELINE_REVISIONS
        })
        .await
        .context("the busy link made no progress before the kill")?;
        let baseline = baseline_start.elapsed().as_secs_f64();

        let killed = Instant::now();
        fleet.kill_daemon(&victim).await?;
        placements
            .patch(
                "storm",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"workloads": [
                    {"namespaces": [NAMESPACE], "kind": "ConfigMap", "names": ["storm-2"]}
                ]}})),
            )
            .await
            .context("cannot move the storm Placement to storm-2")?;
        fleet.restart_daemon(&victim)?;
        let restarted = Instant::now();
        let window = super::window::now();
        let relay_pid = fleet
            .daemon_pids()
            .into_iter()
            .find(|(name, _)| *name == victim)
            .map(|(_, pid)| pid);
        let agents_cpu_before = cpu_seconds(std::process::id());
        let drops_before = udp_receive_drops();
        println!(
            "storm | {victim} killed and restarted; waiting for its {} agents",
            victims.len()
        );
        let mut latencies =
            wait_applied(&victim_clusters, "storm-2", options.timeout, restarted).await?;
        let converged = Instant::now();
        super::window::log("storm", window);
        let relay_cpu = relay_pid.and_then(cpu_seconds);
        let agents_cpu = cpu_seconds(std::process::id())
            .zip(agents_cpu_before)
            .map(|(after, before)| after - before);
        let udp_receive_drops = udp_receive_drops_since(drops_before);
        stop.cancel();
        let (before, during) = {
            let done = completions
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            let before = done.iter().filter(|at| **at <= killed).count();
            let during = done
                .iter()
                .filter(|at| **at > killed && **at <= converged)
                .count();
            (before, during)
        };
        let storm_secs = converged.duration_since(killed).as_secs_f64();
        let converged_after = spread(&mut latencies);
        anyhow::Ok(StormRun {
            agents: victims.len(),
            all_converged: converged_after.all,
            p50: converged_after.p50,
            p99: converged_after.p99,
            down: restarted.duration_since(killed).as_secs_f64(),
            busy_before: before as f64 / baseline.max(f64::EPSILON),
            busy_during: during as f64 / storm_secs.max(f64::EPSILON),
            busy_during_revisions: during,
            relay_cpu,
            agents_cpu,
            udp_receive_drops,
        })
    };
    let (busy, run) = tokio::join!(busy, storm);
    let run = run?;
    busy?;
    Ok(run)
}

/// Updates the busy ConfigMap's revision, waits until the busy cluster
/// holds it, records when, and goes on until `stop`.
async fn busy_loop(
    configmaps: Api<ConfigMap>,
    cluster: HollowCluster,
    payload_bytes: usize,
    completions: Arc<Mutex<Vec<Instant>>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut revision = 0u64;
    while !stop.is_cancelled() {
        revision += 1;
        let patch = json!({"data": {
            "revision": revision.to_string(),
            "payload": filler(1000 + revision, payload_bytes),
        }});
        configmaps
            .patch("busy", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .context("cannot update the busy ConfigMap")?;
        let wanted = revision.to_string();
        loop {
            let held = cluster.object("", "ConfigMap", Some(NAMESPACE), "busy");
            if held.is_some_and(|object| object["data"]["revision"] == wanted.as_str()) {
                break;
            }
            if stop.is_cancelled() {
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
        completions
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(Instant::now());
    }
    Ok(())
}

/// Waits until every cluster recorded a write of ConfigMap `name`; returns
/// each one's seconds after `since`.
async fn wait_applied(
    clusters: &BTreeMap<String, HollowCluster>,
    name: &str,
    timeout: Duration,
    since: Instant,
) -> anyhow::Result<Vec<f64>> {
    let since_tokio = tokio::time::Instant::from_std(since);
    let mut pending: Vec<&HollowCluster> = clusters.values().collect();
    let mut latencies = Vec::with_capacity(pending.len());
    let deadline = Instant::now() + timeout;
    while !pending.is_empty() {
        pending.retain(|cluster| {
            let record = cluster.first_write("ConfigMap", Some(NAMESPACE), name);
            match record {
                Some(record) => {
                    latencies.push(
                        record
                            .at
                            .saturating_duration_since(since_tokio)
                            .as_secs_f64(),
                    );
                    false
                }
                None => true,
            }
        });
        if Instant::now() > deadline {
            bail!(
                "after {timeout:?}: {} clusters without {name}",
                pending.len()
            );
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(latencies)
}

/// Waits until `done` holds.
async fn wait_until(timeout: Duration, done: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            bail!("not done after {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// The `reconnect-storm` report of `run`.
pub fn report(options: &StormOptions, run: &StormRun) -> Report {
    let mut report = Report::new(
        "reconnect-storm",
        json!({"agentsPerRelay": options.agents_per_relay, "payloadBytes": options.payload_bytes}),
    );
    report.description = format!(
        "Two relays under the root with {} hollow agents each. Relay A is killed with \
         SIGKILL, its agents' Placement moves to a new ConfigMap of {} bytes, and A is \
         started again from its store: the time from the restart until every agent below A \
         reconnected (jittered exponential backoff) and applied the new object. Meanwhile the \
         unrelated link root → B → one agent carries one revision after another of a ConfigMap \
         of the same size: its revisions per second during the storm against before it.",
        options.agents_per_relay, options.payload_bytes
    );
    let n = run.agents;
    report.figure(
        Figure::new(
            format!("all {n} reconnected and converged after the restart"),
            run.all_converged,
            "s",
        )
        .with_goal("under 10 s", |v| v < 10.0),
    );
    report.figure(Figure::new(
        format!("per agent p50 after the restart, N = {n}"),
        run.p50,
        "s",
    ));
    report.figure(Figure::new(
        format!("per agent p99 after the restart, N = {n}"),
        run.p99,
        "s",
    ));
    if let Some(cpu) = run.relay_cpu {
        report.figure(Figure::new(
            "CPU of the restarted relay until all converged",
            cpu,
            "s",
        ));
    }
    if let Some(cpu) = run.agents_cpu {
        report.figure(Figure::new(
            "CPU of the hollow agents' process meanwhile",
            cpu,
            "s",
        ));
    }
    if let Some(drops) = run.udp_receive_drops {
        report.figure(Figure::new(
            "datagrams dropped at full receive buffers meanwhile",
            drops as f64,
            "datagrams",
        ));
    }
    report.figure(Figure::new(
        "busy link before the kill",
        run.busy_before,
        "revisions/s",
    ));
    report.figure(Figure::new(
        "busy link during the storm",
        run.busy_during,
        "revisions/s",
    ));
    report.figure(
        Figure::new(
            "busy link during / before",
            run.busy_during / run.busy_before.max(f64::EPSILON),
            "ratio",
        )
        .with_goal("at least 0.5", |v| v >= 0.5),
    );
    report
}
