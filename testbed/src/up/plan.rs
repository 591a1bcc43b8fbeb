//! The shape of a local fleet, decided without IO: which relays sit where,
//! which agents hang under which relay, and the labels each cluster gets.
//!
//! Naming and labels are deterministic, so the same flags always give the
//! same fleet:
//! * relays on the first level are named after regions (`eu`, `us`, `ap`,
//!   …), and give every cluster below them its `region` label;
//! * relays on the second level are named `<region>-<direction>`
//!   (`eu-west`, `eu-east`, …) and give the clusters below them their `zone`;
//!   deeper relays are `<parent>-<n>`;
//! * agents go round-robin over the deepest level, are named
//!   `edge-<region>-<n>`, and their `tier` cycles over edge, store and core.

use std::collections::BTreeMap;

/// Region names of the first level, in order; later relays get `r<n>`.
const REGIONS: [&str; 7] = ["eu", "us", "ap", "sa", "af", "me", "oc"];

/// Second-level suffixes, in order; later relays get a number.
const DIRECTIONS: [&str; 5] = ["west", "east", "north", "south", "central"];

/// Tiers, cycled over agents in order.
pub const TIERS: [&str; 3] = ["edge", "store", "core"];

/// The name of the root relay.
pub const ROOT: &str = "root";

/// A relay below the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPlan {
    /// Its name.
    pub name: String,
    /// Its parent's name.
    pub parent: String,
    /// 1 for the root's children, 2 below them, …
    pub level: usize,
}

/// An edge agent and its simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlan {
    /// The cluster's name.
    pub name: String,
    /// The relay it joins under.
    pub parent: String,
    /// Its labels: `region`, `zone` and `tier`.
    pub labels: BTreeMap<String, String>,
}

/// A whole fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The relays below the root, level by level.
    pub relays: Vec<RelayPlan>,
    /// The agents.
    pub agents: Vec<AgentPlan>,
}

impl Plan {
    /// `relays_per_level[i]` relays under each relay of level `i` (the root
    /// is level 0), and `agents` agents spread over the deepest level.
    pub fn new(relays_per_level: &[usize], agents: usize) -> Self {
        let mut relays: Vec<RelayPlan> = Vec::new();
        let mut parents = vec![ROOT.to_string()];
        for (index, &count) in relays_per_level.iter().enumerate() {
            let level = index + 1;
            let mut next = Vec::new();
            for parent in &parents {
                for position in 0..count {
                    let name = relay_name(level, parent, position, next.len());
                    next.push(name.clone());
                    relays.push(RelayPlan {
                        name,
                        parent: parent.clone(),
                        level,
                    });
                }
            }
            if next.is_empty() {
                break;
            }
            parents = next;
        }
        let mut per_region: BTreeMap<String, usize> = BTreeMap::new();
        let agents = (0..agents)
            .map(|index| {
                let parent = parents[index % parents.len()].clone();
                let ancestry = ancestry(&relays, &parent);
                let region = ancestry
                    .first()
                    .cloned()
                    .unwrap_or_else(|| region_name(index % REGIONS.len()));
                let zone = ancestry
                    .get(1)
                    .cloned()
                    .unwrap_or_else(|| format!("{region}-1"));
                let number = per_region.entry(region.clone()).or_default();
                *number += 1;
                let labels = BTreeMap::from([
                    ("region".to_string(), region.clone()),
                    ("zone".to_string(), zone),
                    ("tier".to_string(), TIERS[index % TIERS.len()].to_string()),
                ]);
                AgentPlan {
                    name: format!("edge-{region}-{number}"),
                    parent,
                    labels,
                }
            })
            .collect();
        Self { relays, agents }
    }

    /// How many levels of relays there are below the root.
    pub fn depth(&self) -> usize {
        self.relays
            .iter()
            .map(|relay| relay.level)
            .max()
            .unwrap_or(0)
    }
}

impl AgentPlan {
    /// The labels as `edge-agent join --labels` takes them.
    pub fn labels_flag(&self) -> String {
        self.labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn relay_name(level: usize, parent: &str, position: usize, index_in_level: usize) -> String {
    match level {
        1 => region_name(index_in_level),
        2 => match DIRECTIONS.get(position) {
            Some(direction) => format!("{parent}-{direction}"),
            None => format!("{parent}-{}", position + 1),
        },
        _ => format!("{parent}-{}", position + 1),
    }
}

fn region_name(index: usize) -> String {
    REGIONS
        .get(index)
        .map_or_else(|| format!("r{}", index + 1), |region| region.to_string())
}

/// The names of `relay`'s ancestors below the root, top first, ending with
/// `relay` itself (empty for the root).
fn ancestry(relays: &[RelayPlan], relay: &str) -> Vec<String> {
    let mut chain = Vec::new();
    let mut current = relay;
    while let Some(found) = relays.iter().find(|candidate| candidate.name == current) {
        chain.push(found.name.clone());
        current = &found.parent;
    }
    chain.reverse();
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label<'a>(agent: &'a AgentPlan, key: &str) -> &'a str {
        agent.labels.get(key).map_or("", String::as_str)
    }

