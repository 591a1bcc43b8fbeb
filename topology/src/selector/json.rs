//! Kubernetes `metav1.LabelSelector` objects as JSON: read and checked, with
//! the field at fault named as the API's `422 Invalid` names it. The one
//! reader of selectors in JSON: the API's scale subresource and a
//! Placement's spec both use it.

use relaymesh_protocol::{LabelRequirement, SelectorOperator};
use serde_json::Value;

/// A field of a JSON object that does not hold what it must (an API
/// `422 Invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidField {
    /// The field's JSON path, as `spec.selector.matchLabels`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> InvalidField {
    InvalidField {
        field: field.into(),
        message: message.into(),
    }
}

/// Reads a Kubernetes `LabelSelector` object.
pub fn from_json(
    value: &Value,
    path: &str,
) -> Result<relaymesh_protocol::LabelSelector, InvalidField> {
    let mut selector = relaymesh_protocol::LabelSelector::default();
    if let Some(labels) = value.get("matchLabels") {
        let labels = labels
            .as_object()
            .ok_or_else(|| invalid(format!("{path}.matchLabels"), "must be an object"))?;
        for (key, value) in labels {
            let value = value
                .as_str()
                .ok_or_else(|| invalid(format!("{path}.matchLabels.{key}"), "must be a string"))?;
            selector.match_labels.insert(key.clone(), value.to_string());
        }
    }
    if let Some(expressions) = value.get("matchExpressions") {
        let expressions = expressions
            .as_array()
            .ok_or_else(|| invalid(format!("{path}.matchExpressions"), "must be a list"))?;
        for (index, expression) in expressions.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{index}]");
            let key = optional_string(expression.get("key"), &format!("{at}.key"))?
                .ok_or_else(|| invalid(format!("{at}.key"), "Required value"))?;
            let operator = match expression.get("operator").and_then(Value::as_str) {
                Some("In") => SelectorOperator::In,
                Some("NotIn") => SelectorOperator::NotIn,
                Some("Exists") => SelectorOperator::Exists,
                Some("DoesNotExist") => SelectorOperator::DoesNotExist,
                _ => {
                    return Err(invalid(
                        format!("{at}.operator"),
                        "must be one of In, NotIn, Exists, DoesNotExist",
                    ))
                }
            };
            let values = strings(expression.get("values"), &format!("{at}.values"))?;
            selector.match_expressions.push(LabelRequirement {
                key,
                operator,
                values,
            });
        }
    }
    Ok(selector)
}

/// A list of strings at `path` (absent or null: empty).
pub fn strings(value: Option<&Value>, path: &str) -> Result<Vec<String>, InvalidField> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(path, "must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(invalid(path, "must be a list of strings")),
    }
}

/// A string at `path`, if present and not null.
pub fn optional_string(value: Option<&Value>, path: &str) -> Result<Option<String>, InvalidField> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid(path, "must be a string")),
    }
}
