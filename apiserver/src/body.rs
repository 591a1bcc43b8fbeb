//! Decoding JSON and YAML request bodies under the API's limits, in time
//! linear in their size.
//!
//! * JSON: the raw bytes are scanned for depth ([`depth::check_json`])
//!   before serde_json parses them. A JSON body is never retried as YAML.
//! * YAML (only for YAML content types): serde-saphyr reads the body first,
//!   into nothing, under a budget (depth, flow nesting, no aliases, a node
//!   count); only a body within it is handed to serde_yaml, which builds the
//!   value. serde_yaml (libyaml) alone costs the square of the flow nesting
//!   and expands aliases; the budget bounds both. The value is then checked
//!   exactly ([`depth::check_value`]). docs/dependencies.md says why two
//!   crates.
//!
//! The time a body costs is then O(size × depth limit): 3 MiB × 64.

use serde_json::Value;

use crate::depth::{self, TooDeep};
use crate::http::MAX_JSON_BODY;

/// Why a body cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// It nests deeper than [`depth::MAX_DEPTH`] (422, naming the path).
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// It is not well-formed JSON or YAML, or YAML outside the budget in
    /// another way than depth, as aliases (400).
    #[error("{0}")]
    Malformed(String),
}

/// Whether a `Content-Type` names YAML (`application/yaml`,
/// `application/apply-patch+yaml`); every other body is read as JSON.
pub fn is_yaml(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    media_type.ends_with("/yaml") || media_type.ends_with("+yaml")
}

/// A JSON body as a value.
pub fn json(bytes: &[u8]) -> Result<Value, BodyError> {
    depth::check_json(bytes)?;
    serde_json::from_slice(bytes).map_err(|error| BodyError::Malformed(error.to_string()))
}

/// A YAML body (JSON is YAML too) as a value.
pub fn yaml(bytes: &[u8]) -> Result<Value, BodyError> {
    // What kubectl sends as apply-patch+yaml is JSON: read it as JSON when
    // it is, which names the path of a too-deep body.
    if looks_like_json(bytes) {
        depth::check_json(bytes)?;
        if let Ok(value) = serde_json::from_slice(bytes) {
            return Ok(value);
        }
    }
    // The exact check, which counts managedFields from their own root,
    // follows on the value; this bound only keeps the parse linear.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = depth::MAX_DEPTH + 4;
    budget.flow_nesting_limit = depth::MAX_DEPTH + 4;
    budget.max_aliases = 0;
    budget.max_nodes = MAX_JSON_BODY as usize;
    budget.max_events = 4 * MAX_JSON_BODY as usize;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    if let Err(error) =
        serde_saphyr::from_slice_with_options::<serde::de::IgnoredAny>(bytes, options)
    {
        return Err(yaml_error(&error));
    }
    let value: Value =
        serde_yaml::from_slice(bytes).map_err(|error| BodyError::Malformed(error.to_string()))?;
    depth::check_value(&value)?;
    Ok(value)
}

/// Whether the first character that is not white space opens a JSON map.
fn looks_like_json(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|byte| !byte.is_ascii_whitespace())
        .is_some_and(|byte| *byte == b'{')
}

/// A serde-saphyr refusal: too deep (by depth or flow nesting) is 422, at
/// the line and column where it was hit; the rest is malformed.
fn yaml_error(error: &serde_saphyr::Error) -> BodyError {
    let place = error
        .location()
        .map(|location| format!("line {} column {}", location.line(), location.column()))
        .unwrap_or_else(|| "the body".to_string());
    let text = error.to_string();
    // The error may come wrapped (with a snippet of the input): its text
    // tells the breach.
    let too_deep = text.contains("budget breached: Depth")
        || text.contains("recursion limit")
        || text.contains("nesting");
    if too_deep {
        return BodyError::TooDeep(TooDeep {
            path: format!("<{place}>"),
        });
    }
    let first = text.lines().next().unwrap_or_default();
    BodyError::Malformed(format!("cannot decode the YAML body: {first}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_content_types() {
        assert!(is_yaml("application/yaml"));
        assert!(is_yaml("application/apply-patch+yaml; charset=utf-8"));
        assert!(!is_yaml("application/json"));
        assert!(!is_yaml("application/merge-patch+json"));
        assert!(!is_yaml(""));
    }

    #[test]
    fn a_json_body_is_never_read_as_yaml() {
        assert!(matches!(json(b"a: b"), Err(BodyError::Malformed(_))));
        let deep = "[".repeat(100_000);
        assert!(matches!(json(deep.as_bytes()), Err(BodyError::TooDeep(_))));
    }

    #[test]
    fn deep_yaml_is_refused_where_it_was_hit() {
        let flow = format!("a: {}", "[".repeat(100_000));
        let Err(BodyError::TooDeep(error)) = yaml(flow.as_bytes()) else {
            panic!("deep flow YAML accepted");
        };
        assert!(error.path.starts_with("<line 1"), "{}", error.path);
        let block = "- ".repeat(100_000);
        let refused = yaml(block.as_bytes());
        assert!(matches!(refused, Err(BodyError::TooDeep(_))), "{refused:?}");
        let json_like = format!("{{\"x\":{}", "{\"a\":".repeat(100));
        let Err(BodyError::TooDeep(error)) = yaml(json_like.as_bytes()) else {
            panic!("deep JSON accepted as YAML");
        };
        assert!(error.path.starts_with(".x.a.a"), "{}", error.path);
    }

    #[test]
    fn yaml_within_the_limits_reads_as_before() {
        let value =
            yaml(b"apiVersion: v1\nkind: ConfigMap\ndata: {a: b, n: '1'}\nlist: [1, {x: y}]\n")
                .expect("plain YAML");
        assert_eq!(value["data"]["a"], "b");
        assert_eq!(value["list"][1]["x"], "y");
    }

    #[test]
    fn aliases_are_refused() {
        let error = yaml(b"a: &x [1, 2]\nb: *x\n").expect_err("an alias");
        assert!(matches!(error, BodyError::Malformed(_)), "{error:?}");
    }
}
