//! A placement's slice entry body ([`PlacementBody`]): the root writes it
//! from the spec it admitted ([`PlacementSpec::body`]); agents turn it back
//! into the checked types they run ([`EntrySpec::read`]), with no JSON of
//! the Placement in between.

use std::time::Duration;

use relaymesh_protocol::placement::body::{self, PlacementBody, RolloutTiming};
use relaymesh_protocol::status::MAX_GROUP_LABELS;
use serde_json::Value;

use super::error::{invalid, PlacementError};
use super::placement::PlacementSpec;
use crate::customization::{Customization, ObjectFilter, Override, Patch};
use crate::rules::{Aggregate, StatusRule};

impl PlacementSpec {
    /// The body of this placement's slice entry.
    pub fn body(&self) -> PlacementBody {
        PlacementBody {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            adopt: self.adopt,
            timing: RolloutTiming {
                min_success_ms: millis(self.rollout.min_success_time),
                progress_deadline_ms: self.rollout.progress_deadline.map(millis),
            },
            customization: customization_body(&self.customization),
            status_rules: self.status_rules.iter().map(rule_body).collect(),
            status_group_by: self.status_group_by.clone(),
        }
    }
}

/// What an agent runs of a placement, read from its entry's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySpec {
    /// Whether it may adopt existing objects.
    pub adopt: bool,
    /// `minSuccessTime`.
    pub min_success_time: Duration,
    /// `progressDeadline`.
    pub progress_deadline: Option<Duration>,
    /// Its templates and overrides.
    pub customization: Customization,
    /// Its status rules (checked again when an agent compiles them).
    pub status_rules: Vec<StatusRule>,
    /// Its group labels, at most [`MAX_GROUP_LABELS`].
    pub status_group_by: Vec<String>,
}

