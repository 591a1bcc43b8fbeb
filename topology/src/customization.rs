//! Per-cluster customization, expanded at the leaf: every destination gets
//! the same content-addressed bundle, and each edge agent turns it into its
//! own cluster's objects.
//!
//! Two mechanisms, applied in this order to every object of a placement:
//!
//! - **Templates** in any string value: `{{ cluster.name }}` and
//!   `{{ cluster.labels.KEY }}` are replaced with the destination cluster's
//!   name and label values. A label the cluster does not carry is an error
//!   (that cluster's failure), never an empty string. Other `{{ … }}` text
//!   (Helm, Prometheus or Go templates an object carries) is left as it is.
//! - **Overrides**, in order: each has an optional cluster selector, an
//!   optional filter of objects (API group, kind, names) and a patch, a JSON
//!   patch (RFC 6902) or a merge patch (RFC 7386), applied to the objects it
//!   selects on the clusters it selects (Karmada's OverridePolicy, Fleet's
//!   targetCustomizations).
//!
//! Parsing a Placement's `spec.customization` from its JSON lives with the
//! rest of the spec (the relay crate's `placement::spec`); this module holds
//! what both the root (to check) and agents (to expand) run.

use std::collections::BTreeMap;

use relaymesh_protocol::LabelSelector;
use serde_json::Value;

use crate::selector;

/// What a placement asks each cluster to change in its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customization {
    /// Whether `{{ cluster.… }}` templates are expanded (`templates: false`
    /// leaves every string as it is).
    pub templates: bool,
    /// Applied in order, after the templates.
    pub overrides: Vec<Override>,
}

impl Default for Customization {
    fn default() -> Self {
        Self {
            templates: true,
            overrides: Vec::new(),
        }
    }
}

/// One override: which clusters, which objects, what patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The clusters it applies to; `None` for all.
    pub clusters: Option<LabelSelector>,
    /// The objects it applies to.
    pub objects: ObjectFilter,
    /// The change.
    pub patch: Patch,
}

/// Which objects an override patches: every field that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectFilter {
    /// The API group (`""` for the core group).
    pub api_group: Option<String>,
    /// The kind.
    pub kind: Option<String>,
    /// The names (any of them).
    pub names: Vec<String>,
}

/// A patch of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch {
    /// RFC 6902 operations.
    Json(json_patch::Patch),
    /// An RFC 7386 merge patch.
    Merge(Value),
}

/// The destination cluster, as an agent knows itself.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// Its name in the tree.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
    /// Its annotations (set at the root with `relayctl annotate cluster`).
    pub annotations: &'a BTreeMap<String, String>,
}

/// Why an object could not be customized for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CustomizationError {
    /// A template names a label the cluster does not carry.
    #[error("cluster {cluster:?} has no label {label:?}, which the template at {at} needs")]
    MissingLabel {
        /// The cluster.
        cluster: String,
        /// The label key.
        label: String,
        /// Where in the object (a JSON pointer).
        at: String,
    },
    /// A template names an annotation the cluster does not carry.
    #[error(
        "cluster {cluster:?} has no annotation {annotation:?}, which the template at {at} needs"
    )]
    MissingAnnotation {
        /// The cluster.
        cluster: String,
        /// The annotation key.
        annotation: String,
        /// Where in the object (a JSON pointer).
        at: String,
    },
    /// A template refers to something of the cluster that does not exist.
    #[error("unknown template {template:?} at {at}: use {{{{ cluster.name }}}}, {{{{ cluster.labels.KEY }}}} or {{{{ cluster.annotations.KEY }}}}")]
    UnknownReference {
        /// The template's text.
        template: String,
        /// Where in the object (a JSON pointer).
        at: String,
    },
    /// A template is not closed.
    #[error("template at {at} is not closed with }}}}")]
    Unclosed {
        /// Where in the object (a JSON pointer).
        at: String,
    },
    /// An override's JSON patch does not apply to the object.
    #[error("override {index} does not apply: {reason}")]
    Patch {
        /// The override's position in `spec.customization.overrides`.
        index: usize,
        /// Why, from the patch.
        reason: String,
    },
}

impl Customization {
    /// Whether this changes nothing.
    pub fn is_noop(&self) -> bool {
        !self.templates && self.overrides.is_empty()
    }

    /// Turns `object` into `cluster`'s copy: templates, then every override
    /// that selects the cluster and the object, in order.
    pub fn apply(
        &self,
        object: &mut Value,
        cluster: Cluster<'_>,
    ) -> Result<(), CustomizationError> {
        if self.templates {
            expand(object, cluster)?;
        }
        for (index, rule) in self.overrides.iter().enumerate() {
            let for_cluster = rule
                .clusters
                .as_ref()
                .is_none_or(|wanted| selector::matches(wanted, cluster.labels));
            if !for_cluster || !rule.objects.selects(object) {
                continue;
            }
            match &rule.patch {
                Patch::Json(patch) => {
                    json_patch::patch(object, patch).map_err(|error| CustomizationError::Patch {
                        index,
                        reason: error.to_string(),
                    })?
                }
                Patch::Merge(patch) => json_patch::merge(object, patch),
            }
        }
        Ok(())
    }
}

