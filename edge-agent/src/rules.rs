//! A placement's status rules and group labels at the leaf: read from the
//! root-signed slice entry's body (`spec.statusRules`,
//! `spec.statusGroupBy`), evaluated on the live objects the agent applied
//! ([`relaymesh_topology::rules`]) and on the cluster's phase
//! ([`relaymesh_topology::groups`]), so what climbs the tree is one summary
//! per rule and label, never an object.

use std::collections::BTreeMap;

use relaymesh_protocol::status::MAX_GROUP_LABELS;
use relaymesh_protocol::RuleSummary;
use relaymesh_topology::rules::{self, CompiledRules};
use relaymesh_topology::{groups, summary};
use serde_json::Value;

use crate::status::Phase;

/// What a placement asks its clusters to summarize.
#[derive(Debug, Default)]
pub struct PlacementRules {
    /// The spec fields it was read from, to tell a change.
    source: (Option<Value>, Option<Value>),
    compiled: Option<CompiledRules>,
    group_by: Vec<String>,
}

impl PlacementRules {
    /// Reads the rules of a placement's slice entry `body`
    /// (`{"metadata": …, "spec": …}`). The root checked them before signing
    /// the entry; rules that do not compile here (a newer root's) are
    /// logged and left out, and the placement is applied all the same.
    pub fn from_body(body: &Value) -> Self {
        let rules_source = body.pointer("/spec/statusRules").cloned();
        let groups_source = body.pointer("/spec/statusGroupBy").cloned();
        let compiled = match rules::parse(rules_source.as_ref())
            .and_then(|rules| CompiledRules::compile(&rules))
        {
            Ok(compiled) if !compiled.is_empty() => Some(compiled),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(%error, "status rules left out");
                None
            }
        };
        let group_by = groups_source
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .take(MAX_GROUP_LABELS)
            .map(str::to_string)
            .collect();
        Self {
            source: (rules_source, groups_source),
            compiled,
            group_by,
        }
    }

    /// Whether `other` was read from the same spec fields.
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
    use serde_json::json;

    use super::*;

    #[test]
    fn rules_and_groups_come_from_the_entry_body() {
        let body = serde_json::to_vec(&json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": {
                "statusRules": [{
                    "name": "ready",
                    "select": "object.status.readyReplicas",
                    "aggregate": "sum",
                    "groupBy": "region",
                }],
                "statusGroupBy": ["region"],
            },
        }))
        .expect("JSON");
        let rules = PlacementRules::from_body(&serde_json::from_slice(&body).expect("JSON"));
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

        assert!(PlacementRules::from_body(&json!({}))
            .summaries([&web], "edge-1", &labels, &Phase::Ready)
            .is_empty());
        let other = PlacementRules::from_body(&json!({"spec": {}}));
        assert!(!rules.same_source(&other));
    }
}
