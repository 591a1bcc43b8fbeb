//! Label and field selectors, as the `labelSelector` and `fieldSelector`
//! query parameters carry them: parsing and matching, without IO.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
//! comma-separated and AND-ed. Fields: `metadata.name` and
//! `metadata.namespace` with `=`, `==` and `!=`, as kube-apiserver supports
//! for every kind.

use serde_json::Value;

/// Why a selector cannot be parsed (a 400 for the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The label selector is malformed.
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// The field selector is malformed or names an unsupported field.
    #[error("field selector {0:?}: only metadata.name and metadata.namespace with =, == or != are supported")]
    Field(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl LabelSelector {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(Self { requirements })
    }

    /// Whether an object with `labels` matches.
    pub fn matches(&self, labels: &serde_json::Map<String, Value>) -> bool {
        let value = |key: &str| labels.get(key).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(key, expected) => value(key) == Some(expected.as_str()),
                Requirement::NotEquals(key, expected) => value(key) != Some(expected.as_str()),
                Requirement::In(key, values) => {
                    value(key).is_some_and(|v| values.iter().any(|x| x == v))
                }
                Requirement::NotIn(key, values) => {
                    !value(key).is_some_and(|v| values.iter().any(|x| x == v))
                }
                Requirement::Exists(key) => labels.contains_key(key),
                Requirement::DoesNotExist(key) => !labels.contains_key(key),
            })
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

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (index, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_requirement(term: &str) -> Result<Requirement, SelectorError> {
    let bad = || SelectorError::Label(term.to_string());
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(
            label_key(key.trim()).ok_or_else(bad)?,
        ));
    }
    for (operator, make) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = term.split_once(operator) {
            let key = label_key(key.trim()).ok_or_else(bad)?;
            let value = value.trim();
            if !is_label_value(value) {
                return Err(bad());
            }
            return Ok(make(key, value.to_string()));
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let key = label_key(key).ok_or_else(bad)?;
        let rest = rest.trim();
        let (negated, list) = if let Some(list) = rest.strip_prefix("notin") {
            (true, list)
        } else if let Some(list) = rest.strip_prefix("in") {
            (false, list)
        } else {
            return Err(bad());
        };
        let inner = list
            .trim()
            .strip_prefix('(')
            .and_then(|list| list.strip_suffix(')'))
            .ok_or_else(bad)?;
        let values: Vec<String> = inner
            .split(',')
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
            .collect();
        if values.iter().any(|value| !is_label_value(value)) {
            return Err(bad());
        }
        return Ok(if negated {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(label_key(term).ok_or_else(bad)?))
}

/// `key` if it is a plausible label key (`[prefix/]name`).
fn label_key(key: &str) -> Option<String> {
    let valid = !key.is_empty()
        && key.len() <= 316
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    valid.then(|| key.to_string())
}

fn is_label_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
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
