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
    /// The field selector is malformed or names an unsupported field.
    #[error("field selector {0:?}: only metadata.name and metadata.namespace with =, == or != are supported")]
    Field(String),
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

/// A parsed field selector on `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
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
            if !matches!(field, "metadata.name" | "metadata.namespace") {
                return Err(bad());
            }
            requirements.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self { requirements })
    }

    /// Whether `object` matches.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.requirements.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

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
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