    #[test]
    fn the_default_fleet_has_two_levels_and_eight_agents() {
        let plan = Plan::new(&[2, 2], 8);
        let names: Vec<(&str, &str)> = plan
            .relays
            .iter()
            .map(|relay| (relay.name.as_str(), relay.parent.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("eu", "root"),
                ("us", "root"),
                ("eu-west", "eu"),
                ("eu-east", "eu"),
                ("us-west", "us"),
                ("us-east", "us"),
            ]
        );
        assert_eq!(plan.depth(), 2);
        let parents: Vec<&str> = plan.agents.iter().map(|a| a.parent.as_str()).collect();
        assert_eq!(
            parents,
            [
                "eu-west", "eu-east", "us-west", "us-east", "eu-west", "eu-east", "us-west",
                "us-east"
            ]
        );
        let first = &plan.agents[0];
        assert_eq!(first.name, "edge-eu-1");
        assert_eq!(first.labels_flag(), "region=eu,tier=edge,zone=eu-west");
        let second = &plan.agents[1];
        assert_eq!(second.name, "edge-eu-2");
        assert_eq!(label(second, "zone"), "eu-east");
        assert_eq!(label(second, "tier"), "store");
        assert_eq!(label(&plan.agents[2], "region"), "us");
        assert_eq!(label(&plan.agents[2], "tier"), "core");
        assert_eq!(label(&plan.agents[3], "tier"), "edge");
    }

    #[test]
    fn labels_spread_evenly_and_names_are_unique() {
        let plan = Plan::new(&[3, 2], 60);
        let mut regions: BTreeMap<&str, usize> = BTreeMap::new();
        let mut tiers: BTreeMap<&str, usize> = BTreeMap::new();
        let mut zones: BTreeMap<&str, usize> = BTreeMap::new();
        for agent in &plan.agents {
            *regions.entry(label(agent, "region")).or_default() += 1;
            *tiers.entry(label(agent, "tier")).or_default() += 1;
            *zones.entry(label(agent, "zone")).or_default() += 1;
            // A zone belongs to its region.
            assert!(label(agent, "zone").starts_with(label(agent, "region")));
        }
        assert_eq!(
            regions,
            BTreeMap::from([("ap", 20), ("eu", 20), ("us", 20)])
        );
        assert_eq!(tiers.values().copied().collect::<Vec<_>>(), [20, 20, 20]);
        assert_eq!(zones.len(), 6);
        assert!(zones.values().all(|&count| count == 10));
        let mut names: Vec<&str> = plan.agents.iter().map(|a| a.name.as_str()).collect();
        names.extend(plan.relays.iter().map(|r| r.name.as_str()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
        // The same flags give the same fleet.
        assert_eq!(plan, Plan::new(&[3, 2], 60));
    }

    #[test]
    fn shallow_deep_and_relay_less_fleets() {
        let plan = Plan::new(&[2, 1], 4);
        let names: Vec<&str> = plan.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["edge-eu-1", "edge-us-1", "edge-eu-2", "edge-us-2"]);
        assert_eq!(plan.agents[0].parent, "eu-west");
        assert_eq!(plan.agents[1].parent, "us-west");

        let deep = Plan::new(&[1, 1, 2], 2);
        assert_eq!(deep.depth(), 3);
        assert_eq!(deep.agents[0].parent, "eu-west-1");
        assert_eq!(deep.agents[1].parent, "eu-west-2");
        assert_eq!(label(&deep.agents[1], "zone"), "eu-west");

        let flat = Plan::new(&[], 3);
        assert!(flat.relays.is_empty());
        assert!(flat.agents.iter().all(|a| a.parent == ROOT));
        assert_eq!(label(&flat.agents[1], "region"), "us");
        assert_eq!(label(&flat.agents[1], "zone"), "us-1");

        let many = Plan::new(&[9], 9);
        assert_eq!(many.relays[7].name, "r8");
    }
}
