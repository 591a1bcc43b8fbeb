//! `testbed bench fanout` (and the root-egress figures measured in the same
//! runs): one bundle of about 100 KB placed on every one of N hollow agents
//! below a tree of relay processes, timed from the Placement's creation at
//! the root until each agent's store holds the bundle ([`super::stored`]),
//! until each hollow cluster has the object applied, and until the root's
//! Placement status counts all N applied.
//!
//! Root egress is read from the root's own link statistics (quinn's
//! connection stats of each child link, `status.bytesSent` of the root's
//! children): the bytes the root sent while the bundle went out, against
//! the ideal of one copy per child link (fan-out × bundle size).
//!
//! What is measured is the whole product: relays are `relay` processes, the
//! agents are the edge-agent crate's code (hollow: in this process, see
//! [`crate::up::hollow`]), the bundle crosses real QUIC links with mutual
//! TLS and is persisted in every relay's sled store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use super::report::{
    cpu_seconds, settled_rss_kib, spread, udp_receive_drops, udp_receive_drops_since, Figure, Line,
    Report, Series,
};
use super::root::{
    create_namespace, filler, next_root_links, placement_counts, placements_api, root_links,
    NEXT_SAMPLE,
};
use super::stored::FirstBundles;
use crate::hollow::HollowCluster;
use crate::up::{Fleet, UpOptions};

/// The namespace the benchmark's objects live in.
const NAMESPACE: &str = "bench";
/// The ConfigMap carried as the bundle.
const PAYLOAD: &str = "payload";
/// How often the clusters and the root are looked at while waiting.
const POLL: Duration = Duration::from_millis(20);
/// How long, once every cluster has the object, the store watchers may
/// take to report.
const STORED_GRACE: Duration = Duration::from_secs(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct FanoutOptions {
    /// The fleet sizes to run, one fleet each.
    pub agents: Vec<usize>,
    /// Relays under each relay of the level above; empty: every agent
    /// directly under the root (a flat star).
    pub relays_per_level: Vec<usize>,
    /// The payload's size in bytes.
    pub payload_bytes: usize,
    /// Where the fleets live (one after the other).
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long one fleet may take to get the bundle everywhere.
    pub timeout: Duration,
    /// The benchmark's name in reports (`fanout`, `fanout-star`).
    pub name: String,
    /// How many times each size runs (a fleet each); its figures are those
    /// of the run with the median relay CPU per agent.
    pub runs: usize,
}

/// One fleet's results.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FanoutRun {
    /// The fleet size.
    pub agents: usize,
    /// Seconds from the Placement's creation until every cluster had the
    /// object.
    pub all_applied: f64,
    /// Per-cluster seconds until it had the object, median and 99th
    /// percentile.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
    /// Seconds from the Placement's creation until every agent's store held
    /// the bundle (before the apply; the figure beside a message system's
    /// delivery).
    #[serde(default)]
    pub all_stored: f64,
    /// Per-agent seconds until its store held the bundle, median and 99th
    /// percentile.
    #[serde(default)]
    pub stored_p50: f64,
    /// See `stored_p50`.
    #[serde(default)]
    pub stored_p99: f64,
    /// Seconds until the root's Placement status counted every cluster
    /// applied.
    pub root_status: f64,
    /// The bundle's size in bytes (the root's own record of it).
    pub bundle_bytes: u64,
    /// The root's children.
    pub root_children: usize,
    /// Wire bytes the root sent on its child links meanwhile.
    pub root_wire_bytes: u64,
    /// Bundle payload bytes the root served meanwhile (application count).
    pub root_bundle_bytes: u64,
    /// Bundle transfers the root completed meanwhile (application count):
    /// one per child link when a bundle crosses each link once.
    pub root_bundles_served: u64,
    /// Every relay process's resident memory added up, with every agent
    /// connected and nothing placed, once it holds steady, in KiB.
    pub idle_relays_rss_kib: u64,
    /// Relay processes.
    pub relays: usize,
    /// CPU seconds every relay process used from the Placement until all
    /// applied, added up.
    pub relays_cpu: f64,
    /// CPU seconds this process (every hollow agent) used meanwhile.
    pub agents_cpu: f64,
    /// Datagrams dropped at full UDP receive buffers meanwhile, host-wide
    /// (each was sent again); `None` where the host does not say.
    #[serde(default)]
    pub udp_receive_drops: Option<u64>,
    /// The relay CPU per agent (ms) of every run of this size, lowest
    /// first, when it ran more than once; this run is their median.
    #[serde(default)]
    pub relay_cpu_per_agent_runs: Vec<f64>,
}

