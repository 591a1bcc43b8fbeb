//! Reading a Placement object's spec and matching root objects against its
//! workload terms.

use std::collections::BTreeMap;

use crate::customization::{Customization, ObjectFilter, Override, Patch};
use crate::rules::StatusRule;
use relaymesh_protocol::status::MAX_GROUP_LABELS;
use relaymesh_protocol::{LabelSelector, PlacementTarget};
use serde_json::Value;

use super::error::invalid;
use super::error::PlacementError;

/// The group of relaymesh's own kinds, which never travel.
pub const RELAYMESH_GROUP: &str = "relaymesh.dev";

/// One term of `spec.workloads`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadTerm {
    /// Namespaces the objects must be in (empty: the Placement's own and
    /// cluster-scoped objects).
    pub namespaces: Vec<String>,
    /// The objects' API group (`""` is the core group).
    pub api_group: Option<String>,
    /// The objects' kind.
    pub kind: Option<String>,
    /// The objects' names.
    pub names: Vec<String>,
    /// A label selector on the objects.
    pub label_selector: Option<LabelSelector>,
}

/// A Placement, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementSpec {
    /// The Placement's namespace.
    pub namespace: String,
    /// The Placement's name.
    pub name: String,
    /// Which root objects travel.
    pub workloads: Vec<WorkloadTerm>,
    /// Where they go.
    pub target: PlacementTarget,
    /// `spec.adopt`: whether edge agents may take over objects that exist
    /// on their cluster without relaymesh's marks (default false). The
    /// agents read it from the slice entry's body; each still applies its
    /// own policy first.
    pub adopt: bool,
    /// `spec.statusRules`, checked and their CEL expressions compiled
    /// (`crate::rules::parse`); empty when absent. They
    /// travel down the tree in the slice entry's body, with the rest of
    /// the spec.
    pub status_rules: Vec<StatusRule>,
    /// `spec.statusGroupBy`: cluster labels whose values the placement's
    /// phase counts are also summed by (`relayctl status --by LABEL`), at
    /// most [`MAX_GROUP_LABELS`].
    pub status_group_by: Vec<String>,
    /// `spec.customization`: templates and overrides each agent applies to
    /// its copy (see [`crate::customization`]).
    pub customization: Customization,
    /// `spec.rollout`: how new revisions reach the clusters (see
    /// [`super::rollout`]).
    pub rollout: crate::rollout::RolloutSpec,
}

impl PlacementSpec {
    /// Reads a Placement object.
    pub fn from_object(object: &Value) -> Result<Self, PlacementError> {
        let metadata = object.get("metadata");
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
        let name = text(metadata.and_then(|m| m.get("name")))
            .ok_or_else(|| invalid("metadata.name", "Required value"))?;
        let namespace = text(metadata.and_then(|m| m.get("namespace")))
            .ok_or_else(|| invalid("metadata.namespace", "Required value"))?;
        let spec = object
            .get("spec")
            .ok_or_else(|| invalid("spec", "Required value"))?;
        let workloads = match spec.get("workloads") {
            Some(Value::Array(terms)) if !terms.is_empty() => terms
                .iter()
                .enumerate()
                .map(|(index, term)| workload_term(term, &format!("spec.workloads[{index}]")))
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(invalid(
                    "spec.workloads",
                    "Required value: at least one term",
                ))
            }
        };
        let target = target(spec)?;
        let adopt = match spec.get("adopt") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(adopt)) => *adopt,
            Some(_) => return Err(invalid("spec.adopt", "must be a boolean")),
        };
        let status_rules = crate::rules::parse(spec.get("statusRules"))?;
        let status_group_by = group_labels(spec.get("statusGroupBy"))?;
        let customization = customization(spec.get("customization"))?;
        let rollout = super::rollout::rollout(spec.get("rollout"))?;
        Ok(Self {
            namespace,
            name,
            workloads,
            target,
            adopt,
            status_rules,
            status_group_by,
            customization,
            rollout,
        })
    }

    /// Whether any term selects `object`.
    pub fn selects_object(&self, object: &Value) -> bool {
        self.workloads
            .iter()
            .any(|term| selects(term, object, &self.namespace))
    }
}

