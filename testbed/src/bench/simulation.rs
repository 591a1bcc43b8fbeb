//! `testbed bench simulation`: one placement carried through a tree of real
//! relay cores, end to end, in memory.
//!
//! It builds a balanced tree (`--levels 4`: the root, two levels of relays
//! and the agents; 10^6 agents by default, so 100 children per relay) in
//! [`relaymesh_core::simulation`], every node running the core the daemons
//! run, and measures three phases:
//!
//! 1. **build**: every node connects and the inventory climbs to the root;
//! 2. **placement**: the root signs one placement (`tier in (edge,store)`,
//!    about five clusters in six) referencing one bundle; every relay cuts
//!    it for its children, every selected agent receives it, checks the
//!    root's signature and fetches the bundle from its parent;
//! 3. **status**: every selected agent reports its status (one in a hundred
//!    failed) and the summaries merge level by level up to the root.
//!
//! For each it counts the messages every level handled; the figure that
//! matters is the root's, which must grow with its children, not with the
//! agents below. It checks what it measured: exactly the matching clusters
//! hold the placement and its bundle, and the root's summary counts them
//! all.

use std::time::Instant;

use relaymesh_core::simulation::{LevelTraffic, SimulationConfig, SimulationError, Traffic};
use relaymesh_protocol::{
    BundleId, FailingCluster, PhaseCounts, PlacementStatus, PlacementTarget, RuleSummary,
    SliceEntry, Summary, Target,
};
use relaymesh_topology::{selector, summary};
use serde::Serialize;

use super::fleet::{self, peak_rss_mib, rss_mib, Shape};

/// The placement's key.
const KEY: &str = "placement/bench/storefront";
/// The clusters it selects.
const SELECTOR: &str = "tier in (edge,store)";
/// The size of its bundle.
const BUNDLE_LEN: usize = 4096;
/// The status rule every agent reports: readyReplicas summed by region.
const RULE: &str = "ready-replicas";

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Config {
    /// Agents (destinations) at the bottom of the tree.
    pub destinations: u64,
    /// Levels of the tree, the root's and the agents' included.
    pub levels: usize,
    /// Keep every node's persisted state in memory (as a restart would
    /// need); off, persisted batches are only counted.
    pub keep_state: bool,
}

/// Why the benchmark failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimulationBenchError {
    /// The simulation refused a step.
    #[error(transparent)]
    Simulation(#[from] SimulationError),
    /// A tree needs at least a root and one level of agents.
    #[error("a tree has at least 2 levels (the root and its agents), not {0}")]
    TooFewLevels(usize),
    /// The selector does not parse.
    #[error("the placement's selector: {0}")]
    Selector(String),
    /// The tree did not deliver what it should have.
    #[error("the simulation went wrong: {0}")]
    Check(String),
}

/// The measurements, as written to `simulation.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Agents at the bottom of the tree.
    pub destinations: u64,
    /// Levels, the root's and the agents' included.
    pub levels: usize,
    /// Relays under each relay, level by level.
    pub fanout: Vec<usize>,
    /// Relays, the root included.
    pub relays: u64,
    /// The root's children.
    pub root_children: u64,
    /// Agents the placement selected (and that hold its bundle).
    pub selected: u64,
    /// The summary the root holds at the end.
    pub root_status: PhaseCounts,
    /// Connecting every node and letting the inventory climb.
    pub build: Phase,
    /// Resolving the placement and propagating its bundle.
    pub placement: Phase,
    /// Reporting every status and merging it up to the root.
    pub status: Phase,
    /// All three phases.
    pub wall_ms: f64,
    /// Peak resident memory (VmHWM), in MiB, if the OS tells.
    pub peak_rss_mib: Option<f64>,
    /// Messages the root handled (from its children), all phases.
    pub root_messages: u64,
    /// Events the root's core was handed, all phases.
    pub root_events: u64,
    /// What every level handled over the whole run, root first.
    pub traffic: Vec<LevelTraffic>,
}