/// Runs the fleets one after the other and returns the fanout report, the
/// root-egress report and the relay-memory report.
pub async fn run(options: &FanoutOptions) -> anyhow::Result<(Report, Report, Report)> {
    let runs = run_fleets(options).await?;
    Ok(reports(options, &runs))
}

/// Runs one fleet per size in `options.agents`, one after the other. Each
/// run ends only when every hollow cluster holds the object and the root
/// counts all of them applied, or fails.
pub async fn run_fleets(options: &FanoutOptions) -> anyhow::Result<Vec<FanoutRun>> {
    let mut runs = Vec::new();
    for &agents in &options.agents {
        let run = run_one(options, agents)
            .await
            .with_context(|| format!("fanout to {agents} hollow agents"))?;
        runs.push(run);
    }
    Ok(runs)
}

/// One run per size of `runs` (in their order of size): where a size ran
/// more than once, the run with the median relay CPU per agent (the lower
/// middle one of an even count), holding every run's figure.
pub fn median_runs(runs: Vec<FanoutRun>) -> Vec<FanoutRun> {
    let mut by_size: BTreeMap<usize, Vec<FanoutRun>> = BTreeMap::new();
    for run in runs {
        by_size.entry(run.agents).or_default().push(run);
    }
    by_size
        .into_values()
        .filter_map(|mut same| {
            if same.len() == 1 {
                return same.pop();
            }
            same.sort_by(|a, b| relay_cpu_per_agent_ms(a).total_cmp(&relay_cpu_per_agent_ms(b)));
            let all = same.iter().map(relay_cpu_per_agent_ms).collect();
            let mut median = same.swap_remove((same.len() - 1) / 2);
            median.relay_cpu_per_agent_runs = all;
            Some(median)
        })
        .collect()
}

