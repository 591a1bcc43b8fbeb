//! `testbed bench fanin`: status fan-in. N hollow agents run a Deployment
//! the root placed on all of them; then every hollow cluster at once reports
//! it unavailable (as if its pods crashed). Measured: the bytes reaching the
//! root against the bytes leaving the agents meanwhile (summaries are
//! merged on the way up, so the root should see a sliver), and the time
//! until the root's Placement status is exact again (no cluster ready, all
//! N applied).
//!
//! The agents' bytes are counted at their UDP sockets
//! ([`crate::up::counting`]), the root's from its own link statistics
//! (quinn's, `bytesReceived` of the root's children). Both include QUIC's
//! keep-alives and acknowledgements: it is what the wire carries.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use serde_json::json;

use super::report::{Figure, Report};
use super::root::{
    next_root_links, place_deployment_everywhere, root_links, total, unavailable_deployment_status,
    wait_counts, ClusterCounts, NEXT_SAMPLE,
};
use crate::up::{Fleet, UpOptions};

/// The namespace the benchmark's objects live in.
const NAMESPACE: &str = "fanin";
/// The Deployment (and Placement) every agent runs.
const WORKLOAD: &str = "web";
/// How often the root is asked while waiting.
const POLL: Duration = Duration::from_millis(100);

/// What to run.
#[derive(Debug, Clone)]
pub struct FaninOptions {
    /// Hollow agents.
    pub agents: usize,
    /// Relays under each relay of the level above.
    pub relays_per_level: Vec<usize>,
    /// Where the fleet lives.
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long each wait may take.
    pub timeout: Duration,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct FaninRun {
    /// Hollow agents.
    pub agents: usize,
    /// UDP bytes the agents sent from the status change until the root
    /// was exact and its link statistics sampled again.
    pub agents_bytes: u64,
    /// UDP bytes the root received on its child links meanwhile.
    pub root_bytes: u64,
    /// Seconds from the change until the root's status was exact.
    pub root_exact: f64,
    /// The root's counts once exact.
    pub counts: ClusterCounts,
}

/// Brings up the fleet, runs the benchmark, stops the fleet.
pub async fn run_fleet(options: &FaninOptions) -> anyhow::Result<FaninRun> {
    let mut up = UpOptions::fresh(
        options.dir.join(format!("fanin-{}", options.agents)),
        options.relays_per_level.clone(),
        options.agents,
        true,
        options.bin_dir.clone(),
    )?;
    up.simulator.delay = Duration::from_millis(500);
    println!("fanin | bringing up {} hollow agents", options.agents);
    let fleet = Fleet::start(&up).await?;
    let result = measure(&fleet, options).await;
    fleet.shutdown().await;
    result
}

async fn measure(fleet: &Fleet, options: &FaninOptions) -> anyhow::Result<FaninRun> {
    let agents = options.agents as u64;
    let client = fleet.root_client().await?;
    let hollow = fleet.hollow().context("the fleet has no hollow agents")?;
    let placements = place_deployment_everywhere(&client, NAMESPACE, WORKLOAD).await?;
    println!("fanin | waiting until all {agents} clusters are ready");
    wait_counts(&placements, WORKLOAD, options.timeout, POLL, |counts| {
        counts.ready == agents
    })
    .await?;

    // A quiet start: the root's statistics sampled after everything settled.
    let first = root_links(fleet).await?;
    let before = next_root_links(fleet, &first, NEXT_SAMPLE, |_| true).await?;
    let agents_before = hollow.bytes_sent();
    let start = Instant::now();
    let unavailable = unavailable_deployment_status();
    for cluster in hollow.clusters().values() {
        if !cluster.set_status(
            "apps",
            "deployments",
            Some(NAMESPACE),
            WORKLOAD,
            unavailable.clone(),
        ) {
            bail!("hollow cluster {} has no Deployment", cluster.name());
        }
    }
    let counts = wait_counts(&placements, WORKLOAD, options.timeout, POLL, |counts| {
        counts.ready == 0 && counts.applied == agents
    })
    .await?;
    let root_exact = start.elapsed().as_secs_f64();
    // The first root sample taken after the status was exact.
    let exact = root_links(fleet).await?;
    let after = next_root_links(fleet, &exact, NEXT_SAMPLE, |_| true).await?;
    let agents_after = hollow.bytes_sent();
    let root_bytes = total(&after, |link| link.bytes_received)
        .saturating_sub(total(&before, |link| link.bytes_received));
    Ok(FaninRun {
        agents: options.agents,
        agents_bytes: agents_after.saturating_sub(agents_before),
        root_bytes,
        root_exact,
        counts,
    })
}

/// The `status-fanin` report of `run`.
pub fn report(options: &FaninOptions, run: &FaninRun) -> Report {
    let mut report = Report::new(
        "status-fanin",
        json!({"agents": options.agents, "relaysPerLevel": options.relays_per_level}),
    );
    report.description = format!(
        "{} hollow agents below relay processes (relays per level {:?}) run one Deployment \
         the root placed on all of them; every hollow cluster then marks it unavailable at \
         once. The UDP bytes the agents sent (counted at their sockets) against the UDP bytes \
         the root received on its child links (its quinn statistics), from the change until \
         the root's Placement status was exact again, and how long that took.",
        options.agents, options.relays_per_level
    );
    let n = run.agents;
    report.figure(Figure::new(
        format!("bytes leaving the agents, N = {n}"),
        run.agents_bytes as f64,
        "bytes",
    ));
    report.figure(Figure::new(
        format!("bytes reaching the root, N = {n}"),
        run.root_bytes as f64,
        "bytes",
    ));
    report.figure(
        Figure::new(
            format!("root / agents, N = {n}"),
            100.0 * run.root_bytes as f64 / (run.agents_bytes.max(1)) as f64,
            "%",
        )
        .with_goal("under 1 %", |v| v < 1.0),
    );
    report.figure(Figure::new(
        format!("root status exact (0 of {n} ready), N = {n}"),
        run.root_exact,
        "s",
    ));
    report
}