/// One phase of the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phase {
    /// Its wall time.
    pub wall_ms: f64,
    /// What each level handled in it, summed, root first.
    pub levels: Vec<Traffic>,
    /// Messages the root handled in it.
    pub root_messages: u64,
    /// Resident memory (VmRSS) at its end, in MiB, if the OS tells.
    pub rss_mib: Option<f64>,
}

/// Builds the tree, runs the three phases and measures.
pub fn run(config: &Config) -> Result<Report, SimulationBenchError> {
    if config.levels < 2 {
        return Err(SimulationBenchError::TooFewLevels(config.levels));
    }
    let selector = selector::parse(SELECTOR)
        .map_err(|error| SimulationBenchError::Selector(error.to_string()))?;
    let shape = Shape::balanced(config.levels, config.destinations);
    let simulation_config = SimulationConfig {
        keep_state: config.keep_state,
        ..SimulationConfig::default()
    };
    let started = Instant::now();
    let fleet = fleet::build(&shape, simulation_config)?;
    let build = phase(started, &[], &fleet.simulation.traffic_by_level());
    let mut simulation = fleet.simulation;

    // One placement, with one bundle.
    let before = simulation.traffic_by_level();
    let started = Instant::now();
    let bundle: Vec<u8> = (0..BUNDLE_LEN).map(|i| (i % 251) as u8).collect();
    let bundle_id = BundleId::of(&bundle);
    let entry = SliceEntry {
        key: KEY.into(),
        target: Target::Placement(PlacementTarget {
            selector: Some(selector.clone()),
            ..PlacementTarget::default()
        }),
        bundles: vec![bundle_id],
        body: b"{\"kind\":\"Placement\"}".to_vec(),
        serial: 0,
        signature: Vec::new(),
    };
    simulation.upsert_at_root(entry, &[&bundle])?;
    if !simulation.settle() {
        return Err(check("the placement did not settle"));
    }
    let placement = phase(started, &before, &simulation.traffic_by_level());

    let expected: Vec<(&String, &str)> = fleet
        .clusters
        .iter()
        .filter(|(_, labels)| relaymesh_topology::selector::matches(&selector, labels))
        .map(|(name, labels)| (name, labels.get("region").map_or("", String::as_str)))
        .collect();
    let mut selected = 0u64;
    for (name, _) in &fleet.clusters {
        let node = &simulation[name.as_str()];
        if node.holds(KEY) {
            selected += 1;
            if node.bundle(&bundle_id).is_none() {
                return Err(check(&format!(
                    "{name} holds the placement, not its bundle"
                )));
            }
        }
    }
    if selected != expected.len() as u64
        || !expected
            .iter()
            .all(|(name, _)| simulation[name.as_str()].holds(KEY))
    {
        return Err(check(&format!(
            "{selected} clusters hold the placement, {} match it",
            expected.len()
        )));
    }

    // Every selected cluster reports.
    let before = simulation.traffic_by_level();
    let started = Instant::now();
    let now = simulation.now();
    for (number, (name, region)) in expected.iter().enumerate() {
        let failed = number % 100 == 99;
        // What a status rule summing readyReplicas by region reports.
        let ready_replicas = summary::single(if failed { 0.0 } else { 2.0 }, name);
        let rule = RuleSummary {
            rule: RULE.into(),
            all: ready_replicas.clone(),
            groups: vec![(region.to_string(), ready_replicas)],
            other: Summary::default(),
        };
        let status = PlacementStatus {
            counts: PhaseCounts {
                ready: u64::from(!failed),
                failed: u64::from(failed),
                ..PhaseCounts::default()
            },
            message: failed
                .then(|| format!("{name}: Deployment bench/storefront: image pull failed")),
            failing: failed
                .then(|| FailingCluster {
                    cluster: name.to_string(),
                    message: "Deployment bench/storefront: image pull failed".into(),
                })
                .into_iter()
                .collect(),
            rules: vec![rule],
            ..PlacementStatus::default()
        };
        if let Some(core) = simulation.core_mut(name) {
            core.set_own_status(now, KEY, Some(status));
        }
    }
    if !simulation.settle() {
        return Err(check("the statuses did not settle"));
    }
    let status = phase(started, &before, &simulation.traffic_by_level());
    let root_summary = simulation["root"]
        .core()
        .placement_status(KEY)
        .unwrap_or_default();
    let root_status = root_summary.counts;
    if root_status.ready + root_status.failed != selected {
        return Err(check(&format!(
            "the root's summary counts {root_status:?}, {selected} clusters report"
        )));
    }
    let rule = root_summary.rules.first().filter(|rule| rule.rule == RULE);
    let grouped = rule.map_or(0, |rule| {
        rule.groups
            .iter()
            .map(|(_, summary)| summary.count)
            .sum::<u64>()
            + rule.other.count
    });
    let expected_sum = 2.0 * root_status.ready as f64;
    if rule.map(|rule| (rule.all.count, rule.all.sum.0)) != Some((selected, expected_sum))
        || grouped != selected
    {
        return Err(check(&format!(
            "the root's rule summary is {rule:?}, {selected} clusters reported {expected_sum} in all"
        )));
    }

    let traffic = simulation.traffic_by_level();
    let root = simulation["root"].traffic();
    Ok(Report {
        destinations: config.destinations,
        levels: config.levels,
        fanout: shape.fanout.clone(),
        relays: fleet.relays,
        root_children: traffic.get(1).map_or(0, |level| level.nodes),
        selected,
        root_status,
        wall_ms: build.wall_ms + placement.wall_ms + status.wall_ms,
        build,
        placement,
        status,
        peak_rss_mib: peak_rss_mib(),
        root_messages: root.messages_from_children,
        root_events: root.events,
        traffic,
    })
}