/// The fanout, root-egress and relay-memory reports of `runs`.
pub fn reports(options: &FanoutOptions, runs: &[FanoutRun]) -> (Report, Report, Report) {
    let parameters = json!({
        "agents": options.agents,
        "relaysPerLevel": options.relays_per_level,
        "payloadBytes": options.payload_bytes,
    });
    let mut fanout = Report::new(&options.name, parameters.clone());
    fanout.description = format!(
        "One ConfigMap of {} bytes placed on every one of N hollow agents (the edge-agent \
         crate's code, in the testbed's process, each with its own certificate, QUIC \
         connection and store) below relay processes ({}), timed from the Placement's \
         creation at the root until each agent's store held the bundle, until each hollow \
         cluster recorded the write, and until the root's Placement status counted all N.",
        options.payload_bytes,
        shape(&options.relays_per_level)
    );
    if options.runs > 1 {
        fanout.description.push_str(&format!(
            " Each size ran {} times, a fleet each; its figures are those of the run with the \
             median relay CPU per agent.",
            options.runs
        ));
    }
    let mut egress = Report::new(&format!("{}-root-egress", options.name), parameters.clone());
    egress.description = "The bytes the root sent on its child links (quinn's connection \
        statistics, `bytesSent` of the root's children) while the fanout's bundle went out, \
        against one copy per child link (fan-out × bundle size)."
        .into();
    let mut memory = Report::new(&format!("{}-relay-memory", options.name), parameters);
    memory.description = "Every relay process's resident memory (VmRSS) added up, with all \
        N hollow agents connected and nothing placed, read once it holds steady (the daemons \
        return a burst's freed heap within a second), and what each further agent costs \
        between two fleet sizes."
        .into();
    for run in runs {
        let n = run.agents;
        let goal_applies = n >= 10_000 && options.relays_per_level.len() >= 2;
        let mut all = Figure::new(format!("all {n} applied"), run.all_applied, "s");
        if goal_applies {
            all = all.with_goal("under 10 s at N = 10,000", |v| v < 10.0);
        }
        fanout.figure(all);
        fanout.figure(Figure::new(
            format!("all {n} stores held the bundle"),
            run.all_stored,
            "s",
        ));
        fanout.figure(Figure::new(format!("per agent p50, N = {n}"), run.p50, "s"));
        fanout.figure(Figure::new(format!("per agent p99, N = {n}"), run.p99, "s"));
        fanout.figure(Figure::new(
            format!("root status shows all {n} applied"),
            run.root_status,
            "s",
        ));
        fanout.figure(Figure::new(
            format!("CPU of the {} relays meanwhile, N = {n}", run.relays),
            run.relays_cpu,
            "s",
        ));
        fanout.figure(Figure::new(
            format!("CPU of the hollow agents' process meanwhile, N = {n}"),
            run.agents_cpu,
            "s",
        ));
        fanout.figure(Figure::new(
            format!("relay CPU per agent, N = {n}"),
            relay_cpu_per_agent_ms(run),
            "ms",
        ));
        if let (Some(lowest), Some(highest)) = (
            run.relay_cpu_per_agent_runs.first(),
            run.relay_cpu_per_agent_runs.last(),
        ) {
            let count = run.relay_cpu_per_agent_runs.len();
            fanout.figure(Figure::new(
                format!("relay CPU per agent, N = {n}, lowest of {count} runs"),
                *lowest,
                "ms",
            ));
            fanout.figure(Figure::new(
                format!("relay CPU per agent, N = {n}, highest of {count} runs"),
                *highest,
                "ms",
            ));
        }
        let mut per_delivery = Figure::new(
            format!("CPU per delivery, relays and agents, N = {n}"),
            (run.relays_cpu + run.agents_cpu) * 1000.0 / n.max(1) as f64,
            "ms",
        );
        if goal_applies {
            per_delivery = per_delivery.with_goal("under 1 ms at N = 10,000", |v| v < 1.0);
        }
        fanout.figure(per_delivery);
        if let Some(drops) = run.udp_receive_drops {
            fanout.figure(Figure::new(
                format!("datagrams dropped at full receive buffers, N = {n}"),
                drops as f64,
                "datagrams",
            ));
        }
        let ideal = run.root_children as f64 * run.bundle_bytes as f64;
        egress.figure(Figure::new(
            format!("root wire bytes for the bundle, N = {n}"),
            run.root_wire_bytes as f64,
            "bytes",
        ));
        egress.figure(Figure::new(
            format!("root fan-out × bundle size, N = {n}"),
            ideal,
            "bytes",
        ));
        egress.figure(
            Figure::new(
                format!("root wire bytes / ideal, N = {n}"),
                run.root_wire_bytes as f64 / ideal.max(1.0),
                "ratio",
            )
            .with_goal("within 5 % (0.95–1.05), flat in N", |v| {
                (0.95..=1.05).contains(&v)
            }),
        );
    }
    for run in runs {
        memory.figure(Figure::new(
            format!(
                "relays' RSS, {} relays, N = {} idle agents",
                run.relays, run.agents
            ),
            run.idle_relays_rss_kib as f64 / 1024.0,
            "MiB",
        ));
    }
    for pair in runs.windows(2) {
        let (small, large) = (&pair[0], &pair[1]);
        let agents = large.agents.saturating_sub(small.agents).max(1) as f64;
        let per_agent =
            (large.idle_relays_rss_kib as f64 - small.idle_relays_rss_kib as f64) / agents;
        let mut figure = Figure::new(
            format!(
                "relay RSS per connected idle agent, N = {} → {}",
                small.agents, large.agents
            ),
            per_agent,
            "KiB",
        );
        if small.agents >= 5_000 {
            figure = figure.with_goal("under 20 KB per agent", |v| v * 1.024 < 20.0);
        }
        memory.figure(figure);
    }
    // A relay's cost per child, flat in its number of children: the star's
    // root at 5,000 children against 500.
    let at = |agents: usize| runs.iter().find(|run| run.agents == agents);
    if let (true, Some(small), Some(large)) =
        (options.relays_per_level.is_empty(), at(500), at(5_000))
    {
        fanout.figure(
            Figure::new(
                "relay CPU per child at 5,000 children / at 500".to_string(),
                relay_cpu_per_agent_ms(large)
                    / relay_cpu_per_agent_ms(small).max(f64::MIN_POSITIVE),
                "ratio",
            )
            .with_goal("at most 1.2", |v| v <= 1.2),
        );
    }
    let points = |value: fn(&FanoutRun) -> f64| -> Vec<(f64, f64)> {
        runs.iter()
            .map(|run| (run.agents as f64, value(run)))
            .collect()
    };
    fanout.series.push(Series {
        title: "Time until the bundle is applied everywhere".into(),
        x_label: "hollow agents".into(),
        y_label: "seconds after the Placement".into(),
        lines: vec![
            Line {
                label: "all applied".into(),
                points: points(|run| run.all_applied),
            },
            Line {
                label: "p99 per agent".into(),
                points: points(|run| run.p99),
            },
            Line {
                label: "p50 per agent".into(),
                points: points(|run| run.p50),
            },
            Line {
                label: "root status exact".into(),
                points: points(|run| run.root_status),
            },
        ],
    });
    fanout.series.push(Series {
        title: "Relay CPU per agent while the bundle goes out".into(),
        x_label: "hollow agents".into(),
        y_label: "ms of CPU, all relays".into(),
        lines: vec![Line {
            label: "relay CPU / N".into(),
            points: points(relay_cpu_per_agent_ms),
        }],
    });
    egress.series.push(Series {
        title: "Bytes the root sends for one bundle".into(),
        x_label: "hollow agents".into(),
        y_label: "bytes".into(),
        lines: vec![
            Line {
                label: "root wire bytes (quinn)".into(),
                points: points(|run| run.root_wire_bytes as f64),
            },
            Line {
                label: "fan-out × bundle size".into(),
                points: points(|run| run.root_children as f64 * run.bundle_bytes as f64),
            },
        ],
    });
    memory.series.push(Series {
        title: "Relay memory with N idle agents connected".into(),
        x_label: "hollow agents".into(),
        y_label: "MiB, all relays".into(),
        lines: vec![Line {
            label: "relays' RSS".into(),
            points: points(|run| run.idle_relays_rss_kib as f64 / 1024.0),
        }],
    });
    (fanout, egress, memory)
}

