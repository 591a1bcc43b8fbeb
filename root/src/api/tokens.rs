//! The `JoinToken` object: a request for a join token, and the reply.
//!
//! A client POSTs `{"apiVersion":"relaymesh.dev/v1alpha1","kind":"JoinToken",
//! "spec":{"name","role","parent","ttl"}}` and receives the same object with a
//! `status` holding the token. This module checks the request field by field
//! (so that a 422 names the field, as kube-apiserver's validation does) and
//! builds the reply; it does no IO.

use std::time::Duration;

use relaymesh_protocol::Role;
use serde_json::{Map, Value};

use super::nodes::{check_type_meta, invalid, rfc3339, API_VERSION};
use super::{ApiError, IssuedToken, TokenRequest};

/// The kind of a join token request.
pub(super) const KIND: &str = "JoinToken";

/// How long a token lives unless the request says otherwise.
pub(super) const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);

/// The longest lifetime a token may have.
pub(super) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A decoded and checked `JoinToken` request.
#[derive(Debug, Clone)]
pub(super) struct JoinToken {
    /// The request as sent, echoed back in the reply.
    object: Map<String, Value>,
    /// What the backend is asked for.
    pub(super) request: TokenRequest,
}

impl JoinToken {
    /// Decodes and checks a request body.
    pub(super) fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
            ApiError::BadRequest(format!("cannot decode the {KIND} object: {error}"))
        })?;
        check_type_meta(&object, KIND)?;
        super::schemas::refuse_unknown_fields(
            KIND,
            &super::schemas::join_token_request(),
            &object,
        )?;
        let spec = match object.get("spec") {
            Some(Value::Object(spec)) => spec,
            Some(_) => return Err(invalid("spec", "must be an object")),
            None => return Err(invalid("spec", "Required value")),
        };
        let name = required_string(spec, "name")?;
        relaymesh_protocol::name::validate(name)
            .map_err(|error| invalid("spec.name", format!("Invalid value: {name:?}: {error}")))?;
        let role = match required_string(spec, "role")? {
            "relay" => Role::Relay,
            "agent" => Role::Agent,
            other => {
                return Err(invalid(
                    "spec.role",
                    format!("Unsupported value: {other:?}: supported values: \"relay\", \"agent\""),
                ))
            }
        };
        let parent = optional_string(spec, "parent")?;
        if let Some(parent) = parent {
            relaymesh_protocol::name::validate(parent).map_err(|error| {
                invalid("spec.parent", format!("Invalid value: {parent:?}: {error}"))
            })?;
        }
        let candidates = candidates(spec, parent)?;
        let ttl = match optional_string(spec, "ttl")? {
            None => DEFAULT_TTL,
            Some(text) => parse_ttl(text)?,
        };
        let request = TokenRequest {
            name: name.to_string(),
            role,
            parent: parent.map(str::to_string),
            candidates,
            ttl,
        };
        Ok(Self { object, request })
    }

    /// The reply: the request with defaults filled in and the token as status.
    pub(super) fn reply(mut self, issued: &IssuedToken) -> Value {
        self.object
            .insert("apiVersion".into(), Value::from(API_VERSION));
        self.object.insert("kind".into(), Value::from(KIND));
        self.object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(Value::Object(spec)) = self.object.get_mut("spec") {
            let ttl = humantime::format_duration(self.request.ttl).to_string();
            spec.insert("ttl".into(), Value::from(ttl));
        }
        let expiration = rfc3339(issued.expires_unix.saturating_mul(1000));
        self.object.insert(
            "status".into(),
            serde_json::json!({
                "token": issued.token,
                "expirationTimestamp": expiration,
            }),
        );
        Value::Object(self.object)
    }
}

/// `spec.candidates`: other relays the node may join under instead of
/// `spec.parent` (the nearest that admits it); an agent also fails over to
/// them later (see [`relaymesh_protocol::parents`]).
fn candidates(spec: &Map<String, Value>, parent: Option<&str>) -> Result<Vec<String>, ApiError> {
    let field = "spec.candidates";
    let items = match spec.get("candidates") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(field, "must be a list of relay names")),
    };
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let Some(parent) = parent else {
        return Err(invalid(
            "spec.parent",
            "Required value: a token with candidates names its first parent too",
        ));
    };
    let limit = relaymesh_protocol::parents::MAX_CANDIDATES - 1;
    if items.len() > limit {
        return Err(invalid(
            field,
            format!(
                "Too many: {} candidates besides the parent, at most {limit}",
                items.len()
            ),
        ));
    }
    let mut names: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let at = format!("{field}[{index}]");
        let Value::String(name) = item else {
            return Err(invalid(&at, "must be a string"));
        };
        relaymesh_protocol::name::validate(name)
            .map_err(|error| invalid(&at, format!("Invalid value: {name:?}: {error}")))?;
        if name == parent || names.contains(name) {
            return Err(invalid(&at, format!("Duplicate value: {name:?}")));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// Parses a humantime lifetime (`90m`, `1h`) between zero and [`MAX_TTL`].
fn parse_ttl(text: &str) -> Result<Duration, ApiError> {
    let ttl = humantime::parse_duration(text)
        .map_err(|error| invalid("spec.ttl", format!("Invalid value: {text:?}: {error}")))?;
    if ttl.is_zero() {
        return Err(invalid(
            "spec.ttl",
            format!("Invalid value: {text:?}: must be more than zero"),
        ));
    }
    if ttl > MAX_TTL {
        return Err(invalid(
            "spec.ttl",
            format!("Invalid value: {text:?}: must be at most 24h"),
        ));
    }
    Ok(ttl)
}

fn required_string<'a>(spec: &'a Map<String, Value>, key: &str) -> Result<&'a str, ApiError> {
    optional_string(spec, key)?.ok_or_else(|| invalid(&format!("spec.{key}"), "Required value"))
}