fn check(what: &str) -> SimulationBenchError {
    SimulationBenchError::Check(what.to_string())
}

/// A phase that started at `started`, with the traffic per level before
/// and after it.
fn phase(started: Instant, before: &[LevelTraffic], after: &[LevelTraffic]) -> Phase {
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let levels: Vec<Traffic> = after
        .iter()
        .map(|level| {
            let earlier = before
                .get(level.level)
                .map(|level| level.total)
                .unwrap_or_default();
            difference(&level.total, &earlier)
        })
        .collect();
    let root_messages = levels.first().map_or(0, |root| root.messages_from_children);
    Phase {
        wall_ms,
        levels,
        root_messages,
        rss_mib: rss_mib(),
    }
}

fn difference(after: &Traffic, before: &Traffic) -> Traffic {
    Traffic {
        events: after.events - before.events,
        messages_from_parent: after.messages_from_parent - before.messages_from_parent,
        slice_changes_from_parent: after.slice_changes_from_parent
            - before.slice_changes_from_parent,
        messages_from_children: after.messages_from_children - before.messages_from_children,
        inventory_records_from_children: after.inventory_records_from_children
            - before.inventory_records_from_children,
        messages_to_parent: after.messages_to_parent - before.messages_to_parent,
        status_bytes_to_parent: after.status_bytes_to_parent - before.status_bytes_to_parent,
        status_bytes_from_children: after.status_bytes_from_children
            - before.status_bytes_from_children,
        messages_to_children: after.messages_to_children - before.messages_to_children,
        bundles_fetched: after.bundles_fetched - before.bundles_fetched,
        bundle_bytes_fetched: after.bundle_bytes_fetched - before.bundle_bytes_fetched,
        bundles_served: after.bundles_served - before.bundles_served,
        persist_batches: after.persist_batches - before.persist_batches,
        mutations: after.mutations - before.mutations,
    }
}

