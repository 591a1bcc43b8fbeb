//! `testbed bench nats`: relaymesh against NATS with leaf nodes, the message
//! system people reach for to push one payload to many subscribers, in the
//! same tree shape with the same payload and the same number of receivers.
//!
//! NATS: Debian's `nats-server` processes on loopback ([`servers`]), a hub
//! where the root relay would be and `relays_per_level` levels of leaf-node
//! servers below it; N subscribers, each its own client connection
//! (async-nats, in this process as the hollow agents are in theirs), spread
//! round-robin over the deepest servers. Probe messages are published at the
//! hub until every subscriber has seen one, so every subscription's interest
//! has reached the hub; then the payload is published there once and timed
//! until every subscriber holds it, each copy compared byte for byte.
//!
//! relaymesh: [`super::fanout`]'s runs with the same N, shape and payload,
//! in the same command. NATS core delivers at most once, from memory;
//! relaymesh persists the bundle in every relay's store, deduplicates it by
//! content and acknowledges status back to the root. Two times are set
//! beside NATS's: until every agent's store held the bundle (the like of
//! "every subscriber received"; the goal, issue 35's, is at most 2× NATS's
//! time) and until every cluster applied it (shown, no goal).

pub mod servers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::fanout::{self, FanoutOptions, FanoutRun};
use super::report::{spread, Figure, Line, Report, Series};
use crate::up;

/// The subject probes are published on.
const PROBE: &str = "bench.probe";
/// The subject the payload is published on.
const PAYLOAD: &str = "bench.payload";
/// What every subscriber subscribes to: one subscription for both, so a
/// probe's arrival shows the payload's interest is in place too.
const SUBSCRIBED: &str = "bench.>";
/// How often a probe is published while subscriptions propagate.
const PROBE_EVERY: Duration = Duration::from_millis(20);
/// Subscribers connecting at once.
const CONNECTING: usize = 32;
/// The ratio relaymesh / NATS the issue asks for, every receiver holding
/// the payload.
const GOAL_RATIO: f64 = 2.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// Subscriber counts (and hollow agents for relaymesh), one run each.
    pub subscribers: Vec<usize>,
    /// Servers (relays) under each server of the level above; empty: every
    /// subscriber on the hub.
    pub relays_per_level: Vec<usize>,
    /// The payload's size in bytes.
    pub payload_bytes: usize,
    /// Where the servers' configs and logs, and relaymesh's fleets, live.
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long one run (either system) may take to deliver everywhere.
    pub timeout: Duration,
}

/// What NATS did in one run.
#[derive(Debug, Clone)]
pub struct NatsRun {
    /// Subscribers.
    pub subscribers: usize,
    /// Subscribers that received the payload byte for byte (the run fails
    /// unless that is all of them).
    pub received: usize,
    /// `nats-server` processes.
    pub servers: usize,
    /// Seconds from the publish until every subscriber had the payload.
    pub all_received: f64,
    /// Per-subscriber seconds until it had the payload, median and 99th
    /// percentile.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
}

/// One size's results from both systems.
#[derive(Debug, Clone)]
pub struct PeersNatsRun {
    /// NATS with leaf nodes.
    pub nats: NatsRun,
    /// relaymesh's fanout to as many hollow agents.
    pub relaymesh: FanoutRun,
}

/// Runs NATS for each size, then relaymesh's fanout for the same sizes, and
/// pairs them up. Fails first, before starting anything, when `nats-server`
/// is not installed.
pub async fn run(options: &NatsOptions) -> anyhow::Result<Vec<PeersNatsRun>> {
    let binary = servers::binary()?;
    let mut nats = Vec::new();
    for &subscribers in &options.subscribers {
        let run = run_nats(options, &binary, subscribers)
            .await
            .with_context(|| format!("NATS to {subscribers} subscribers"))?;
        nats.push(run);
    }
    let relaymesh = fanout::run_fleets(&fanout_options(options)).await?;
    Ok(nats
        .into_iter()
        .zip(relaymesh)
        .map(|(nats, relaymesh)| PeersNatsRun { nats, relaymesh })
        .collect())
}

/// The fanout relaymesh runs for the comparison: same sizes, shape, payload
/// and timeout, fleets named `peers-nats-relaymesh-N`.
pub fn fanout_options(options: &NatsOptions) -> FanoutOptions {
    FanoutOptions {
        agents: options.subscribers.clone(),
        relays_per_level: options.relays_per_level.clone(),
        payload_bytes: options.payload_bytes,
        dir: options.dir.clone(),
        bin_dir: options.bin_dir.clone(),
        timeout: options.timeout,
        name: "peers-nats-relaymesh".into(),
        runs: 1,
    }
}

