//! Phase counts grouped by a cluster label (`Placement.spec.statusGroupBy`),
//! so `relayctl status --by region` can say how each region is doing
//! without the root ever holding one entry per cluster.
//!
//! Each group label travels as two reserved rule summaries that merge with
//! the rest of the status algebra ([`crate::summary::merge_rules`]): one
//! whose values are 1 for a ready cluster and 0 otherwise, one with 1 for a
//! failed cluster. A group's `count` is its clusters, the first summary's
//! `sum` its ready clusters, the second's its failed ones. The reserved
//! names start with `:`, which no rule name (a DNS label) can.

use std::collections::BTreeMap;

use relaymesh_protocol::status::MAX_GROUP_LABELS;
use relaymesh_protocol::{RuleSummary, Summary};

use crate::summary::single;

/// The reserved rule name of a label's ready counts.
pub fn ready_rule(label: &str) -> String {
    format!(":ready:{label}")
}

/// The reserved rule name of a label's failed counts.
pub fn failed_rule(label: &str) -> String {
    format!(":failed:{label}")
}

/// Whether `name` is a reserved rule name, not one of the placement's rules.
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(':')
}

/// What one cluster reports for the group labels `group_by` (at most
/// [`MAX_GROUP_LABELS`] of them): its own group's key is its value of the
/// label (`""` when it has none).
pub fn of_cluster(
    group_by: &[String],
    labels: &BTreeMap<String, String>,
    cluster: &str,
    ready: bool,
    failed: bool,
) -> Vec<RuleSummary> {
    let mut summaries = Vec::new();
    for label in group_by.iter().take(MAX_GROUP_LABELS) {
        let key = labels.get(label).cloned().unwrap_or_default();
        for (rule, value) in [(ready_rule(label), ready), (failed_rule(label), failed)] {
            let one = single(if value { 1.0 } else { 0.0 }, cluster);
            summaries.push(RuleSummary {
                rule,
                all: one.clone(),
                groups: vec![(key.clone(), one)],
                other: Summary::default(),
            });
        }
    }
    summaries.sort_by(|a, b| a.rule.cmp(&b.rule));
    summaries
}

/// How one group of clusters is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// The label's value (`""`: clusters without the label; `None`: the
    /// groups past the bound, merged).
    pub key: Option<String>,
    /// Clusters in the group that reported.
    pub clusters: u64,
    /// Of them, ready.
    pub ready: u64,
    /// Of them, failed.
    pub failed: u64,
}

/// The groups of label `label` in merged `rules`, by key, then the merged
/// rest past the bound if any; `None` if the status does not group by it.
pub fn read(rules: &[RuleSummary], label: &str) -> Option<Vec<GroupCounts>> {
    let find = |name: String| rules.iter().find(|rule| rule.rule == name);
    let ready = find(ready_rule(label))?;
    let failed = find(failed_rule(label));
    let failed_of = |key: &str| {
        failed
            .and_then(|failed| failed.groups.iter().find(|(other, _)| other == key))
            .map_or(0, |(_, summary)| count_of(summary))
    };
    let mut groups: Vec<GroupCounts> = ready
        .groups
        .iter()
        .map(|(key, summary)| GroupCounts {
            key: Some(key.clone()),
            clusters: summary.count,
            ready: count_of(summary),
            failed: failed_of(key),
        })
        .collect();
    if ready.other.count > 0 {
        groups.push(GroupCounts {
            key: None,
            clusters: ready.other.count,
            ready: count_of(&ready.other),
            failed: failed.map_or(0, |failed| count_of(&failed.other)),
        });
    }
    Some(groups)
}

/// A sum of ones and zeros, as a count (a hostile child's fractions and
/// negatives are clamped).
fn count_of(summary: &Summary) -> u64 {
    let sum = summary.sum.0;
    if sum.is_finite() && sum > 0.0 {
        (sum.round() as u64).min(summary.count)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::merge_rules;

    fn labels(region: Option<&str>) -> BTreeMap<String, String> {
        region
            .map(|region| BTreeMap::from([("region".to_string(), region.to_string())]))
            .unwrap_or_default()
    }

    #[test]
    fn clusters_are_counted_per_region_through_merges() {
        let by = ["region".to_string()];
        let reports = [
            of_cluster(&by, &labels(Some("eu")), "a", true, false),
            of_cluster(&by, &labels(Some("eu")), "b", false, true),
            of_cluster(&by, &labels(Some("us")), "c", true, false),
            of_cluster(&by, &labels(None), "d", false, false),
        ];
        let left = merge_rules(reports[..2].iter().flatten());
        let right = merge_rules(reports[2..].iter().flatten());
        let merged = merge_rules(left.iter().chain(&right));
        let groups = read(&merged, "region").expect("grouped by region");
        let row = |key: &str, clusters, ready, failed| GroupCounts {
            key: Some(key.to_string()),
            clusters,
            ready,
            failed,
        };
        assert_eq!(
            groups,
            vec![row("", 1, 0, 0), row("eu", 2, 1, 1), row("us", 1, 1, 0)]
        );
        assert_eq!(read(&merged, "zone"), None);
        assert!(merged.iter().all(|rule| is_reserved(&rule.rule)));
    }
}