/// Whether `term` of a Placement in `placement_namespace` selects `object`.
pub fn selects(term: &WorkloadTerm, object: &Value, placement_namespace: &str) -> bool {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    if group == RELAYMESH_GROUP {
        return false;
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let metadata = object.get("metadata");
    let field = |name: &str| metadata.and_then(|m| m.get(name)).and_then(Value::as_str);
    let namespace = field("namespace");
    let name = field("name").unwrap_or_default();
    let namespace_ok = if term.namespaces.is_empty() {
        namespace.is_none_or(|namespace| namespace == placement_namespace)
    } else {
        namespace.is_some_and(|namespace| term.namespaces.iter().any(|n| n == namespace))
    };
    let labels: BTreeMap<String, String> = metadata
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    namespace_ok
        && term
            .api_group
            .as_deref()
            .is_none_or(|wanted| wanted == group)
        && term.kind.as_deref().is_none_or(|wanted| wanted == kind)
        && (term.names.is_empty() || term.names.iter().any(|n| n == name))
        && term
            .label_selector
            .as_ref()
            .is_none_or(|selector| crate::selector::matches(selector, &labels))
}

fn workload_term(term: &Value, path: &str) -> Result<WorkloadTerm, PlacementError> {
    if !term.is_object() {
        return Err(invalid(path, "must be an object"));
    }
    Ok(WorkloadTerm {
        namespaces: strings(term.get("namespaces"), &format!("{path}.namespaces"))?,
        api_group: optional_string(term.get("apiGroup"), &format!("{path}.apiGroup"))?,
        kind: optional_string(term.get("kind"), &format!("{path}.kind"))?,
        names: strings(term.get("names"), &format!("{path}.names"))?,
        label_selector: term
            .get("labelSelector")
            .map(|selector| label_selector(selector, &format!("{path}.labelSelector")))
            .transpose()?,
    })
}

fn target(spec: &Value) -> Result<PlacementTarget, PlacementError> {
    let clusters = spec
        .get("clusters")
        .ok_or_else(|| invalid("spec.clusters", "Required value"))?;
    let selector = clusters
        .get("labelSelector")
        .map(|selector| label_selector(selector, "spec.clusters.labelSelector"))
        .transpose()?;
    let names = strings(clusters.get("names"), "spec.clusters.names")?;
    if selector.is_none() && names.is_empty() {
        return Err(invalid(
            "spec.clusters",
            "Required value: a labelSelector or names",
        ));
    }
    let max_clusters = match spec.get("maxClusters") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid("spec.maxClusters", "must be a non-negative integer"))?,
        ),
    };
    let spread_by = optional_string(spec.get("spreadBy"), "spec.spreadBy")?;
    if spread_by.is_some() && max_clusters.is_none() {
        return Err(invalid("spec.spreadBy", "requires spec.maxClusters"));
    }
    Ok(PlacementTarget {
        selector,
        names,
        max_clusters,
        spread_by,
        quota: None,
        wave: None,
    })
}

/// The selector a `metav1.LabelSelector` object at `path` describes.
pub fn label_selector(value: &Value, path: &str) -> Result<LabelSelector, PlacementError> {
    Ok(crate::selector::json::from_json(value, path)?)
}

/// The most overrides one placement may carry.
pub const MAX_OVERRIDES: usize = 64;

/// `spec.customization` (absent: templates on, no overrides):
///
/// ```yaml
/// customization:
///   templates: true            # expand {{ cluster.name }}, {{ cluster.labels.KEY }}
///   overrides:                 # in order, after the templates
///   - clusterSelector: {matchLabels: {tier: large}}   # optional: all clusters
///     objects: {apiGroup: apps, kind: Deployment, names: [web]}  # optional: all
///     mergePatch: {spec: {replicas: 5}}               # or jsonPatch: [...]
/// ```
pub fn customization(value: Option<&Value>) -> Result<Customization, PlacementError> {
    const FIELD: &str = "spec.customization";
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(Customization::default());
    };
    let Some(fields) = value.as_object() else {
        return Err(invalid(FIELD, "must be an object"));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !matches!(key.as_str(), "templates" | "overrides"))
    {
        return Err(invalid(
            format!("{FIELD}.{unknown}"),
            "unknown field: customization has templates and overrides",
        ));
    }
    let templates = match fields.get("templates") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(templates)) => *templates,
        Some(_) => return Err(invalid(format!("{FIELD}.templates"), "must be a boolean")),
    };
    let items = match fields.get("overrides") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(invalid(format!("{FIELD}.overrides"), "must be a list")),
    };
    if items.len() > MAX_OVERRIDES {
        return Err(invalid(
            format!("{FIELD}.overrides"),
            format!(
                "Too many: {}: must have at most {MAX_OVERRIDES} items",
                items.len()
            ),
        ));
    }
    let overrides = items
        .iter()
        .enumerate()
        .map(|(index, item)| override_rule(item, &format!("{FIELD}.overrides[{index}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Customization {
        templates,
        overrides,
    })
}

