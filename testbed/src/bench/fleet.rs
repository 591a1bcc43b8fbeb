//! The simulated fleet the benchmarks run: a tree of real relay cores
//! (`relaymesh_core::simulation`) whose leaves are edge agents with
//! `region`, `zone`, `tier` and sometimes `gpu` labels, drawn from a fixed
//! seed and correlated with the relays they sit under, as real fleets are.

use relaymesh_core::simulation::{Simulation, SimulationConfig, SimulationError};
use relaymesh_topology::aggregate::Labels;

/// The regions clusters are spread over.
pub const REGIONS: [&str; 8] = [
    "eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south",
];
const TIERS: [&str; 3] = ["edge", "store", "core"];

/// The shape of a fleet: relays per level below the root, and clusters
/// spread evenly over the lowest relays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Relays under each relay of the level above, e.g. `[100, 100]`.
    pub fanout: Vec<usize>,
    /// Edge agents (clusters), spread evenly over the lowest relays.
    pub clusters: u64,
}

impl Shape {
    /// A balanced tree of `levels` levels (the root's, the relays', and the
    /// agents' last) with `clusters` agents: the same fanout `f` at every
    /// level, the smallest with `f^(levels-1) >= clusters`.
    pub fn balanced(levels: usize, clusters: u64) -> Self {
        let relay_levels = levels.saturating_sub(2);
        let mut fanout: u64 = 1;
        while fanout.saturating_pow(levels.saturating_sub(1) as u32) < clusters {
            fanout += 1;
        }
        Self {
            fanout: vec![fanout as usize; relay_levels],
            clusters,
        }
    }

    /// Relays, the root included.
    pub fn relays(&self) -> u64 {
        let mut level: u64 = 1;
        let mut relays: u64 = 1;
        for fanout in &self.fanout {
            level = level.saturating_mul(*fanout as u64);
            relays = relays.saturating_add(level);
        }
        relays
    }
}

/// A fleet built in a simulation.
#[derive(Debug)]
pub struct Fleet {
    /// The tree of cores, settled: every relay knows its subtree.
    pub simulation: Simulation,
    /// Every agent's name and labels, in the order they were added.
    pub clusters: Vec<(String, Labels)>,
    /// Relays, the root included.
    pub relays: u64,
}

/// Builds `shape` top down (the root, each level of relays, the agents),
/// each node connecting as it is added, then lets the inventory climb.
pub fn build(shape: &Shape, config: SimulationConfig) -> Result<Fleet, SimulationError> {
    let mut simulation = Simulation::new(config)?;
    simulation.add_relay("root", None)?;
    let mut random = SplitMix(0x5eed_2e1a_93e5_0001);
    // Each lowest relay with the index it has at every level.
    let mut level: Vec<(String, Vec<usize>)> = vec![("root".to_string(), Vec::new())];
    let mut relays = 1u64;
    for fanout in &shape.fanout {
        let mut next = Vec::with_capacity(level.len() * fanout);
        for (parent, path) in &level {
            for index in 0..*fanout {
                let name = match path.is_empty() {
                    true => format!("r{index}"),
                    false => format!("{parent}-{index}"),
                };
                simulation.add_relay(&name, Some(parent))?;
                let mut path = path.clone();
                path.push(index);
                next.push((name, path));
                relays += 1;
            }
        }
        level = next;
    }
    let leaves = level.len().max(1) as u64;
    let mut clusters = Vec::with_capacity(usize::try_from(shape.clusters).unwrap_or(0));
    let mut number = 0u64;
    for (position, (relay, path)) in level.iter().enumerate() {
        let here = shape.clusters / leaves + u64::from((position as u64) < shape.clusters % leaves);
        for _ in 0..here {
            let labels = cluster_labels(&mut random, path);
            let name = cluster_name(number);
            simulation.add_agent(&name, relay, labels.clone())?;
            clusters.push((name, labels));
            number += 1;
        }
    }
    simulation.settle();
    Ok(Fleet {
        simulation,
        clusters,
        relays,
    })
}

/// The name of the `number`th cluster.
pub fn cluster_name(number: u64) -> String {
    format!("c-{number}")
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

/// VmHWM (peak resident memory) from /proc/self/status, in MiB, on Linux.
pub fn peak_rss_mib() -> Option<f64> {
    memory_mib("VmHWM:")
}

/// VmRSS (resident memory now) from /proc/self/status, in MiB, on Linux.
pub fn rss_mib() -> Option<f64> {
    memory_mib("VmRSS:")
}

fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A small fixed-seed generator (SplitMix64), so every run builds the same
/// fleet.
pub struct SplitMix(pub u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `bound` (0 if `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_balanced_shape_has_the_smallest_fanout_that_holds_the_clusters() {
        let shape = Shape::balanced(4, 1_000_000);
        assert_eq!(shape.fanout, [100, 100]);
        assert_eq!(shape.relays(), 1 + 100 + 10_000);
        assert_eq!(Shape::balanced(4, 10_000).fanout, [22, 22]);
        assert_eq!(Shape::balanced(2, 50).fanout, Vec::<usize>::new());
    }
}