/// The relays' CPU while the bundle went out, per agent, in ms: in the
/// star, the root's cost per child.
fn relay_cpu_per_agent_ms(run: &FanoutRun) -> f64 {
    run.relays_cpu * 1000.0 / run.agents.max(1) as f64
}

/// The tree's shape, for people.
pub(crate) fn shape(relays_per_level: &[usize]) -> String {
    if relays_per_level.is_empty() {
        return "a flat star: every agent under the root".into();
    }
    let levels: Vec<String> = relays_per_level.iter().map(usize::to_string).collect();
    format!(
        "relays per level {}, agents under the deepest",
        levels.join(" × ")
    )
}

async fn run_one(options: &FanoutOptions, agents: usize) -> anyhow::Result<FanoutRun> {
    let up = UpOptions::fresh(
        options.dir.join(format!("{}-{agents}", options.name)),
        options.relays_per_level.clone(),
        agents,
        true,
        options.bin_dir.clone(),
    )?;
    println!("{} | bringing up {agents} hollow agents", options.name);
    let fleet = Fleet::start(&up).await?;
    let result = measure(&fleet, options, agents).await;
    fleet.shutdown().await;
    result
}

async fn measure(
    fleet: &Fleet,
    options: &FanoutOptions,
    agents: usize,
) -> anyhow::Result<FanoutRun> {
    let client = fleet.root_client().await?;
    let hollow = fleet.hollow().context("the fleet has no hollow agents")?;
    create_namespace(&client, NAMESPACE).await?;
    let payload: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": PAYLOAD, "namespace": NAMESPACE},
        "data": {"payload": filler(1, options.payload_bytes)},
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &payload)
        .await
        .context("cannot create the payload")?;
    let before = root_links(fleet).await?;
    let pids = fleet.daemon_pids();
    let relay_pids: Vec<u32> = pids.iter().map(|(_, pid)| *pid).collect();
    let idle_relays_rss_kib = settled_rss_kib(&relay_pids).await;

    let placements = placements_api(&client, NAMESPACE);
    let placement: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "fanout", "namespace": NAMESPACE},
        "spec": {
            "workloads": [{"namespaces": [NAMESPACE], "kind": "ConfigMap", "names": [PAYLOAD]}],
            "clusters": {"labelSelector": {}},
        },
    }))?;
    let cpu = |pids: &[(String, u32)]| -> f64 {
        pids.iter().filter_map(|(_, pid)| cpu_seconds(*pid)).sum()
    };
    // Before the CPU is read: setting up the watchers is not the fanout's.
    let first_bundles = FirstBundles::watch(hollow.stores());
    let (relays_cpu_before, agents_cpu_before) =
        (cpu(&pids), cpu_seconds(std::process::id()).unwrap_or(0.0));
    let drops_before = udp_receive_drops();
    let start = tokio::time::Instant::now();
    let window = super::window::now();
    placements
        .create(&PostParams::default(), &placement)
        .await
        .context("cannot create the Placement")?;

    let (mut latencies, root_status) = wait_applied(
        hollow.clusters(),
        &placements,
        options.timeout,
        start,
        agents,
    )
    .await?;
    super::window::log(&options.name, window);
    let relays_cpu = cpu(&pids) - relays_cpu_before;
    let agents_cpu = cpu_seconds(std::process::id()).unwrap_or(0.0) - agents_cpu_before;
    let udp_receive_drops = udp_receive_drops_since(drops_before);
    // An agent applies what its store holds, so every store held the
    // bundle by now; the grace covers only the watchers' own wake-ups.
    let mut stored: Vec<f64> = first_bundles
        .collect(start, tokio::time::Instant::now() + STORED_GRACE)
        .await
        .into_values()
        .collect();
    if stored.len() != agents {
        bail!(
            "{} of {agents} agents applied the object but their stores never showed the bundle",
            agents - stored.len().min(agents)
        );
    }
    // The root's bytes are read only now: each read lists every node, O(N)
    // work of the root's for the benchmark, which read once a second
    // during the fanout was a quarter of the root's CPU in a star of
    // 5,000 and so of the per-child figure (docs/performance.md). Read
    // after the fanout, they hold a few keep-alives besides the bundle.
    let grown = next_root_links(fleet, &before, options.timeout, |now| {
        now.iter().all(|(name, link)| {
            link.bundle_bytes_served > before.get(name).map_or(0, |old| old.bundle_bytes_served)
        })
    })
    .await
    .context("the root's link statistics never showed the bundle")?;
    let after = next_root_links(fleet, &grown, NEXT_SAMPLE, |_| true).await?;
    let stored = spread(&mut stored);
    let applied = spread(&mut latencies);
    let root_children = after.len();
    let (mut wire, mut served, mut transfers) = (0, 0, 0);
    for (name, link) in &after {
        let old = before.get(name).copied().unwrap_or_default();
        wire += link.bytes_sent.saturating_sub(old.bytes_sent);
        transfers += link.bundles_served.saturating_sub(old.bundles_served);
        served += link
            .bundle_bytes_served
            .saturating_sub(old.bundle_bytes_served);
    }
    let bundle_bytes = if root_children > 0 {
        served / root_children as u64
    } else {
        0
    };
    Ok(FanoutRun {
        agents,
        all_applied: applied.all,
        p50: applied.p50,
        p99: applied.p99,
        all_stored: stored.all,
        stored_p50: stored.p50,
        stored_p99: stored.p99,
        root_status,
        bundle_bytes,
        root_children,
        root_wire_bytes: wire,
        root_bundle_bytes: served,
        root_bundles_served: transfers,
        idle_relays_rss_kib,
        relays: pids.len(),
        relays_cpu,
        agents_cpu,
        udp_receive_drops,
        relay_cpu_per_agent_runs: Vec::new(),
    })
}