fn override_rule(item: &Value, path: &str) -> Result<Override, PlacementError> {
    let Some(fields) = item.as_object() else {
        return Err(invalid(path, "must be an object"));
    };
    if let Some(unknown) = fields.keys().find(|key| {
        !matches!(
            key.as_str(),
            "clusterSelector" | "objects" | "mergePatch" | "jsonPatch"
        )
    }) {
        return Err(invalid(
            format!("{path}.{unknown}"),
            "unknown field: an override has clusterSelector, objects, and mergePatch or jsonPatch",
        ));
    }
    let clusters = fields
        .get("clusterSelector")
        .filter(|selector| !selector.is_null())
        .map(|selector| label_selector(selector, &format!("{path}.clusterSelector")))
        .transpose()?;
    let objects = match fields.get("objects").filter(|objects| !objects.is_null()) {
        None => ObjectFilter::default(),
        Some(objects) => {
            let objects_path = format!("{path}.objects");
            if !objects.is_object() {
                return Err(invalid(objects_path, "must be an object"));
            }
            ObjectFilter {
                api_group: optional_string(
                    objects.get("apiGroup"),
                    &format!("{objects_path}.apiGroup"),
                )?,
                kind: optional_string(objects.get("kind"), &format!("{objects_path}.kind"))?,
                names: strings(objects.get("names"), &format!("{objects_path}.names"))?,
            }
        }
    };
    let patch = match (fields.get("mergePatch"), fields.get("jsonPatch")) {
        (Some(merge), None) if merge.is_object() => Patch::Merge(merge.clone()),
        (Some(_), None) => {
            return Err(invalid(
                format!("{path}.mergePatch"),
                "must be an object (RFC 7386)",
            ))
        }
        (None, Some(operations)) => {
            let patch = serde_json::from_value(operations.clone()).map_err(|error| {
                invalid(
                    format!("{path}.jsonPatch"),
                    format!("Invalid value: not a JSON patch (RFC 6902): {error}"),
                )
            })?;
            Patch::Json(patch)
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                path,
                "Invalid value: mergePatch and jsonPatch are exclusive",
            ))
        }
        (None, None) => return Err(invalid(path, "Required value: mergePatch or jsonPatch")),
    };
    Ok(Override {
        clusters,
        objects,
        patch,
    })
}

/// `spec.statusGroupBy`: distinct label keys, at most [`MAX_GROUP_LABELS`].
fn group_labels(value: Option<&Value>) -> Result<Vec<String>, PlacementError> {
    const FIELD: &str = "spec.statusGroupBy";
    let labels = strings(value, FIELD)?;
    if labels.len() > MAX_GROUP_LABELS {
        return Err(invalid(
            FIELD,
            format!(
                "Too many: {}: must have at most {MAX_GROUP_LABELS} items",
                labels.len()
            ),
        ));
    }
    for (index, label) in labels.iter().enumerate() {
        // A label key: an optional DNS prefix (253) and a slash, then a
        // name of at most 63 characters.
        let name = label
            .rsplit_once('/')
            .map_or(label.as_str(), |(_, name)| name);
        if name.is_empty() || name.len() > 63 || label.len() > 253 + 1 + 63 {
            return Err(invalid(
                format!("{FIELD}[{index}]"),
                format!("Invalid value: {label:?}: not a label key"),
            ));
        }
        if labels[..index].contains(label) {
            return Err(invalid(
                format!("{FIELD}[{index}]"),
                format!("Duplicate value: {label:?}"),
            ));
        }
    }
    Ok(labels)
}

fn strings(value: Option<&Value>, path: &str) -> Result<Vec<String>, PlacementError> {
    Ok(crate::selector::json::strings(value, path)?)
}

fn optional_string(value: Option<&Value>, path: &str) -> Result<Option<String>, PlacementError> {
    Ok(crate::selector::json::optional_string(value, path)?)
}