fn optional_string<'a>(
    spec: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ApiError> {
    match spec.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(invalid(&format!("spec.{key}"), "must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<JoinToken, ApiError> {
        JoinToken::parse(value.to_string().as_bytes())
    }

    fn invalid_field(value: Value) -> String {
        match parse(value) {
            Err(ApiError::Invalid { field, .. }) => field,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn parses_and_defaults() {
        let token = parse(json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "JoinToken",
            "spec": {"name": "eu-west", "role": "relay", "parent": "eu"},
        }))
        .expect("a valid request");
        assert_eq!(
            token.request,
            TokenRequest {
                name: "eu-west".into(),
                role: Role::Relay,
                parent: Some("eu".into()),
                candidates: Vec::new(),
                ttl: DEFAULT_TTL,
            }
        );
        let reply = token.reply(&IssuedToken {
            token: "secret".into(),
            expires_unix: 1_795_305_000,
            candidates: Vec::new(),
        });
        assert_eq!(reply["spec"]["ttl"], "1h");
        assert_eq!(reply["metadata"], json!({}));
        assert_eq!(
            reply["status"],
            json!({"token": "secret", "expirationTimestamp": "2026-11-21T23:50:00Z"})
        );
    }

    #[test]
    fn a_node_may_have_candidate_parents() {
        let spec = |spec: Value| json!({"kind": "JoinToken", "spec": spec});
        let token = parse(spec(json!({
            "name": "e", "role": "agent", "parent": "a", "candidates": ["b", "c"],
        })))
        .expect("a valid request");
        assert_eq!(token.request.candidates, ["b", "c"]);
        // A relay chooses among them when it joins (and keeps that one).
        let relay = parse(spec(json!({
            "name": "r", "role": "relay", "parent": "a", "candidates": ["b"],
        })))
        .expect("a valid request");
        assert_eq!(relay.request.candidates, ["b"]);
        for (bad, field) in [
            (
                json!({"name": "e", "role": "relay", "candidates": ["b"]}),
                "spec.parent",
            ),
            (
                json!({"name": "e", "role": "agent", "candidates": ["b"]}),
                "spec.parent",
            ),
            (
                json!({"name": "e", "role": "agent", "parent": "a", "candidates": ["a"]}),
                "spec.candidates[0]",
            ),
            (
                json!({"name": "e", "role": "agent", "parent": "a", "candidates": ["b", "b"]}),
                "spec.candidates[1]",
            ),
            (
                json!({"name": "e", "role": "agent", "parent": "a", "candidates": ["B"]}),
                "spec.candidates[0]",
            ),
            (
                json!({"name": "e", "role": "agent", "parent": "a", "candidates": "b"}),
                "spec.candidates",
            ),
            (
                json!({"name": "e", "role": "agent", "parent": "a",
                       "candidates": ["b", "c", "d", "f", "g", "h", "i", "j"]}),
                "spec.candidates",
            ),
        ] {
            assert_eq!(invalid_field(spec(bad.clone())), field, "{bad}");
        }
    }

    #[test]
    fn names_the_invalid_field() {
        let spec = |spec: Value| json!({"kind": "JoinToken", "spec": spec});
        assert_eq!(invalid_field(json!({})), "spec");
        assert_eq!(invalid_field(spec(json!({"role": "agent"}))), "spec.name");
        assert_eq!(
            invalid_field(spec(json!({"name": "Edge_1", "role": "agent"}))),
            "spec.name"
        );
        assert_eq!(
            invalid_field(spec(json!({"name": "e", "role": "admin"}))),
            "spec.role"
        );
        assert_eq!(invalid_field(spec(json!({"name": "e"}))), "spec.role");
        assert_eq!(
            invalid_field(spec(json!({"name": "e", "role": "agent", "parent": "-x"}))),
            "spec.parent"
        );
        for ttl in ["0s", "25h", "soon", ""] {
            assert_eq!(
                invalid_field(spec(json!({"name": "e", "role": "agent", "ttl": ttl}))),
                "spec.ttl",
                "{ttl}"
            );
        }
        assert_eq!(
            invalid_field(spec(json!({"name": 7, "role": "agent"}))),
            "spec.name"
        );
    }

    #[test]
    fn accepts_ttls_up_to_a_day() {
        for (text, seconds) in [("24h", 86_400), ("90m", 5_400), ("1h 30m", 5_400)] {
            assert_eq!(
                parse_ttl(text).ok(),
                Some(Duration::from_secs(seconds)),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_other_kinds_and_garbage() {
        assert!(matches!(
            parse(json!({"kind": "Secret", "spec": {}})),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            JoinToken::parse(b"{not json"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