impl ObjectFilter {
    /// Whether `object` is one this filter names.
    pub fn selects(&self, object: &Value) -> bool {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let kind = object.get("kind").and_then(Value::as_str);
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        self.api_group
            .as_deref()
            .is_none_or(|wanted| wanted == group)
            && self
                .kind
                .as_deref()
                .is_none_or(|wanted| Some(wanted) == kind)
            && (self.names.is_empty()
                || self
                    .names
                    .iter()
                    .any(|wanted| Some(wanted.as_str()) == name))
    }
}

/// Replaces every `{{ cluster.… }}` template in the string values of
/// `value` (at any depth) with what it names of `cluster`.
pub fn expand(value: &mut Value, cluster: Cluster<'_>) -> Result<(), CustomizationError> {
    expand_at(value, cluster, &mut String::new())
}

fn expand_at(
    value: &mut Value,
    cluster: Cluster<'_>,
    at: &mut String,
) -> Result<(), CustomizationError> {
    match value {
        Value::String(text) => {
            if let Some(expanded) = expand_text(text, Some(cluster), at)? {
                *text = expanded;
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                let length = at.len();
                at.push_str(&format!("/{index}"));
                expand_at(item, cluster, at)?;
                at.truncate(length);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields.iter_mut() {
                let length = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                expand_at(item, cluster, at)?;
                at.truncate(length);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks every `{{ cluster.… }}` template in `value` without a cluster:
/// what the root can tell at submission (a misspelt reference, an unclosed
/// template), not which clusters lack a label.
pub fn check(value: &Value) -> Result<(), CustomizationError> {
    fn walk(value: &Value, at: &mut String) -> Result<(), CustomizationError> {
        match value {
            Value::String(text) => expand_text(text, None, at).map(|_| ()),
            Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
                let length = at.len();
                at.push_str(&format!("/{index}"));
                let result = walk(item, at);
                at.truncate(length);
                result
            }),
            Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
                let length = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let result = walk(item, at);
                at.truncate(length);
                result
            }),
            _ => Ok(()),
        }
    }
    walk(value, &mut String::new())
}

/// `text` with its `{{ cluster.… }}` templates replaced (`None` if it has
/// none); with no `cluster`, only checks them.
fn expand_text(
    text: &str,
    cluster: Option<Cluster<'_>>,
    at: &str,
) -> Result<Option<String>, CustomizationError> {
    if !text.contains("{{") {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(start) = rest.find("{{") {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let inner_start = &from[2..];
        let Some(end) = inner_start.find("}}") else {
            if inner_start.trim_start().starts_with("cluster.") {
                return Err(CustomizationError::Unclosed { at: at.to_string() });
            }
            out.push_str(from);
            rest = "";
            break;
        };
        let inner = inner_start[..end].trim();
        let after = &inner_start[end + 2..];
        match reference(inner) {
            None => out.push_str(&from[..end + 4]),
            Some(Reference::Name) => {
                changed = true;
                out.push_str(cluster.map_or("", |cluster| cluster.name));
            }
            Some(Reference::Label(key)) => {
                changed = true;
                if let Some(cluster) = cluster {
                    let value = cluster.labels.get(key).ok_or_else(|| {
                        CustomizationError::MissingLabel {
                            cluster: cluster.name.to_string(),
                            label: key.to_string(),
                            at: at.to_string(),
                        }
                    })?;
                    out.push_str(value);
                }
            }
            Some(Reference::Annotation(key)) => {
                changed = true;
                if let Some(cluster) = cluster {
                    let value = cluster.annotations.get(key).ok_or_else(|| {
                        CustomizationError::MissingAnnotation {
                            cluster: cluster.name.to_string(),
                            annotation: key.to_string(),
                            at: at.to_string(),
                        }
                    })?;
                    out.push_str(value);
                }
            }
            Some(Reference::Unknown) => {
                return Err(CustomizationError::UnknownReference {
                    template: format!("{{{{ {inner} }}}}"),
                    at: at.to_string(),
                })
            }
        }
        rest = after;
    }
    out.push_str(rest);
    Ok(changed.then_some(out))
}

enum Reference<'a> {
    Name,
    Label(&'a str),
    Annotation(&'a str),
    Unknown,
}

/// What the inside of a `{{ … }}` names; `None` when it is not about the
/// cluster (someone else's template, left alone).
fn reference(inner: &str) -> Option<Reference<'_>> {
    let path = inner.strip_prefix("cluster.")?;
    let key = |prefix: &str| {
        path.strip_prefix(prefix)
            .filter(|key| !key.is_empty() && !key.contains(char::is_whitespace))
    };
    Some(if path == "name" {
        Reference::Name
    } else if let Some(key) = key("labels.") {
        Reference::Label(key)
    } else if let Some(key) = key("annotations.") {
        Reference::Annotation(key)
    } else {
        Reference::Unknown
    })
}

#[cfg(test)]
mod tests;