impl Report {
    /// The common report (`target/bench/simulation.json`): the figures with
    /// their goals, messages per level as a plot, and this report whole as
    /// its details.
    pub fn to_report(&self) -> Result<super::report::Report, serde_json::Error> {
        use super::report::{Figure, Line, Report as Common, Series};
        let mut report = Common::new(
            "simulation",
            serde_json::json!({"destinations": self.destinations, "levels": self.levels}),
        );
        report.description = "One placement resolved, its bundle propagated and every \
            status summarized through a tree of real relay cores (`relaymesh_core::simulation`), \
            in one process, no sockets. Every selected agent's status carries its phase, a \
            failing entry where it failed, and a status rule's value grouped by region; the \
            root's summary is checked against what the agents reported."
            .into();
        report.figure(
            Figure::new(
                format!(
                    "{} destinations, {} levels: completed",
                    self.destinations, self.levels
                ),
                self.wall_ms / 1000.0,
                "s",
            )
            .with_goal("completes here", |_| true),
        );
        if let Some(rss) = self.peak_rss_mib {
            report.figure(Figure::new("peak memory (VmHWM)", rss, "MiB"));
        }
        report.figure(Figure::new(
            "root children",
            self.root_children as f64,
            "nodes",
        ));
        // Status fan-in: every selected agent reports phase counts, a
        // failing entry where it failed and a rule summary grouped by
        // region; what reaches the root against what the agents sent.
        report.figure(Figure::new(
            format!(
                "status of {} destinations merged up to the root",
                self.selected
            ),
            self.status.wall_ms / 1000.0,
            "s",
        ));
        let agents_sent = self
            .status
            .levels
            .last()
            .map_or(0, |level| level.status_bytes_to_parent);
        let root_received = self
            .status
            .levels
            .first()
            .map_or(0, |level| level.status_bytes_from_children);
        report.figure(Figure::new(
            "status bytes the agents sent",
            agents_sent as f64,
            "bytes",
        ));
        report.figure(Figure::new(
            "status bytes that reached the root",
            root_received as f64,
            "bytes",
        ));
        report.figure(
            Figure::new(
                "status bytes at the root / bytes the agents sent",
                100.0 * root_received as f64 / agents_sent.max(1) as f64,
                "%",
            )
            .with_goal("under 1 %", |v| v < 1.0),
        );
        let per_child = self.root_messages as f64 / self.root_children.max(1) as f64;
        report.figure(
            Figure::new("messages the root handled per child", per_child, "messages")
                .with_goal("O(children): at most 10 per child, whatever N", |v| {
                    v <= 10.0
                }),
        );
        for level in &self.traffic {
            let received = level.total.messages_from_parent + level.total.messages_from_children;
            report.figure(Figure::new(
                format!(
                    "level {} ({} nodes): messages received",
                    level.level, level.nodes
                ),
                received as f64,
                "messages",
            ));
        }
        report.series.push(Series {
            title: "Messages received per level".into(),
            x_label: "level (0 = root)".into(),
            y_label: "messages".into(),
            lines: vec![Line {
                label: "received".into(),
                points: self
                    .traffic
                    .iter()
                    .map(|level| {
                        let received =
                            level.total.messages_from_parent + level.total.messages_from_children;
                        (level.level as f64, received as f64)
                    })
                    .collect(),
            }],
        });
        report.details = serde_json::to_value(self)?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_tree_delivers_the_placement_and_sums_every_status() {
        let report = run(&Config {
            destinations: 500,
            levels: 4,
            keep_state: true,
        })
        .expect("the simulation runs");
        assert_eq!(report.fanout, [8, 8]);
        assert_eq!(report.relays, 1 + 8 + 64);
        assert_eq!(report.root_children, 8);
        assert!(report.selected > 300, "{}", report.selected);
        assert_eq!(
            report.root_status.ready + report.root_status.failed,
            report.selected
        );
        // The bundle crossed each link to a selected node once.
        let fetched: u64 = report
            .placement
            .levels
            .iter()
            .map(|l| l.bundles_fetched)
            .sum();
        let served: u64 = report
            .placement
            .levels
            .iter()
            .map(|l| l.bundles_served)
            .sum();
        assert_eq!(fetched, served);
        // The root hears from its 8 children a bounded number of times per
        // phase, not once per agent.
        assert!(report.placement.root_messages <= 8 * 4, "{report:?}");
        assert!(report.status.root_messages <= 8 * 4, "{report:?}");
    }
}
