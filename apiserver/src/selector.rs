//! Label and field selectors, as the `labelSelector` and `fieldSelector`
//! query parameters carry them: parsing and matching, without IO.
//!
//! Labels use the mesh's one label-selector implementation,
//! [`relaymesh_topology::selector`] (kubectl's `-l` syntax, Kubernetes'
//! matching), so the API lists exactly the clusters a Placement with the
//! same selector picks. Fields: `metadata.name` and `metadata.namespace`
//! with `=`, `==` and `!=`, as kube-apiserver supports for every kind.

use std::collections::BTreeMap;

use serde_json::Value;

/// Why a selector cannot be parsed (a 400 for the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The label selector is malformed.
    #[error("unable to parse requirement: {0}")]
    Label(#[from] relaymesh_topology::selector::SelectorError),
    /// The field selector is malformed.
    #[error("invalid field selector {0:?}: a selector is field=value, field==value or field!=value, comma-separated")]
    Field(String),
    /// The field selector names a field the kind cannot be selected by.
    #[error("field label not supported: {0}")]
    FieldLabel(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(relaymesh_protocol::LabelSelector);

impl LabelSelector {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        Ok(Self(relaymesh_topology::selector::parse(text)?))
    }

    /// Whether an object with `labels` matches. A label whose value is not
    /// a string (invalid in Kubernetes) counts as absent.
    pub fn matches(&self, labels: &serde_json::Map<String, Value>) -> bool {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
            .collect();
        relaymesh_topology::selector::matches(&self.0, &labels)
    }

    /// Whether `object`'s `metadata.labels` match.
    pub fn matches_object(&self, object: &Value) -> bool {
        let empty = serde_json::Map::new();
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        self.matches(labels)
    }
}

/// A parsed field selector: `metadata.name`, `metadata.namespace` and the
/// per-kind field labels kube-apiserver selects by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<Requirement>,
}

/// One `field=value` or `field!=value` of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    field: String,
    /// Where the field's value is in an object.
    pointer: &'static str,
    equal: bool,
    value: String,
}

impl FieldSelector {
    /// Parses `text`, which may name `metadata.name` and
    /// `metadata.namespace` only.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        Self::parse_for(text, "", "")
    }

    /// Parses `text` for the resource `plural` of `group`, which may also
    /// name the fields kube-apiserver selects that resource by.
    pub fn parse_for(text: &str, group: &str, plural: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in text
            .split(',')
            .map(str::trim)
            .filter(|term| !term.is_empty())
        {
            let bad = || SelectorError::Field(term.to_string());
            let (field, equal, value) = if let Some((field, value)) = term.split_once("!=") {
                (field, false, value)
            } else if let Some((field, value)) = term.split_once("==") {
                (field, true, value)
            } else if let Some((field, value)) = term.split_once('=') {
                (field, true, value)
            } else {
                return Err(bad());
            };
            let field = field.trim();
            let pointer = match field {
                "metadata.name" => "/metadata/name",
                "metadata.namespace" => "/metadata/namespace",
                _ => field_labels(group, plural)
                    .iter()
                    .find(|(label, _)| *label == field)
                    .map(|(_, pointer)| *pointer)
                    .ok_or_else(|| SelectorError::FieldLabel(field.to_string()))?,
            };
            requirements.push(Requirement {
                field: field.to_string(),
                pointer,
                equal,
                value: value.trim().to_string(),
            });
        }
        Ok(Self { requirements })
    }

    /// Whether `object` matches. A field the object leaves out has its
    /// Go zero value, as kube-apiserver compares them: `""`, `false`, `0`.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = match object.pointer(requirement.pointer) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Bool(flag)) => flag.to_string(),
                Some(Value::Number(number)) => number.to_string(),
                _ => ZERO_VALUED
                    .iter()
                    .find(|(label, _)| *label == requirement.field)
                    .map(|(_, zero)| zero.to_string())
                    .unwrap_or_default(),
            };
            (actual == requirement.value) == requirement.equal
        })
    }
}