impl EntrySpec {
    /// Reads `body`. The root checked everything before signing the
    /// entry; what can still fail is a patch or an aggregate this build
    /// does not know (a newer root's), named by its field.
    pub fn read(body: &PlacementBody) -> Result<Self, PlacementError> {
        let customization = Customization {
            templates: body.customization.templates,
            overrides: body
                .customization
                .overrides
                .iter()
                .enumerate()
                .map(|(index, rule)| {
                    read_override(rule, &format!("spec.customization.overrides[{index}]"))
                })
                .collect::<Result<_, _>>()?,
        };
        let status_rules = body
            .status_rules
            .iter()
            .enumerate()
            .map(|(index, rule)| read_rule(rule, &format!("spec.statusRules[{index}]")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            adopt: body.adopt,
            min_success_time: Duration::from_millis(body.timing.min_success_ms),
            progress_deadline: body.timing.progress_deadline_ms.map(Duration::from_millis),
            customization,
            status_rules,
            status_group_by: body
                .status_group_by
                .iter()
                .take(MAX_GROUP_LABELS)
                .cloned()
                .collect(),
        })
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn customization_body(customization: &Customization) -> body::Customization {
    body::Customization {
        templates: customization.templates,
        overrides: customization
            .overrides
            .iter()
            .map(|rule| body::Override {
                clusters: rule.clusters.clone(),
                api_group: rule.objects.api_group.clone(),
                kind: rule.objects.kind.clone(),
                names: rule.objects.names.clone(),
                patch: match &rule.patch {
                    // Operations of strings and JSON values: serde_json
                    // cannot fail to write them.
                    Patch::Json(patch) => body::Patch::Json(
                        serde_json::to_string(patch).expect("a JSON patch serializes"),
                    ),
                    Patch::Merge(patch) => body::Patch::Merge(patch.to_string()),
                },
            })
            .collect(),
    }
}

fn read_override(rule: &body::Override, path: &str) -> Result<Override, PlacementError> {
    let patch = match &rule.patch {
        body::Patch::Json(text) => Patch::Json(serde_json::from_str(text).map_err(|error| {
            invalid(
                format!("{path}.jsonPatch"),
                format!("not a JSON patch (RFC 6902): {error}"),
            )
        })?),
        body::Patch::Merge(text) => match serde_json::from_str::<Value>(text) {
            Ok(patch) if patch.is_object() => Patch::Merge(patch),
            _ => {
                return Err(invalid(
                    format!("{path}.mergePatch"),
                    "not an object (RFC 7386)",
                ))
            }
        },
    };
    Ok(Override {
        clusters: rule.clusters.clone(),
        objects: ObjectFilter {
            api_group: rule.api_group.clone(),
            kind: rule.kind.clone(),
            names: rule.names.clone(),
        },
        patch,
    })
}

fn rule_body(rule: &StatusRule) -> body::StatusRule {
    body::StatusRule {
        name: rule.name.clone(),
        select: rule.select.clone(),
        filter: rule.filter.clone(),
        aggregate: rule.aggregate.name().to_string(),
        group_by: rule.group_by.clone(),
        limit: u32::try_from(rule.limit).unwrap_or(u32::MAX),
    }
}

fn read_rule(rule: &body::StatusRule, path: &str) -> Result<StatusRule, PlacementError> {
    let aggregate = Aggregate::from_name(&rule.aggregate).ok_or_else(|| {
        invalid(
            format!("{path}.aggregate"),
            format!("unknown aggregate {:?}", rule.aggregate),
        )
    })?;
    Ok(StatusRule {
        name: rule.name.clone(),
        select: rule.select.clone(),
        filter: rule.filter.clone(),
        aggregate,
        group_by: rule.group_by.clone(),
        limit: usize::try_from(rule.limit).unwrap_or(usize::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> PlacementSpec {
        PlacementSpec::from_object(&json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": {
                "workloads": [{"kind": "Deployment"}],
                "clusters": {"labelSelector": {"matchLabels": {"tier": "edge"}}},
                "adopt": true,
                "rollout": {"strategy": "Progressive", "minSuccessTime": "30s", "progressDeadline": "5m"},
                "customization": {
                    "templates": false,
                    "overrides": [
                        {"clusterSelector": {"matchLabels": {"tier": "large"}},
                         "objects": {"apiGroup": "apps", "kind": "Deployment", "names": ["web"]},
                         "mergePatch": {"spec": {"replicas": 5}}},
                        {"jsonPatch": [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]}
                    ]
                },
                "statusRules": [{"name": "ready", "select": "object.status.readyReplicas", "aggregate": "sum", "groupBy": "region"}],
                "statusGroupBy": ["region"]
            }
        }))
        .expect("valid")
    }

    #[test]
    fn an_admitted_spec_reads_back_from_its_body_unchanged() {
        let spec = spec();
        let body = spec.body();
        assert_eq!(body.key(), "placement/shop/web");
        let read = EntrySpec::read(&body).expect("reads");
        assert_eq!(
            read,
            EntrySpec {
                adopt: true,
                min_success_time: Duration::from_secs(30),
                progress_deadline: Some(Duration::from_secs(300)),
                customization: spec.customization.clone(),
                status_rules: spec.status_rules.clone(),
                status_group_by: vec!["region".to_string()],
            }
        );
    }

    #[test]
    fn a_patch_or_aggregate_this_build_cannot_read_names_its_field() {
        let mut body = spec().body();
        body.customization.overrides[1].patch = body::Patch::Json("{\"op\":1}".into());
        assert!(matches!(
            EntrySpec::read(&body),
            Err(PlacementError::Invalid { field, .. }) if field == "spec.customization.overrides[1].jsonPatch"
        ));
        let mut body = spec().body();
        body.status_rules[0].aggregate = "median".into();
        assert!(matches!(
            EntrySpec::read(&body),
            Err(PlacementError::Invalid { field, .. }) if field == "spec.statusRules[0].aggregate"
        ));
    }
}
