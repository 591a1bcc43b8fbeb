//! `testbed bench placement`: hierarchical placement resolution over a
//! simulated fleet.
//!
//! Builds a tree (by default root → 100 relays → 100 relays → 100 clusters
//! each, 10^6 clusters) whose clusters carry `region`, `zone`, `tier` and
//! sometimes `gpu` labels, drawn deterministically (a fixed seed, correlated
//! with the relay they sit under, as real fleets are). Then it builds every
//! relay's aggregate bottom up and resolves a deterministic mix of placements
//! twice: at the root alone (one relay's decision: split, names, cuts) and
//! over the whole tree down to the leaves. It counts the label sets each
//! decision examined, to show that a relay's work grows with its children
//! and their distinct label sets, not with the clusters below.

use std::time::{Duration, Instant};

use relaymesh_protocol::PlacementTarget;
use relaymesh_topology::aggregate::Labels;
use relaymesh_topology::placement::{self, ChildInput};
use relaymesh_topology::selector;
use relaymesh_topology::simulate::{resolve_tree, NodeId, Tree};
use serde::Serialize;

const REGIONS: [&str; 8] = [
    "eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south",
];
const TIERS: [&str; 3] = ["edge", "store", "core"];

/// What to build and resolve.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clusters in the fleet, spread evenly over the lowest relays.
    pub clusters: u64,
    /// Placements to resolve.
    pub placements: usize,
    /// Relays per level below the root, e.g. `[100, 100]`.
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
    /// Building the tree's nodes and labels.
    pub build_tree_ms: f64,
    /// Building every relay's aggregate, bottom up.
    pub build_aggregates_ms: f64,
    /// The root's decisions alone.
    pub root: Timing,
    /// Whole-tree resolutions, down to the leaves.
    pub tree: Timing,
    /// Label sets the root examines per placement (Σ over its children).
    pub root_label_sets_per_placement: u64,
    /// The root's children.
    pub root_children: usize,
    /// Mean relays that received a placement.
    pub mean_relays_visited: f64,
    /// Mean label sets examined per placement over the whole tree.
    pub mean_label_sets_per_placement: f64,
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
pub fn run(config: &Config) -> Report {
    let started = Instant::now();
    let (mut tree, relays) = build_tree(config);
    let build_tree = started.elapsed();
    let started = Instant::now();
    tree.build_aggregates();
    let build_aggregates = started.elapsed();

    let placements: Vec<(String, PlacementTarget)> = (0..config.placements)
        .map(|i| placement(i, config.clusters))
        .collect();

    let root = tree.root();
    let children: Vec<ChildInput<'_>> = tree
        .children(root)
        .iter()
        .map(|child| ChildInput {
            name: tree.name(*child),
            aggregate: tree.aggregate(*child),
        })
        .collect();
    let mut root_times = Vec::with_capacity(placements.len());
    let mut cuts = 0usize;
    for (key, target) in &placements {
        let started = Instant::now();
        let split = placement::split(key, target, None, &children, None);
        let named = placement::named_children_by(target, |name| via(&tree, root, name));
        for child in &children {
            cuts += usize::from(placement::cut(target, &split, &named, child.name).is_some());
        }
        root_times.push(started.elapsed());
    }
    std::hint::black_box(cuts);

    let mut tree_times = Vec::with_capacity(placements.len());
    let (mut visited, mut scanned, mut selected, mut root_scanned) = (0u64, 0u64, 0u64, 0u64);
    for (key, target) in &placements {
        let started = Instant::now();
        let resolution = resolve_tree(&tree, key, target, None);
        tree_times.push(started.elapsed());
        visited += resolution.relays_visited;
        scanned += resolution.label_sets;
        selected += resolution.by_label.len() as u64 + resolution.by_name.len() as u64;
        root_scanned = resolution.root_label_sets;
    }

    let count = placements.len().max(1) as f64;
    Report {
        clusters: config.clusters,
        relays,
        fanout: config.fanout.clone(),
        distinct_label_sets: tree.aggregate(root).label_sets(),
        build_tree_ms: millis(build_tree),
        build_aggregates_ms: millis(build_aggregates),
        root: timing(root_times),
        tree: timing(tree_times),
        root_label_sets_per_placement: root_scanned,
        root_children: children.len(),
        mean_relays_visited: visited as f64 / count,
        mean_label_sets_per_placement: scanned as f64 / count,
        selected_clusters: selected,
        peak_rss_mib: peak_rss_mib(),
    }
}