/// The `peers-nats` report of `runs`, with the ratio's goal.
pub fn report(options: &NatsOptions, runs: &[PeersNatsRun]) -> Report {
    let mut report = Report::new(
        "peers-nats",
        json!({
            "subscribers": options.subscribers,
            "relaysPerLevel": options.relays_per_level,
            "payloadBytes": options.payload_bytes,
        }),
    );
    report.description = format!(
        "One payload of {} bytes to N receivers through the same tree ({}): NATS \
         (Debian's nats-server, a hub and leaf-node servers, each subscriber its own \
         client connection to a deepest server), timed from the publish at the hub until \
         every subscriber held it; and relaymesh's fanout (relay processes, hollow agents), \
         timed from the Placement at the root until every agent's store held the bundle, \
         and until every hollow cluster had the object applied.",
        options.payload_bytes,
        fanout::shape(&options.relays_per_level),
    );
    report.notes.push(
        "NATS core delivers at most once and from memory; relaymesh persists the bundle \
         in every relay's sled store, sends it once per link by content hash and counts \
         every cluster's status back at the root."
            .into(),
    );
    for run in runs {
        let n = run.nats.subscribers;
        report.figure(Figure::new(
            format!("NATS, all {n} subscribers received"),
            run.nats.all_received,
            "s",
        ));
        report.figure(Figure::new(
            format!("NATS per subscriber p50, N = {n}"),
            run.nats.p50,
            "s",
        ));
        report.figure(Figure::new(
            format!("NATS per subscriber p99, N = {n}"),
            run.nats.p99,
            "s",
        ));
        report.figure(Figure::new(
            format!("relaymesh, all {n} stores held the bundle"),
            run.relaymesh.all_stored,
            "s",
        ));
        report.figure(Figure::new(
            format!("relaymesh per agent store p50, N = {n}"),
            run.relaymesh.stored_p50,
            "s",
        ));
        report.figure(Figure::new(
            format!("relaymesh, all {n} applied"),
            run.relaymesh.all_applied,
            "s",
        ));
        report.figure(Figure::new(
            format!("relaymesh per agent p50, N = {n}"),
            run.relaymesh.p50,
            "s",
        ));
        report.figure(Figure::new(
            format!("relaymesh per agent p99, N = {n}"),
            run.relaymesh.p99,
            "s",
        ));
        let nats = run.nats.all_received.max(f64::MIN_POSITIVE);
        report.figure(
            Figure::new(
                format!("relaymesh stored / NATS received, N = {n}"),
                run.relaymesh.all_stored / nats,
                "×",
            )
            .with_goal("at most 2×", |ratio| ratio <= GOAL_RATIO),
        );
        report.figure(Figure::new(
            format!("relaymesh applied / NATS received, N = {n}"),
            run.relaymesh.all_applied / nats,
            "×",
        ));
    }
    let points = |value: fn(&PeersNatsRun) -> f64| -> Vec<(f64, f64)> {
        runs.iter()
            .map(|run| (run.nats.subscribers as f64, value(run)))
            .collect()
    };
    report.series.push(Series {
        title: "One payload to every receiver, NATS and relaymesh".into(),
        x_label: "subscribers / hollow agents".into(),
        y_label: "seconds".into(),
        lines: vec![
            Line {
                label: "relaymesh, all stores held it".into(),
                points: points(|run| run.relaymesh.all_stored),
            },
            Line {
                label: "relaymesh, all applied".into(),
                points: points(|run| run.relaymesh.all_applied),
            },
            Line {
                label: "NATS, all received".into(),
                points: points(|run| run.nats.all_received),
            },
        ],
    });
    report.details = json!({
        "natsServers": runs.first().map_or(0, |run| run.nats.servers),
        "relaymeshRelays": runs.first().map_or(0, |run| run.relaymesh.relays),
    });
    report
}

/// What a subscriber's task reports.
enum Event {
    /// Its first probe arrived.
    Probed,
    /// The payload arrived at `at`; `exact` when byte for byte the one sent.
    Received { at: Instant, exact: bool },
}

async fn run_nats(
    options: &NatsOptions,
    binary: &std::path::Path,
    subscribers: usize,
) -> anyhow::Result<NatsRun> {
    let dir = options.dir.join(format!("peers-nats-{subscribers}"));
    up::prepare_dir(&dir)?;
    println!("peers-nats | starting nats-server processes and {subscribers} subscribers");
    let tree = servers::Tree::start(
        binary,
        &dir,
        &options.relays_per_level,
        options.payload_bytes,
        options.timeout,
    )
    .await?;
    let result = deliver(&tree, options, subscribers).await;
    tree.shutdown().await;
    result
}

