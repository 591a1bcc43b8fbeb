//! The objects of revocation: the `JoinToken` list an admin reads and
//! revokes from, and the `Revocation` object that revokes a node.
//!
//! `GET .../jointokens` lists what the root issued (never the tokens' text);
//! `DELETE .../jointokens/{id}` revokes one. `POST .../revocations` with
//! `{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Revocation","spec":
//! {"node":"eu"}}` revokes a node, and `GET .../revocations` lists what the
//! root revoked. This module checks requests and shapes replies; it does no
//! IO.

use relaymesh_protocol::{NodeRecord, Revocation};
use serde_json::{json, Map, Value};
use std::sync::Arc;

use super::nodes::{check_type_meta, invalid, rfc3339, API_VERSION};
use super::{ApiError, NodeRevoked};
use relaymesh_node::store::TokenRecord;

/// The kind of a node revocation.
const KIND: &str = "Revocation";

/// The node a `Revocation` request names.
pub(super) fn parse_request(body: &[u8]) -> Result<String, ApiError> {
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {KIND} object: {error}"))
    })?;
    check_type_meta(&object, KIND)?;
    super::schemas::refuse_unknown_fields(KIND, &super::schemas::revocation_request(), &object)?;
    let node = object
        .get("spec")
        .and_then(|spec| spec.get("node"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("spec.node", "Required value"))?;
    relaymesh_protocol::name::validate(node)
        .map_err(|error| invalid("spec.node", format!("Invalid value: {node:?}: {error}")))?;
    Ok(node.to_string())
}

/// A token id from a URL path: 32 hex digits.
pub(super) fn parse_token_id(text: &str) -> Result<[u8; 16], ApiError> {
    let not_found = || ApiError::NotFound(format!("jointokens.relaymesh.dev {text:?} not found"));
    if text.len() != 32 || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(not_found());
    }
    let mut id = [0u8; 16];
    for (index, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16).map_err(|_| not_found())?;
    }
    Ok(id)
}

/// What a token's state is now: revoked, used (a node reports it joined
/// with it), expired, or still valid.
fn state(record: &TokenRecord, used: bool, now_unix: u64) -> &'static str {
    if record.revoked {
        "Revoked"
    } else if used {
        "Used"
    } else if record.not_after_unix <= now_unix {
        "Expired"
    } else {
        "Valid"
    }
}

/// One issued token as a `JoinToken` object. `status.nodeInTree` says
/// whether a node of its name and role is in the tree under its parent;
/// `status.usedBy` names that node when it reports it joined with this very
/// token (see [`relaymesh_node::store::used_by`]).
pub(super) fn token_object(
    record: &TokenRecord,
    nodes: &[Arc<NodeRecord>],
    now_unix: u64,
) -> Value {
    let used_by = relaymesh_node::store::used_by(record, nodes).map(|node| node.name.clone());
    let in_tree = nodes.iter().any(|node| {
        node.name == record.name
            && node.role == record.role
            && node.parent.as_deref() == Some(record.parent.as_str())
    });
    let mut object = json!({
        "apiVersion": API_VERSION,
        "kind": "JoinToken",
        "metadata": {
            "name": relaymesh_protocol::revocation::hex(&record.id),
            "creationTimestamp": rfc3339(record.issued_unix.saturating_mul(1000)),
        },
        "spec": {
            "name": record.name,
            "role": record.role.as_str(),
            "parent": record.parent,
        },
        "status": {
            "expirationTimestamp": rfc3339(record.not_after_unix.saturating_mul(1000)),
            "state": state(record, used_by.is_some(), now_unix),
            "nodeInTree": in_tree,
        },
    });
    if let Some(node) = used_by {
        object["status"]["usedBy"] = json!(node);
    }
    object
}

/// Every issued token as a `JoinTokenList`.
pub(super) fn token_list(
    records: &[TokenRecord],
    nodes: &[Arc<NodeRecord>],
    now_unix: u64,
) -> Value {
    let items: Vec<Value> = records
        .iter()
        .map(|record| token_object(record, nodes, now_unix))
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "JoinTokenList",
        "metadata": {},
        "items": items,
    })
}