/// The fleet: relays by `fanout`, clusters spread evenly over the lowest
/// ones. Returns the tree and its number of relays.
fn build_tree(config: &Config) -> (Tree, u64) {
    let mut tree = Tree::new("root");
    let mut random = SplitMix(0x5eed_2e1a_93e5_0001);
    // Each lowest relay with the index it has at every level.
    let mut level: Vec<(NodeId, Vec<usize>)> = vec![(tree.root(), Vec::new())];
    let mut relays = 1u64;
    for fanout in &config.fanout {
        let mut next = Vec::with_capacity(level.len() * fanout);
        for (parent, path) in &level {
            for index in 0..*fanout {
                let name = match path.is_empty() {
                    true => format!("r{index}"),
                    false => format!("{}-{index}", tree.name(*parent)),
                };
                let Some(relay) = tree.add_relay(*parent, &name) else {
                    continue;
                };
                let mut path = path.clone();
                path.push(index);
                next.push((relay, path));
                relays += 1;
            }
        }
        level = next;
    }
    let leaves = level.len().max(1) as u64;
    let mut number = 0u64;
    for (position, (relay, path)) in level.iter().enumerate() {
        let here =
            config.clusters / leaves + u64::from((position as u64) < config.clusters % leaves);
        for _ in 0..here {
            let labels = cluster_labels(&mut random, path);
            tree.add_cluster(*relay, &cluster_name(number), &labels);
            number += 1;
        }
    }
    (tree, relays)
}

/// Labels correlated with where the cluster sits: mostly the region of its
/// top relay and a zone of its second-level relay, a random tier, and a GPU
/// on one cluster in ten.
fn cluster_labels(random: &mut SplitMix, path: &[usize]) -> Labels {
    let top = path.first().copied().unwrap_or(0);
    let second = path.get(1).copied().unwrap_or(0);
    let region = match random.below(10) {
        0 => REGIONS[random.below(REGIONS.len() as u64) as usize],
        _ => REGIONS[top % REGIONS.len()],
    };
    let zone = match random.below(10) {
        0 => random.below(3) as usize,
        _ => second % 3,
    };
    let mut labels = Labels::new();
    labels.insert("region".into(), region.into());
    labels.insert("zone".into(), format!("{region}-{}", ["a", "b", "c"][zone]));
    let tier = TIERS[[0, 0, 0, 1, 1, 2][random.below(6) as usize]];
    labels.insert("tier".into(), tier.into());
    if random.below(10) == 0 {
        labels.insert("gpu".into(), "true".into());
    }
    labels
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
    };
    (format!("bench/p{i}"), target)
}

fn cluster_name(number: u64) -> String {
    format!("c-{number}")
}

/// The child of `relay` that a node lies under, by walking up from it.
fn via(tree: &Tree, relay: NodeId, name: &str) -> Option<String> {
    let mut node = tree.find(name)?;
    while let Some(parent) = tree.parent(node) {
        if parent == relay {
            return Some(tree.name(node).to_string());
        }
        node = parent;
    }
    None
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

/// VmHWM from /proc/self/status, on Linux.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A small fixed-seed generator (SplitMix64), so every run builds the same
/// fleet.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
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
        let (mut tree, relays) = build_tree(&config);
        tree.build_aggregates();
        assert_eq!(relays, 111);
        assert_eq!(tree.aggregate(tree.root()).clusters(), 1000);
        for i in 0..config.placements {
            let (key, target) = placement(i, config.clusters);
            let resolution = resolve_tree(&tree, &key, &target, None);
            let spread_by = target.spread_by.as_deref();
            let supply = tree
                .aggregate(tree.root())
                .supply(target.selector.as_ref(), spread_by);
            let expected = match (&target.selector, target.max_clusters) {
                (None, _) => 0,
                (Some(_), None) => supply.total,
                (Some(_), Some(max)) => supply.total.min(max.into()),
            };
            assert_eq!(resolution.by_label.len() as u64, expected, "placement {i}");
            let names: std::collections::BTreeSet<&String> = target.names.iter().collect();
            assert_eq!(resolution.by_name.len(), names.len(), "placement {i}");
            assert_eq!(resolution.root_label_sets, {
                let root = tree.children(tree.root());
                root.iter()
                    .map(|c| tree.aggregate(*c).label_sets() as u64)
                    .sum::<u64>()
            });
        }
        let report = run(&config);
        assert_eq!(report.clusters, 1000);
        assert_eq!(report.tree.placements, 40);
        assert!(report.selected_clusters > 0);
    }
}