/// The fields besides `metadata.name` and `metadata.namespace` that
/// kube-apiserver selects each resource by (its registries' field label
/// conversions), as (field, where the value is).
fn field_labels(group: &str, plural: &str) -> &'static [(&'static str, &'static str)] {
    match (group, plural) {
        ("", "pods") => &[
            ("spec.nodeName", "/spec/nodeName"),
            ("spec.restartPolicy", "/spec/restartPolicy"),
            ("spec.schedulerName", "/spec/schedulerName"),
            ("spec.serviceAccountName", "/spec/serviceAccountName"),
            ("spec.hostNetwork", "/spec/hostNetwork"),
            ("status.phase", "/status/phase"),
            ("status.podIP", "/status/podIP"),
            ("status.nominatedNodeName", "/status/nominatedNodeName"),
        ],
        ("", "nodes") => &[("spec.unschedulable", "/spec/unschedulable")],
        ("", "namespaces") => &[("status.phase", "/status/phase")],
        ("", "secrets") => &[("type", "/type")],
        ("", "services") => &[
            ("spec.clusterIP", "/spec/clusterIP"),
            ("spec.type", "/spec/type"),
        ],
        ("", "replicationcontrollers") | ("apps", "replicasets") => {
            &[("status.replicas", "/status/replicas")]
        }
        ("batch", "jobs") => &[("status.successful", "/status/succeeded")],
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &[("spec.signerName", "/spec/signerName")]
        }
        ("", "events") => &[
            ("involvedObject.kind", "/involvedObject/kind"),
            ("involvedObject.namespace", "/involvedObject/namespace"),
            ("involvedObject.name", "/involvedObject/name"),
            ("involvedObject.uid", "/involvedObject/uid"),
            ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
            (
                "involvedObject.resourceVersion",
                "/involvedObject/resourceVersion",
            ),
            ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
            ("reason", "/reason"),
            ("reportingComponent", "/reportingComponent"),
            ("source", "/source/component"),
            ("type", "/type"),
        ],
        _ => &[],
    }
}

/// Field labels of non-string fields, with the zero value an absent one
/// compares as.
const ZERO_VALUED: &[(&str, &str)] = &[
    ("spec.hostNetwork", "false"),
    ("spec.unschedulable", "false"),
    ("status.replicas", "0"),
    ("status.successful", "0"),
];

pub use relaymesh_topology::selector::json::{from_json, optional_string, strings, InvalidField};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "shop", "labels": labels}})
    }

    #[test]
    fn equality_and_sets() {
        let web = object(json!({"app": "web", "tier": "front"}));
        let db = object(json!({"app": "db"}));
        let cases = [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("app in (web, db)", true, true),
            ("app notin (web)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (web,db),!tier", false, true),
            ("tier notin (back),app=web", true, false),
        ];
        for (text, on_web, on_db) in cases {
            let selector = LabelSelector::parse(text).expect(text);
            assert_eq!(selector.matches_object(&web), on_web, "{text} on web");
            assert_eq!(selector.matches_object(&db), on_db, "{text} on db");
        }
    }

    /// `k in ()` is `k in ("")`, as in Kubernetes and in Placements' cluster
    /// selectors: it matches an empty value, not nothing.
    #[test]
    fn the_api_and_placements_agree_on_empty_sets() {
        let empty = object(json!({"app": ""}));
        let web = object(json!({"app": "web"}));
        let selector = LabelSelector::parse("app in ()").expect("parses");
        assert!(selector.matches_object(&empty));
        assert!(!selector.matches_object(&web));
        let selector = LabelSelector::parse("app notin ()").expect("parses");
        assert!(!selector.matches_object(&empty));
        assert!(selector.matches_object(&web));
    }

    #[test]
    fn malformed_label_selectors() {
        for text in ["app in web", "app=(x)", "a b c", "=x", "app in (a", "!"] {
            assert!(LabelSelector::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn field_selectors() {
        let a = object(json!({}));
        let matches = |text: &str| FieldSelector::parse(text).expect(text).matches_object(&a);
        assert!(matches("metadata.name=a"));
        assert!(matches("metadata.name==a,metadata.namespace=shop"));
        assert!(!matches("metadata.name!=a"));
        assert!(!matches("metadata.namespace=other"));
        assert!(FieldSelector::parse("spec.x=1").is_err());
        assert!(FieldSelector::parse("spec.nodeName=n1").is_err());
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let on = |text: &str| {
            FieldSelector::parse_for(text, "", "pods")
                .expect(text)
                .matches_object(&pod)
        };
        assert!(on("spec.nodeName=n1,status.phase==Running"));
        assert!(on("spec.hostNetwork=false"));
        assert!(!on("status.phase!=Running"));
        assert_eq!(
            FieldSelector::parse_for("spec.replicas=1", "apps", "deployments")
                .expect_err("not a field label")
                .to_string(),
            "field label not supported: spec.replicas"
        );
        let job = json!({"metadata": {"name": "j"}, "status": {"succeeded": 2}});
        let jobs = |text: &str| {
            FieldSelector::parse_for(text, "batch", "jobs")
                .expect(text)
                .matches_object(&job)
        };
        assert!(jobs("status.successful=2"));
        assert!(!jobs("status.successful=0"));
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