/// Waits until every cluster of `clusters` recorded the payload's write
/// and the root's status of the `fanout` Placement counts `agents` applied;
/// returns each cluster's seconds after `start` and the root's.
async fn wait_applied(
    clusters: &BTreeMap<String, HollowCluster>,
    placements: &Api<DynamicObject>,
    timeout: Duration,
    start: tokio::time::Instant,
    agents: usize,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let mut pending: BTreeMap<&str, _> = clusters
        .iter()
        .map(|(name, cluster)| (name.as_str(), cluster))
        .collect();
    let mut latencies = Vec::with_capacity(agents);
    let mut root_status = None;
    let deadline = Instant::now() + timeout;
    while !pending.is_empty() || root_status.is_none() {
        pending.retain(|_, cluster| {
            let applied = cluster.first_write("ConfigMap", Some(NAMESPACE), PAYLOAD);
            match applied {
                Some(record) => {
                    latencies.push(record.at.saturating_duration_since(start).as_secs_f64());
                    false
                }
                None => true,
            }
        });
        if root_status.is_none() {
            let counts = placement_counts(placements, "fanout").await?;
            if counts.applied + counts.ready >= agents as u64 {
                root_status = Some(start.elapsed().as_secs_f64());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "after {timeout:?}: {} clusters without the bundle, root status {}",
                pending.len(),
                if root_status.is_some() {
                    "complete"
                } else {
                    "incomplete"
                }
            );
        }
        tokio::time::sleep(POLL).await;
    }
    Ok((latencies, root_status.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(agents: usize, relays_cpu: f64) -> FanoutRun {
        FanoutRun {
            agents,
            all_applied: relays_cpu,
            p50: 0.0,
            p99: 0.0,
            all_stored: 0.0,
            stored_p50: 0.0,
            stored_p99: 0.0,
            root_status: 0.0,
            bundle_bytes: 0,
            root_children: agents,
            root_wire_bytes: 0,
            root_bundle_bytes: 0,
            root_bundles_served: 0,
            idle_relays_rss_kib: 0,
            relays: 1,
            relays_cpu,
            agents_cpu: 0.0,
            udp_receive_drops: None,
            relay_cpu_per_agent_runs: Vec::new(),
        }
    }

    #[test]
    fn each_size_keeps_its_median_run_and_every_runs_figure() {
        let runs = vec![
            run(5_000, 5.0),
            run(500, 0.5),
            run(500, 0.3),
            run(5_000, 4.0),
            run(500, 0.4),
            run(5_000, 6.0),
            run(1_000, 1.0),
        ];
        let kept = median_runs(runs);
        let sizes: Vec<usize> = kept.iter().map(|run| run.agents).collect();
        assert_eq!(sizes, [500, 1_000, 5_000]);
        assert_eq!(kept[0].relays_cpu, 0.4);
        assert_eq!(kept[0].relay_cpu_per_agent_runs.len(), 3);
        assert!((kept[0].relay_cpu_per_agent_runs[0] - 0.6).abs() < 1e-9);
        assert!((kept[0].relay_cpu_per_agent_runs[2] - 1.0).abs() < 1e-9);
        assert!(kept[1].relay_cpu_per_agent_runs.is_empty(), "ran once");
        assert_eq!(kept[2].relays_cpu, 5.0);
    }

    #[test]
    fn an_even_count_keeps_the_lower_middle_run() {
        let kept = median_runs(vec![run(500, 0.5), run(500, 0.3)]);
        assert_eq!(kept[0].relays_cpu, 0.3);
    }

    #[test]
    fn repeated_runs_show_their_spread() {
        let options = FanoutOptions {
            agents: vec![500],
            relays_per_level: Vec::new(),
            payload_bytes: 1,
            dir: PathBuf::new(),
            bin_dir: PathBuf::new(),
            timeout: Duration::from_secs(1),
            name: "fanout-star".into(),
            runs: 3,
        };
        let kept = median_runs(vec![run(500, 0.5), run(500, 0.3), run(500, 0.4)]);
        let (fanout, _, _) = reports(&options, &kept);
        let figure = |name: &str| {
            fanout
                .figures
                .iter()
                .find(|figure| figure.name == name)
                .map_or(f64::NAN, |figure| figure.value)
        };
        assert!((figure("relay CPU per agent, N = 500") - 0.8).abs() < 1e-9);
        assert!((figure("relay CPU per agent, N = 500, lowest of 3 runs") - 0.6).abs() < 1e-9);
        assert!((figure("relay CPU per agent, N = 500, highest of 3 runs") - 1.0).abs() < 1e-9);
        assert!(fanout.description.contains("ran 3 times"));
    }
}