/// Connects the subscribers, waits until each has seen a probe, publishes
/// the payload and waits until each has it.
async fn deliver(
    tree: &servers::Tree,
    options: &NatsOptions,
    subscribers: usize,
) -> anyhow::Result<NatsRun> {
    let payload = Arc::new(Bytes::from(super::root::filler(1, options.payload_bytes)));
    let deadline = Instant::now() + options.timeout;
    let urls = tree.deepest_urls();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let connected: Vec<_> = futures::stream::iter(0..subscribers)
        .map(|index| connect(urls[index % urls.len()].clone(), index))
        .buffer_unordered(CONNECTING)
        .try_collect()
        .await?;
    let mut tasks = tokio::task::JoinSet::new();
    for (client, subscription) in connected {
        tasks.spawn(subscriber(
            client,
            subscription,
            payload.clone(),
            events_tx.clone(),
        ));
    }
    drop(events_tx);

    let hub = async_nats::connect(tree.hub_url())
        .await
        .context("cannot connect to the hub")?;
    let mut probed = 0;
    let mut probes = tokio::time::interval(PROBE_EVERY);
    while probed < subscribers {
        tokio::select! {
            _ = probes.tick() => {
                hub.publish(PROBE, Bytes::new()).await?;
                hub.flush().await?;
            }
            event = events.recv() => match event {
                Some(Event::Probed) => probed += 1,
                Some(Event::Received { .. }) => bail!("a payload arrived before it was sent"),
                None => bail!("every subscriber's connection ended"),
            },
            () = tokio::time::sleep_until(deadline) => bail!(
                "after {:?}, {} of {subscribers} subscribers had seen no probe",
                options.timeout,
                subscribers - probed
            ),
        }
    }
    tracing::info!(subscribers, "every subscription reached the hub");

    let deadline = Instant::now() + options.timeout;
    let start = Instant::now();
    hub.publish(PAYLOAD, Bytes::clone(&payload)).await?;
    hub.flush().await?;
    let mut latencies = Vec::with_capacity(subscribers);
    let mut inexact = 0;
    while latencies.len() < subscribers {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::Received { at, exact })) => {
                latencies.push(at.saturating_duration_since(start).as_secs_f64());
                if !exact {
                    inexact += 1;
                }
            }
            Ok(Some(Event::Probed)) => {}
            Ok(None) => bail!("subscribers' connections ended before all had the payload"),
            Err(_) => bail!(
                "after {:?}, {} of {subscribers} subscribers had not received the payload",
                options.timeout,
                subscribers - latencies.len()
            ),
        }
    }
    tasks.shutdown().await;
    if inexact > 0 {
        bail!("{inexact} of {subscribers} subscribers received a payload that differs from the one sent");
    }
    let received = latencies.len();
    let spread = spread(&mut latencies);
    Ok(NatsRun {
        subscribers,
        received,
        servers: tree.len(),
        all_received: spread.all,
        p50: spread.p50,
        p99: spread.p99,
    })
}

async fn connect(
    url: String,
    index: usize,
) -> anyhow::Result<(async_nats::Client, async_nats::Subscriber)> {
    let client = async_nats::ConnectOptions::new()
        .name(format!("subscriber-{index}"))
        .connect(url.as_str())
        .await
        .with_context(|| format!("subscriber {index} cannot connect to {url}"))?;
    let subscription = client
        .subscribe(SUBSCRIBED)
        .await
        .with_context(|| format!("subscriber {index} cannot subscribe"))?;
    Ok((client, subscription))
}

/// One subscriber: reports its first probe and the payload's arrival, then
/// ends. It holds its client so the connection lives as long as it does.
async fn subscriber(
    client: async_nats::Client,
    mut subscription: async_nats::Subscriber,
    payload: Arc<Bytes>,
    events: mpsc::UnboundedSender<Event>,
) {
    let _client = client;
    let mut probed = false;
    // A failed send means the benchmark already gave up and stopped
    // listening: there is no one left to tell.
    while let Some(message) = subscription.next().await {
        match message.subject.as_str() {
            PROBE if !probed => {
                probed = true;
                let _ = events.send(Event::Probed);
            }
            PAYLOAD => {
                let at = Instant::now();
                let exact = message.payload == *payload;
                let _ = events.send(Event::Received { at, exact });
                return;
            }
            _ => {}
        }
    }
}
