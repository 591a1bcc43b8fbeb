//! `testbed bench placement`: hierarchical placement resolution through a
//! tree of real relay cores.
//!
//! Builds a fleet (by default root → 100 relays → 10 relays → 100 clusters
//! each, 10^5 clusters; `bench::fleet` draws the labels) in
//! [`relaymesh_core::simulation`], where every relay runs the core the
//! daemon runs. Then it places a deterministic mix of placements one after
//! the other, each signed at the root, and times two things: the root's own
//! decision (its core's `upsert_local`: split, names, a cut per child and
//! the deltas it queues) and the whole tree's (until every relay that
//! receives the entry has cut it for its children and every selected agent
//! holds it). It counts the messages the root sent, the relays reached and
//! the clusters selected, then removes the placement so the next one starts
//! from the same tree.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use relaymesh_core::simulation::{SimulationConfig, SimulationError};
use relaymesh_protocol::{PlacementTarget, Role, SliceEntry, Target};
use relaymesh_topology::selector;
use serde::Serialize;

use super::fleet::{self, cluster_name, peak_rss_mib, Shape, SplitMix, REGIONS};

/// What to build and resolve.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clusters in the fleet, spread evenly over the lowest relays.
    pub clusters: u64,
    /// Placements to resolve.
    pub placements: usize,
    /// Relays per level below the root, e.g. `[100, 10]`.
    pub fanout: Vec<usize>,
}

/// The measurements, as written to `placement.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Clusters in the fleet.
    pub clusters: u64,
    /// Relays, the root included.
    pub relays: u64,
    /// Relays per level below the root.
    pub fanout: Vec<usize>,
    /// Distinct label sets in the whole fleet.
    pub distinct_label_sets: usize,
    /// Building the tree of cores and letting the inventory climb.
    pub build_tree_ms: f64,
    /// The root core's own decisions.
    pub root: Timing,
    /// Whole-tree resolutions, down to the agents.
    pub tree: Timing,
    /// The root's children.
    pub root_children: usize,
    /// Mean messages the root sent per placement.
    pub mean_root_messages: f64,
    /// Mean relays that received a placement (the root included).
    pub mean_relays_reached: f64,
    /// Clusters selected, over all placements.
    pub selected_clusters: u64,
    /// Peak resident memory (VmHWM), in MiB, if the OS tells.
    pub peak_rss_mib: Option<f64>,
}

/// Times of one kind of resolution over all placements.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timing {
    /// Placements resolved.
    pub placements: usize,
    /// All of them together.
    pub total_ms: f64,
    /// Mean per placement.
    pub mean_us: f64,
    /// Median per placement.
    pub p50_us: f64,
    /// 99th percentile per placement.
    pub p99_us: f64,
    /// Slowest placement.
    pub max_us: f64,
}

/// Builds the fleet, resolves the placements and measures.
pub fn run(config: &Config) -> Result<Report, SimulationError> {
    let (report, _) = resolve_all(config, |_, _| {})?;
    Ok(report)
}

/// What one placement selected: the target and the agents that hold it.
type Selection<'a> = (&'a PlacementTarget, &'a BTreeSet<String>);

