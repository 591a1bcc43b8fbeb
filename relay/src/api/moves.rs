//! The `Move` object: moving a node to another parent relay.
//!
//! `POST .../moves` with `{"apiVersion":"relaymesh.dev/v1alpha1","kind":
//! "Move","spec":{"node":"edge-7","to":"us"}}` has the root issue a join
//! token for the node under the new parent and send it down to the node as
//! a signed slice entry (see [`relaymesh_protocol::moves`]); `GET .../moves`
//! lists the moves the root holds, `Moving` until the root sees the node
//! under its new parent, then `Settled`. The token's text is never shown.
//! This module checks requests and shapes replies; it does no IO.

use std::time::Duration;

use relaymesh_protocol::{Move, MoveState};
use serde_json::{json, Map, Value};

use super::nodes::{check_type_meta, invalid, rfc3339, API_VERSION};
use super::ApiError;

/// The kind of a move.
const KIND: &str = "Move";

/// How long a move's token stays valid unless the request says otherwise:
/// a node that is offline longer needs the move ordered again.
pub const DEFAULT_MOVE_TTL: Duration = Duration::from_secs(3600);

/// What a `Move` request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRequest {
    /// The node to move.
    pub node: String,
    /// The relay it moves to.
    pub to: String,
    /// How long its join token stays valid.
    pub ttl: Duration,
}

/// The node, new parent and token lifetime a `Move` request names.
pub(super) fn parse_request(body: &[u8]) -> Result<MoveRequest, ApiError> {
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {KIND} object: {error}"))
    })?;
    check_type_meta(&object, KIND)?;
    let spec = object.get("spec");
    let field = |name: &str| -> Result<String, ApiError> {
        let path = format!("spec.{name}");
        let value = spec
            .and_then(|spec| spec.get(name))
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(&path, "Required value"))?;
        relaymesh_protocol::name::validate(value)
            .map_err(|error| invalid(&path, format!("Invalid value: {value:?}: {error}")))?;
        Ok(value.to_string())
    };
    let ttl = match spec.and_then(|spec| spec.get("ttlSeconds")) {
        None => DEFAULT_MOVE_TTL,
        Some(value) => match value.as_u64() {
            Some(seconds @ 1..=86_400) => Duration::from_secs(seconds),
            _ => {
                return Err(invalid(
                    "spec.ttlSeconds",
                    format!("Invalid value: {value}: must be from 1 to 86400 seconds"),
                ))
            }
        },
    };
    Ok(MoveRequest {
        node: field("node")?,
        to: field("to")?,
        ttl,
    })
}

/// A move as a `Move` object (without its token).
pub(super) fn move_object(moved: &Move) -> Value {
    let state = match moved.state {
        MoveState::Moving => "Moving",
        MoveState::Settled => "Settled",
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": moved.node,
            "creationTimestamp": rfc3339(moved.at_unix_ms),
        },
        "spec": {"node": moved.node, "to": moved.to},
        "status": {"from": moved.from, "state": state},
    })
}

/// Every move as a `MoveList`.
pub(super) fn move_list(moves: &[Move]) -> Value {
    let items: Vec<Value> = moves.iter().map(move_object).collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "MoveList",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_a_node_and_a_relay() {
        let body = br#"{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Move","spec":{"node":"edge-1","to":"us"}}"#;
        let request = parse_request(body).expect("valid");
        assert_eq!(
            (request.node.as_str(), request.to.as_str()),
            ("edge-1", "us")
        );
        assert_eq!(request.ttl, DEFAULT_MOVE_TTL);
    }

    #[test]
    fn bad_requests_name_the_field() {
        for (body, field) in [
            (
                r#"{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Move","spec":{"node":"edge-1"}}"#,
                "spec.to",
            ),
            (
                r#"{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Move","spec":{"node":"Edge_1","to":"us"}}"#,
                "spec.node",
            ),
            (
                r#"{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Move","spec":{"node":"e","to":"us","ttlSeconds":0}}"#,
                "spec.ttlSeconds",
            ),
        ] {
            let error = parse_request(body.as_bytes()).expect_err(body).to_string();
            assert!(error.contains(field), "{error} does not name {field}");
        }
    }

    #[test]
    fn the_object_never_shows_the_token() {
        let moved = Move {
            node: "edge-1".into(),
            from: "eu".into(),
            to: "us".into(),
            token: "rmt2.secret.signature".into(),
            at_unix_ms: 1_700_000_000_000,
            state: MoveState::Moving,
        };
        let text = move_object(&moved).to_string();
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("\"Moving\""), "{text}");
    }
}
