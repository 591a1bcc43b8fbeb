//! A placement's status rules and group labels at the leaf: read from the
//! root-signed slice entry's body (`spec.statusRules`,
//! `spec.statusGroupBy`), evaluated on the live objects the agent applied
//! ([`relaymesh_topology::rules`]) and on the cluster's phase
//! ([`relaymesh_topology::groups`]), so what climbs the tree is one summary
//! per rule and label, never an object.

use std::collections::BTreeMap;

use relaymesh_protocol::RuleSummary;
use relaymesh_topology::rules::{CompiledRules, StatusRule};
use relaymesh_topology::{groups, summary};
use serde_json::Value;

use crate::status::Phase;

/// What a placement asks its clusters to summarize.
#[derive(Debug, Default)]
pub struct PlacementRules {
    /// The rules and labels it was made from, to tell a change.
    source: (Vec<StatusRule>, Vec<String>),
    compiled: Option<CompiledRules>,
    group_by: Vec<String>,
}

impl PlacementRules {
    /// Compiles a placement's status `rules` and takes its group labels,
    /// both read from its slice entry's body (`EntrySpec`, which keeps at
    /// most `MAX_GROUP_LABELS` labels). The root checked them before
    /// signing the entry; rules that do not compile here (a newer root's)
    /// are logged and left out, and the placement is applied all the same.
    pub fn new(rules: Vec<StatusRule>, group_by: Vec<String>) -> Self {
        let compiled = match CompiledRules::compile(&rules) {
            Ok(compiled) if !compiled.is_empty() => Some(compiled),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(%error, "status rules left out");
                None
            }
        };
        Self {
            compiled,
            group_by: group_by.clone(),
            source: (rules, group_by),
        }
    }

    /// Whether `other` was made from the same rules and labels.
    pub fn same_source(&self, other: &Self) -> bool {
        self.source == other.source
    }

    /// This cluster's summaries: each rule over `objects` (the placement's
    /// live objects here), then the phase counts of each group label, merged
    /// into one list in name order.
    pub fn summaries<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a Value>,
        cluster: &str,
        labels: &BTreeMap<String, String>,
        phase: &Phase,
    ) -> Vec<RuleSummary> {
        let mut all = Vec::new();
        if let Some(compiled) = &self.compiled {
            let objects: Vec<Value> = objects.into_iter().cloned().collect();
            all.extend(compiled.evaluate(&objects, cluster, labels));
        }
        all.extend(groups::of_cluster(
            &self.group_by,
            labels,
            cluster,
            *phase == Phase::Ready,
            *phase == Phase::Failed,
        ));
        if all.is_empty() {
            return all;
        }
        summary::merge_rules(&all)
    }
}

#[cfg(test)]
mod tests {
    use relaymesh_topology::spec::EntrySpec;
    use serde_json::json;

    use super::*;

    #[test]
    fn rules_and_groups_come_from_the_entry_body() {
        let spec = relaymesh_topology::spec::PlacementSpec::from_object(&json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": {
                "workloads": [{}],
                "clusters": {"names": ["edge-1"]},
                "statusRules": [{
                    "name": "ready",
                    "select": "object.status.readyReplicas",
                    "aggregate": "sum",
                    "groupBy": "region",
                }],
                "statusGroupBy": ["region"],
            },
        }))
        .expect("valid");
        let read = EntrySpec::read(&spec.body()).expect("reads");
        let rules = PlacementRules::new(read.status_rules, read.status_group_by);
        let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let web = json!({"kind": "Deployment", "status": {"readyReplicas": 3}});
        let summaries = rules.summaries([&web], "edge-1", &labels, &Phase::Ready);
        let names: Vec<&str> = summaries.iter().map(|rule| rule.rule.as_str()).collect();
        assert_eq!(names, [":failed:region", ":ready:region", "ready"]);
        let ready = &summaries[2];
        assert_eq!((ready.all.count, ready.all.sum.0), (1, 3.0));
        assert_eq!(ready.groups[0].0, "eu");
        let grouped = groups::read(&summaries, "region").expect("grouped");
        assert_eq!((grouped[0].clusters, grouped[0].ready), (1, 1));

        assert!(PlacementRules::default()
            .summaries([&web], "edge-1", &labels, &Phase::Ready)
            .is_empty());
        let other = PlacementRules::new(Vec::new(), Vec::new());
        assert!(!rules.same_source(&other));
    }
}