/// A revocation the root holds, as a `Revocation` object.
pub(super) fn revocation_object(revocation: &Revocation) -> Value {
    let (spec, status) = match revocation {
        Revocation::Node { name, at_unix } => (
            json!({"node": name}),
            json!({"revokedAt": rfc3339(at_unix.saturating_mul(1000))}),
        ),
        Revocation::Token {
            id,
            name,
            not_after_unix,
        } => (
            json!({"token": relaymesh_protocol::revocation::hex(id), "tokenName": name}),
            json!({"expirationTimestamp": rfc3339(not_after_unix.saturating_mul(1000))}),
        ),
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": revocation.key().replace('/', ".")},
        "spec": spec,
        "status": status,
    })
}

/// Every revocation as a `RevocationList`.
pub(super) fn revocation_list(revocations: &[Revocation]) -> Value {
    let items: Vec<Value> = revocations.iter().map(revocation_object).collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "RevocationList",
        "metadata": {},
        "items": items,
    })
}

/// The reply to a node revocation: the revocation, the tokens for the node
/// it revoked with it, and the nodes it took out of the tree.
pub(super) fn node_revoked_object(revoked: &NodeRevoked) -> Value {
    let mut object = revocation_object(&Revocation::Node {
        name: revoked.name.clone(),
        at_unix: revoked.at_unix,
    });
    if let Some(Value::Object(status)) = object.get_mut("status") {
        let tokens: Vec<String> = revoked
            .tokens
            .iter()
            .map(relaymesh_protocol::revocation::hex)
            .collect();
        status.insert("tokensRevoked".into(), json!(tokens));
        status.insert("removedFromTree".into(), json!(revoked.removed));
    }
    object
}

#[cfg(test)]
mod tests {
    use relaymesh_protocol::Role;

    use super::*;

    #[test]
    fn a_request_names_one_valid_node() {
        let body =
            br#"{"apiVersion":"relaymesh.dev/v1alpha1","kind":"Revocation","spec":{"node":"eu"}}"#;
        assert_eq!(parse_request(body).expect("test"), "eu");
        for bad in [
            &br#"{"spec":{}}"#[..],
            br#"{"spec":{"node":"Not A Name"}}"#,
            br#"{"kind":"JoinToken","spec":{"node":"eu"}}"#,
            b"not json",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn token_ids_are_32_hex_digits() {
        let id = [0xab; 16];
        let text = relaymesh_protocol::revocation::hex(&id);
        assert_eq!(parse_token_id(&text).expect("test"), id);
        for bad in [
            "",
            "ab",
            &format!("{text}00"),
            &"zz".repeat(16),
            "é".repeat(16).as_str(),
        ] {
            assert!(
                matches!(parse_token_id(bad), Err(ApiError::NotFound(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_token_says_whether_it_is_valid_expired_or_revoked() {
        let mut record = TokenRecord {
            id: [1; 16],
            name: "edge-1".into(),
            role: Role::Agent,
            parent: "root".into(),
            issued_unix: 1_000,
            not_after_unix: 2_000,
            revoked: false,
        };
        let node = NodeRecord {
            name: "edge-1".into(),
            role: Role::Agent,
            parent: Some("root".into()),
            labels: Default::default(),
            addresses: vec![],
            version: String::new(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        };
        let object = token_object(&record, &[Arc::new(node.clone())], 1_500);
        assert_eq!(object["status"]["state"], "Valid");
        assert_eq!(object["status"]["nodeInTree"], true);
        assert!(object["status"].get("usedBy").is_none());
        // The node reports it joined with this token: used, expired or not.
        let mut joined = node.clone();
        joined.labels =
            relaymesh_node::store::with_join_token_label(Default::default(), &record.id).into();
        for now in [1_500, 2_500] {
            let object = token_object(&record, &[Arc::new(joined.clone())], now);
            assert_eq!(object["status"]["state"], "Used");
            assert_eq!(object["status"]["usedBy"], "edge-1");
        }
        // Another node's word, or another token's id, is not enough.
        let mut elsewhere = joined.clone();
        elsewhere.parent = Some("eu".into());
        let mut other = node.clone();
        other.labels =
            relaymesh_node::store::with_join_token_label(Default::default(), &[2; 16]).into();
        for nodes in [[Arc::new(elsewhere)], [Arc::new(other)]] {
            assert_eq!(
                token_object(&record, &nodes, 1_500)["status"]["state"],
                "Valid"
            );
        }
        assert_eq!(object["metadata"]["name"], "01".repeat(16));
        assert_eq!(
            token_object(&record, &[], 2_000)["status"]["state"],
            "Expired"
        );
        record.revoked = true;
        let object = token_object(&record, &[], 1_500);
        assert_eq!(object["status"]["state"], "Revoked");
        assert_eq!(object["status"]["nodeInTree"], false);
    }
}