/// Runs the benchmark, handing each placement's selection to `inspect`;
/// returns the report and the fleet's clusters.
fn resolve_all(
    config: &Config,
    mut inspect: impl FnMut(usize, Selection<'_>),
) -> Result<(Report, Vec<(String, relaymesh_topology::aggregate::Labels)>), SimulationError> {
    let shape = Shape {
        fanout: config.fanout.clone(),
        clusters: config.clusters,
    };
    let started = Instant::now();
    let fleet = fleet::build(
        &shape,
        SimulationConfig {
            keep_state: false,
            ..SimulationConfig::default()
        },
    )?;
    let build_tree = started.elapsed();
    let mut simulation = fleet.simulation;
    let distinct_label_sets = fleet
        .clusters
        .iter()
        .map(|(_, labels)| labels)
        .collect::<BTreeSet<_>>()
        .len();
    let root_children = config.fanout.first().copied().unwrap_or(0);

    let mut root_times = Vec::with_capacity(config.placements);
    let mut tree_times = Vec::with_capacity(config.placements);
    let (mut root_messages, mut reached, mut selected) = (0u64, 0u64, 0u64);
    for i in 0..config.placements {
        let (key, target) = placement(i, config.clusters);
        let entry = simulation.sign(SliceEntry {
            key: key.clone(),
            target: Target::Placement(target.clone()),
            bundles: vec![],
            body: key.as_bytes().to_vec(),
            serial: 0,
            signature: Vec::new(),
        })?;
        let sent_before = simulation["root"].traffic().messages_to_children;
        let now = simulation.now();
        let started = Instant::now();
        if let Some(root) = simulation.core_mut("root") {
            root.upsert_local(now, entry);
        }
        let root_time = started.elapsed();
        simulation.run();
        tree_times.push(started.elapsed());
        root_times.push(root_time);
        root_messages += simulation["root"].traffic().messages_to_children - sent_before;

        let mut chosen = BTreeSet::new();
        for node in simulation.nodes().filter(|node| node.holds(&key)) {
            match node.role() {
                Role::Agent => {
                    chosen.insert(node.name().to_string());
                }
                _ => reached += 1,
            }
        }
        selected += chosen.len() as u64;
        inspect(i, (&target, &chosen));

        let now = simulation.now();
        if let Some(root) = simulation.core_mut("root") {
            root.remove_local(now, &key);
        }
        simulation.run();
    }

    let count = config.placements.max(1) as f64;
    let report = Report {
        clusters: config.clusters,
        relays: fleet.relays,
        fanout: config.fanout.clone(),
        distinct_label_sets,
        build_tree_ms: millis(build_tree),
        root: timing(root_times),
        tree: timing(tree_times),
        root_children,
        mean_root_messages: root_messages as f64 / count,
        mean_relays_reached: reached as f64 / count,
        selected_clusters: selected,
        peak_rss_mib: peak_rss_mib(),
    };
    Ok((report, fleet.clusters))
}

/// The `i`th placement of a fixed mix: bounded and unbounded, spread and
/// not, broad and narrow selectors, some with explicit names.
fn placement(i: usize, clusters: u64) -> (String, PlacementTarget) {
    let mut random = SplitMix(0xb0b0_0000 + i as u64);
    let region = REGIONS[random.below(REGIONS.len() as u64) as usize];
    let other = REGIONS[random.below(REGIONS.len() as u64) as usize];
    let zone = format!("{region}-{}", ["a", "b", "c"][random.below(3) as usize]);
    let (text, max, spread_by, names): (String, Option<u32>, Option<&str>, usize) = match i % 8 {
        0 => (format!("region={region}"), Some(100), None, 0),
        1 => ("tier=edge".into(), Some(1000), Some("region"), 0),
        2 => (
            format!("region={region},zone={zone},tier=store"),
            None,
            None,
            0,
        ),
        3 => (String::new(), Some(10), Some("zone"), 0),
        4 => (String::new(), None, None, 5),
        5 => (
            format!("region={region},tier=edge"),
            Some(5000),
            Some("zone"),
            3,
        ),
        6 => ("gpu,tier in (edge,store)".into(), Some(50), None, 0),
        _ => (format!("region notin ({region},{other})"), Some(1), None, 0),
    };
    // Placement 4 selects by name only.
    let selector = (i % 8 != 4)
        .then(|| selector::parse(&text))
        .and_then(Result::ok);
    let names = (0..names)
        .map(|_| cluster_name(random.below(clusters.max(1))))
        .collect();
    let target = PlacementTarget {
        selector,
        names,
        max_clusters: max,
        spread_by: spread_by.map(str::to_string),
        quota: None,
        wave: None,
    };
    (format!("bench/p{i}"), target)
}

fn timing(mut times: Vec<Duration>) -> Timing {
    times.sort_unstable();
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let at = |q: f64| {
        let index = ((times.len() as f64 - 1.0) * q).round() as usize;
        times.get(index).copied().map(micros).unwrap_or(0.0)
    };
    let total: Duration = times.iter().sum();
    Timing {
        placements: times.len(),
        total_ms: millis(total),
        mean_us: micros(total) / times.len().max(1) as f64,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: times.last().copied().map(micros).unwrap_or(0.0),
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

impl Report {
    /// The common report (`target/bench/placement.json`), with this report
    /// whole as its details.
    pub fn to_report(&self) -> Result<super::report::Report, serde_json::Error> {
        use super::report::{Figure, Report as Common};
        let mut report = Common::new(
            "placement",
            serde_json::json!({"clusters": self.clusters, "fanout": self.fanout,
                               "placements": self.root.placements}),
        );
        report.description = "Hierarchical placement resolution through a tree of real \
            relay cores in memory: each placement decided by the root core for its children, \
            and resolved down the whole tree."
            .into();
        report.figure(Figure::new(
            "relays, the root included",
            self.relays as f64,
            "relays",
        ));
        report.figure(Figure::new(
            "root alone, mean per placement",
            self.root.mean_us / 1000.0,
            "ms",
        ));
        report.figure(Figure::new(
            "root alone, p99 per placement",
            self.root.p99_us / 1000.0,
            "ms",
        ));
        report.figure(Figure::new(
            "whole tree, mean per placement",
            self.tree.mean_us / 1000.0,
            "ms",
        ));
        report.figure(Figure::new(
            "whole tree, p99 per placement",
            self.tree.p99_us / 1000.0,
            "ms",
        ));
        report.figure(Figure::new(
            "root messages per placement",
            self.mean_root_messages,
            "messages",
        ));
        report.figure(Figure::new(
            "relays reached per placement",
            self.mean_relays_reached,
            "relays",
        ));
        if let Some(rss) = self.peak_rss_mib {
            report.figure(Figure::new("peak memory (VmHWM)", rss, "MiB"));
        }
        report.details = serde_json::to_value(self)?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fleet_resolves_exactly() {
        let config = Config {
            clusters: 1000,
            placements: 40,
            fanout: vec![10, 10],
        };
        let mut selections = Vec::new();
        let (report, clusters) = resolve_all(&config, |i, (target, chosen)| {
            selections.push((i, target.clone(), chosen.clone()));
        })
        .expect("the benchmark runs");
        assert_eq!(report.relays, 111);
        assert_eq!(report.tree.placements, 40);
        assert!(report.selected_clusters > 0);
        for (i, target, chosen) in selections {
            let matching: BTreeSet<String> = clusters
                .iter()
                .filter(|(_, labels)| {
                    target
                        .selector
                        .as_ref()
                        .is_some_and(|selector| selector::matches(selector, labels))
                })
                .map(|(name, _)| name.clone())
                .collect();
            let named: BTreeSet<String> = target.names.iter().cloned().collect();
            assert!(named.is_subset(&chosen), "placement {i}: names are chosen");
            let allowed: BTreeSet<String> = matching.union(&named).cloned().collect();
            assert!(chosen.is_subset(&allowed), "placement {i}: {chosen:?}");
            match target.max_clusters {
                None => assert_eq!(chosen, allowed, "placement {i}"),
                Some(max) => {
                    let bound = matching.len().min(max as usize);
                    let by_label = chosen.difference(&named).count();
                    assert!(by_label <= bound && bound <= chosen.len(), "placement {i}");
                }
            }
        }
    }
}
