//! The `Move` object: moving a node to another parent relay.
//!
//! `POST .../moves` with `{"apiVersion":"relaymesh.dev/v1alpha1","kind":
//! "Move","spec":{"node":"edge-7","to":"us"}}` has the root issue a join
//! token for the node under the new parent and send it down to the node as
//! a signed slice entry (see [`relaymesh_protocol::moves`]); `GET .../moves`
//! lists the moves the root holds, `Moving` until the root sees the node
//! under its new parent, then `Settled`. The token's text is never shown.
//! This module checks requests and shapes replies; it does no IO.

use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::{Move, MoveState, NodeRecord, Role};
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
    super::schemas::refuse_unknown_fields(KIND, &super::schemas::move_request(), &object)?;
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

/// Checks that `node` may move under `to` in the tree `nodes` (the root's
/// inventory, which lists every node but the root) and returns its parent
/// and role.
///
/// A node may not move up its own branch (the relay there holds it through
/// a child already: docs/operations.md, "Moving a cluster"). A relay may
/// not move into its own subtree, nor so deep that the issuers below it
/// would make chains longer than certificate verification accepts: it
/// keeps its issuer key, and every certificate it and the relays below it
/// issued stays valid under its new place.
pub fn check_move(
    nodes: &[Arc<NodeRecord>],
    node: &str,
    to: &str,
) -> Result<(String, Role), ApiError> {
    let record_of = |name: &str| nodes.iter().find(|record| record.name == name);
    let parent_of = |name: &str| record_of(name).and_then(|record| record.parent.clone());
    // The relays from `name` up to the root, `name` first; bounded, so a
    // cycle in a hostile report cannot loop.
    let branch = |name: &str| {
        let mut branch = vec![name.to_string()];
        while let Some(parent) = branch.last().and_then(|last| parent_of(last)) {
            if branch.len() > nodes.len() {
                break;
            }
            branch.push(parent);
        }
        branch
    };
    let record = record_of(node)
        .ok_or_else(|| ApiError::NotFound(format!("node {node:?} is not in the tree")))?;
    let to_invalid = |message: String| ApiError::Invalid {
        field: "spec.to".into(),
        message,
    };
    let from = record.parent.clone().unwrap_or_default();
    if from == to {
        return Err(to_invalid(format!("{node:?} is already under {to:?}")));
    }
    if branch(&from).iter().any(|relay| relay == to) {
        return Err(to_invalid(format!(
            "{to:?} is above {node:?}'s parent {from:?}: moving a node up its own branch is not supported; move it to a relay of another branch"
        )));
    }
    let to_branch = branch(to);
    if to_branch.iter().any(|relay| relay == node) {
        return Err(to_invalid(format!(
            "{to:?} is in {node:?}'s own subtree: a relay cannot move below itself"
        )));
    }
    if record.role == Role::Relay {
        // A relay's depth counts the relays from the root's child down to
        // it: its issuer is intermediate number `depth` of the chains below
        // it. `below` is how many relay levels its subtree holds.
        let below = nodes
            .iter()
            .filter(|record| record.role == Role::Relay)
            .filter_map(|record| branch(&record.name).iter().position(|name| name == node))
            .max()
            .unwrap_or(0);
        let deepest = to_branch.len() + below;
        if deepest > relaymesh_node::pki::MAX_INTERMEDIATES {
            return Err(to_invalid(format!(
                "under {to:?}, {node:?} and the relays below it would reach {deepest} issuers deep, more than the {} that certificate verification accepts",
                relaymesh_node::pki::MAX_INTERMEDIATES
            )));
        }
    }
    Ok((from, record.role))
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

    fn node(name: &str, parent: &str, role: Role) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            role,
            parent: Some(parent.into()),
            labels: Default::default(),
            addresses: vec![],
            version: String::new(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        }
    }

    /// root ← eu ← mid ← below ← edge, root ← us ← d2 ← d3 ← d4, root ← ap.
    fn tree() -> Vec<Arc<NodeRecord>> {
        tree_records().into_iter().map(Arc::new).collect()
    }

    fn tree_records() -> Vec<NodeRecord> {
        vec![
            node("eu", "root", Role::Relay),
            node("mid", "eu", Role::Relay),
            node("below", "mid", Role::Relay),
            node("edge", "below", Role::Agent),
            node("us", "root", Role::Relay),
            node("d2", "us", Role::Relay),
            node("d3", "d2", Role::Relay),
            node("d4", "d3", Role::Relay),
            node("ap", "root", Role::Relay),
        ]
    }

    #[test]
    fn a_relay_moves_with_its_subtree_where_chains_stay_short_enough() {
        let nodes = tree();
        assert_eq!(
            check_move(&nodes, "mid", "us").expect("allowed"),
            ("eu".to_string(), Role::Relay)
        );
        assert_eq!(
            check_move(&nodes, "edge", "ap").expect("allowed"),
            ("below".to_string(), Role::Agent)
        );
        // mid at depth 5 under d4, below at 6: the most verification takes.
        check_move(&nodes, "mid", "d4").expect("six issuers deep");
        for (node, to, why) in [
            ("mid", "eu", "already under"),
            ("below", "eu", "up its own branch"),
            ("mid", "below", "own subtree"),
            ("eu", "edge", "own subtree"),
            ("nowhere", "us", "not in the tree"),
        ] {
            let error = check_move(&nodes, node, to).expect_err(why).to_string();
            assert!(error.contains(why), "{node} to {to}: {error}");
        }
        let mut deeper = nodes;
        deeper.push(Arc::new(node("deepest", "below", Role::Relay)));
        let error = check_move(&deeper, "mid", "d4")
            .expect_err("too deep")
            .to_string();
        assert!(error.contains("7 issuers deep"), "{error}");
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
