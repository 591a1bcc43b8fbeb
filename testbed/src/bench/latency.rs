//! `testbed bench latency`: status latency. N hollow agents below three
//! levels run a Deployment the root placed on all of them; then, one
//! cluster at a time, a Deployment becomes unavailable and ready again.
//! Measured: for each change, the time from the hollow cluster's status
//! write until the root's Placement status shows it (asked of the root's
//! API every 10 ms), as p50 and p99 over all changes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use super::report::{quantile, Figure, Report};
use super::root::{place_deployment_everywhere, unavailable_deployment_status, wait_counts};
use crate::up::{Fleet, UpOptions};

/// The namespace the benchmark's objects live in.
const NAMESPACE: &str = "latency";
/// The Deployment (and Placement) every agent runs.
const WORKLOAD: &str = "web";
/// How often the root is asked while a change climbs.
const POLL: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    /// Hollow agents.
    pub agents: usize,
    /// Relays under each relay of the level above.
    pub relays_per_level: Vec<usize>,
    /// How many clusters change (each twice: unavailable, then ready).
    pub changes: usize,
    /// Where the fleet lives.
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long each wait may take.
    pub timeout: Duration,
}

/// Seconds from each change at a leaf until the root showed it.
#[derive(Debug, Clone)]
pub struct LatencyRun {
    /// Every change's latency, in seconds.
    pub latencies: Vec<f64>,
}

/// Brings up the fleet, runs the benchmark, stops the fleet.
pub async fn run_fleet(options: &LatencyOptions) -> anyhow::Result<LatencyRun> {
    let up = UpOptions::fresh(
        options.dir.join(format!("latency-{}", options.agents)),
        options.relays_per_level.clone(),
        options.agents,
        true,
        options.bin_dir.clone(),
    )?;
    println!("latency | bringing up {} hollow agents", options.agents);
    let fleet = Fleet::start(&up).await?;
    let result = measure(&fleet, options).await;
    fleet.shutdown().await;
    result
}

async fn measure(fleet: &Fleet, options: &LatencyOptions) -> anyhow::Result<LatencyRun> {
    let agents = options.agents as u64;
    let client = fleet.root_client().await?;
    let hollow = fleet.hollow().context("the fleet has no hollow agents")?;
    let placements = place_deployment_everywhere(&client, NAMESPACE, WORKLOAD).await?;
    println!("latency | waiting until all {agents} clusters are ready");
    let slow = Duration::from_millis(100);
    wait_counts(&placements, WORKLOAD, options.timeout, slow, |counts| {
        counts.ready == agents
    })
    .await?;
    let clusters: Vec<_> = hollow.clusters().values().cloned().collect();
    let step = (clusters.len() / options.changes.max(1)).max(1);
    let mut latencies = Vec::new();
    for cluster in clusters.iter().step_by(step).take(options.changes) {
        let ready = cluster
            .object("apps", "deployments", Some(NAMESPACE), WORKLOAD)
            .map(|object| object["status"].clone())
            .with_context(|| format!("hollow cluster {} has no Deployment", cluster.name()))?;
        for (status, ready_after) in [
            (unavailable_deployment_status(), agents - 1),
            (ready, agents),
        ] {
            let start = Instant::now();
            cluster.set_status("apps", "deployments", Some(NAMESPACE), WORKLOAD, status);
            wait_counts(&placements, WORKLOAD, options.timeout, POLL, |counts| {
                counts.ready == ready_after
            })
            .await?;
            latencies.push(start.elapsed().as_secs_f64());
        }
    }
    println!("latency | {} changes measured", latencies.len());
    Ok(LatencyRun { latencies })
}

/// The `status-latency` report of `run`.
pub fn report(options: &LatencyOptions, run: &LatencyRun) -> Report {
    let mut report = Report::new(
        "status-latency",
        json!({"agents": options.agents, "relaysPerLevel": options.relays_per_level,
            "changes": run.latencies.len()}),
    );
    report.description = format!(
        "{} hollow agents below relay processes (relays per level {:?}) run one Deployment \
         the root placed on all of them. One cluster at a time, the Deployment becomes \
         unavailable and then ready again ({} changes in all); each change is timed from the \
         hollow cluster's status write until the root's Placement status shows it (the root's \
         API asked every 10 ms).",
        options.agents,
        options.relays_per_level,
        run.latencies.len()
    );
    let mut latencies = run.latencies.clone();
    let n = options.agents;
    report.figure(Figure::new(
        format!("leaf change to root status p50, N = {n}"),
        quantile(&mut latencies, 0.5),
        "s",
    ));
    report.figure(
        Figure::new(
            format!("leaf change to root status p99, N = {n}"),
            quantile(&mut latencies, 0.99),
            "s",
        )
        .with_goal("under 1 s", |v| v < 1.0),
    );
    report
}
