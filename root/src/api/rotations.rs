//! The `MeshCARotation` object: how an admin rotates the mesh CA and
//! follows it (see `pki::rotation`).
//!
//! `POST .../meshcarotations` with `{"apiVersion":"relaymesh.dev/v1alpha1",
//! "kind":"MeshCARotation","spec":{"step":"Start"}}` starts one; `"Finish"`
//! ends it, refused while a node has not moved over unless `"force":
//! true`. `GET .../meshcarotations` says where it stands: the CAs trusted,
//! the key that signs, and which nodes have not moved over yet. This
//! module checks requests and shapes replies; it does no IO.

use relaymesh_protocol::{MeshTrust, NodeRecord};
use serde_json::{json, Map, Value};
use std::sync::Arc;

use super::nodes::{check_type_meta, invalid, API_VERSION};
use super::ApiError;
use relaymesh_node::pki::RotationStep;

/// The kind.
const KIND: &str = "MeshCARotation";

/// How many names of nodes that have not moved over a reply lists.
const PENDING_NAMES: usize = 50;

/// A rotation request: the step, and whether to finish although nodes
/// have not moved over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationRequest {
    /// What to do.
    pub step: RotationStep,
    /// Finish even though some nodes would be cut off.
    pub force: bool,
}

/// What a rotation the tree moves over to is of: both publish the root's
/// trust, and each node reports what it holds of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rotated {
    /// The mesh CA (`MeshCARotation`).
    MeshCa,
    /// The token-signing key (`TokenKeyRotation`).
    TokenKey,
}

impl Rotated {
    /// The step a request asks for.
    pub(super) fn parse(self, body: &[u8]) -> Result<RotationRequest, ApiError> {
        match self {
            Self::MeshCa => {
                rotation_request(body, KIND, &super::schemas::mesh_ca_rotation_request())
            }
            Self::TokenKey => rotation_request(
                body,
                TOKEN_KEY_KIND,
                &super::schemas::token_key_rotation_request(),
            ),
        }
    }

    /// The nodes that have not moved over to `trust` yet. Before the
    /// root ever `published` its trust, a node that reports nothing of it
    /// holds the one CA and key there are.
    pub(super) fn pending<'a>(
        self,
        trust: &MeshTrust,
        nodes: &'a [Arc<NodeRecord>],
        published: bool,
    ) -> Vec<&'a str> {
        let label = match self {
            Self::MeshCa => relaymesh_core::CHAIN_CA_LABEL,
            Self::TokenKey => relaymesh_core::TOKEN_KEYS_LABEL,
        };
        let mut pending: Vec<&str> = nodes
            .iter()
            .filter(|node| node.parent.is_some())
            .filter(|node| published || node.labels.contains_key(label))
            .filter(|node| match self {
                Self::MeshCa => !moved_to_ca(trust, node, nodes),
                Self::TokenKey => !moved_to_key(trust, node),
            })
            .map(|node| node.name.as_str())
            .collect();
        pending.sort_unstable();
        pending
    }

    /// The object that says where it stands.
    pub(super) fn object(self, trust: &MeshTrust, pending: &[&str], total: usize) -> Value {
        match self {
            Self::MeshCa => object(trust, pending, total),
            Self::TokenKey => token_key_object(trust, pending, total),
        }
    }

    /// Why the root refuses to finish while `pending` have not moved over.
    pub(super) fn finish_refused(self, pending: &[&str]) -> ApiError {
        let (what, command) = match self {
            Self::MeshCa => ("mesh CA", "mesh-ca"),
            Self::TokenKey => ("token-signing key", "token-key"),
        };
        finish_refused(what, command, pending)
    }
}

/// The step a `MeshCARotation` or `TokenKeyRotation` request (`kind`,
/// with `schema`) asks for, and whether to force the finish.
fn rotation_request(body: &[u8], kind: &str, schema: &Value) -> Result<RotationRequest, ApiError> {
    let spec = spec_of(body, kind, schema)?;
    let step = step_of(&spec)?;
    let force = match spec.get("force") {
        None => false,
        Some(Value::Bool(force)) => *force,
        Some(_) => return Err(invalid("spec.force", "Invalid value: must be a boolean")),
    };
    Ok(RotationRequest { step, force })
}

/// The kind that rotates the token-signing key.
const TOKEN_KEY_KIND: &str = "TokenKeyRotation";

/// A token key as the label [`relaymesh_core::TOKEN_KEYS_LABEL`] shows it.
fn short_token_key(key: &[u8]) -> String {
    relaymesh_node::pki::hex(&key[..key.len().min(6)])
}

/// Whether `node` accepts exactly the token keys `trust` names, by what it
/// reports ([`relaymesh_core::TOKEN_KEYS_LABEL`]).
fn moved_to_key(trust: &MeshTrust, node: &NodeRecord) -> bool {
    let wanted: std::collections::BTreeSet<String> = trust
        .token_keys
        .iter()
        .map(|key| short_token_key(key))
        .collect();
    let accepted: Option<std::collections::BTreeSet<String>> = node
        .labels
        .get(relaymesh_core::TOKEN_KEYS_LABEL)
        .map(|keys| keys.split('.').map(str::to_string).collect());
    accepted == Some(wanted)
}

/// The `TokenKeyRotation` object: the keys accepted (the first signs), and
/// the nodes that do not accept exactly those yet, of `total`.
fn token_key_object(trust: &MeshTrust, pending: &[&str], total: usize) -> Value {
    let keys: Vec<String> = trust
        .token_keys
        .iter()
        .map(|key| short_token_key(key))
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": TOKEN_KEY_KIND,
        "metadata": {"name": "token-key"},
        "status": {
            "phase": if keys.len() > 1 { "Rotating" } else { "Steady" },
            "signer": keys.first(),
            "accepted": keys,
            "nodes": {
                "total": total,
                "movedOver": total.saturating_sub(pending.len()),
                "pending": pending.len(),
                "pendingNames": pending.iter().take(PENDING_NAMES).collect::<Vec<_>>(),
            },
        },
    })
}

/// The kind that rotates the API CA.
const API_CA_KIND: &str = "APICARotation";

/// The step an `APICARotation` request asks for.
pub(super) fn parse_api_ca_request(body: &[u8]) -> Result<RotationStep, ApiError> {
    let spec = spec_of(
        body,
        API_CA_KIND,
        &super::schemas::api_ca_rotation_request(),
    )?;
    step_of(&spec)
}

/// The `spec` of a request of `kind`, which may hold what `schema` names
/// only.
fn spec_of(body: &[u8], kind: &str, schema: &Value) -> Result<Map<String, Value>, ApiError> {
    let mut object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {kind} object: {error}"))
    })?;
    check_type_meta(&object, kind)?;
    super::schemas::refuse_unknown_fields(kind, schema, &object)?;
    match object.remove("spec") {
        Some(Value::Object(spec)) => Ok(spec),
        None => Err(invalid("spec", "Required value")),
        Some(_) => Err(invalid("spec", "Invalid value: must be an object")),
    }
}

/// `spec.step`: `Start` or `Finish`.
fn step_of(spec: &Map<String, Value>) -> Result<RotationStep, ApiError> {
    match spec.get("step").and_then(Value::as_str) {
        Some("Start") => Ok(RotationStep::Start),
        Some("Finish") => Ok(RotationStep::Finish),
        Some(other) => Err(invalid(
            "spec.step",
            format!("Unsupported value: {other:?}: supported values: \"Start\", \"Finish\""),
        )),
        None => Err(invalid("spec.step", "Required value")),
    }
}

/// The `APICARotation` object for `state`: fingerprints of the CAs and of
/// the serving certificate.
pub(super) fn api_ca_object(state: &crate::api::ApiCaState) -> Value {
    let fingerprint = |der: &[u8]| relaymesh_node::pki::hex(&relaymesh_node::pki::sha256(der));
    json!({
        "apiVersion": API_VERSION,
        "kind": API_CA_KIND,
        "metadata": {"name": "api-ca"},
        "status": {
            "phase": if state.previous.is_some() { "Rotating" } else { "Steady" },
            "signingCA": fingerprint(&state.signing),
            "retiringCA": state.previous.as_deref().map(fingerprint),
            "servingCertificate": fingerprint(&state.serving),
        },
    })
}

/// Whether `node` moved over to `trust`, by what it reports: its chain
/// reaches the key `trust` signs with, it trusts exactly the CAs `trust`
/// names (labels [`relaymesh_core::CHAIN_CA_LABEL`] and
/// [`relaymesh_core::TRUSTED_CAS_LABEL`]), its parent's current issuer
/// key signed its certificate ([`relaymesh_core::SIGNED_BY_LABEL`]), and,
/// while the rotation lasts, a relay's issuer key rotated in it
/// ([`relaymesh_core::ISSUER_ROTATED_LABEL`]). `nodes` holds its parent's
/// record.
fn moved_to_ca(trust: &MeshTrust, node: &NodeRecord, nodes: &[Arc<NodeRecord>]) -> bool {
    let signer = relaymesh_node::pki::short_key(&trust.signer_key);
    let wanted: std::collections::BTreeSet<String> = short_keys(trust).into_iter().collect();
    let trusted: Option<std::collections::BTreeSet<String>> = node
        .labels
        .get(relaymesh_core::TRUSTED_CAS_LABEL)
        .map(|trusted| trusted.split('.').map(str::to_string).collect());
    let issuer_rotated = trust.anchors.len() < 2
        || node.role != relaymesh_protocol::Role::Relay
        || node.labels.get(relaymesh_core::ISSUER_ROTATED_LABEL) == Some(signer.as_str());
    node.labels.get(relaymesh_core::CHAIN_CA_LABEL) == Some(signer.as_str())
        && trusted == Some(wanted)
        && issuer_rotated
        && node.labels.get(relaymesh_core::SIGNED_BY_LABEL)
            == parent_key(trust, node, nodes).as_deref()
}

/// The key (short hex) `node`'s parent signs with now: the root's mesh CA
/// key, or the issuer key a relay reports.
fn parent_key(trust: &MeshTrust, node: &NodeRecord, nodes: &[Arc<NodeRecord>]) -> Option<String> {
    let parent = nodes
        .iter()
        .find(|record| Some(&record.name) == node.parent.as_ref())?;
    if parent.parent.is_none() {
        return Some(relaymesh_node::pki::short_key(&trust.signer_key));
    }
    let key = relaymesh_node::store::reported_issuer_key(parent)?;
    Some(relaymesh_node::pki::short_key(&key))
}

/// The object that says where the mesh CA stands: `trust` is the root's,
/// `pending` the nodes not moved over, of `total` nodes below the root.
fn object(trust: &MeshTrust, pending: &[&str], total: usize) -> Value {
    let anchors = short_keys(trust);
    let phase = if trust.anchors.len() > 1 {
        "Rotating"
    } else {
        "Steady"
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "mesh-ca"},
        "status": {
            "phase": phase,
            "signer": relaymesh_node::pki::short_key(&trust.signer_key),
            "trusted": anchors,
            "nodes": {
                "total": total,
                "movedOver": total.saturating_sub(pending.len()),
                "pending": pending.len(),
                "pendingNames": pending.iter().take(PENDING_NAMES).collect::<Vec<_>>(),
            },
        },
    })
}

/// The short key hashes of the CAs `trust` names, as nodes report them.
fn short_keys(trust: &MeshTrust) -> Vec<String> {
    trust
        .anchors
        .iter()
        .filter_map(|anchor| relaymesh_node::pki::public_key_sha256(anchor).ok())
        .map(|key| relaymesh_node::pki::short_key(&key))
        .collect()
}

/// The kind that rotates the API's serving certificate.
const API_CERT_KIND: &str = "APICertificateRotation";

/// Checks an `APICertificateRotation` request: its type and an empty spec.
pub(super) fn parse_api_cert_request(body: &[u8]) -> Result<(), ApiError> {
    spec_of(
        body,
        API_CERT_KIND,
        &super::schemas::api_certificate_rotation_request(),
    )
    .map(drop)
}

/// The `APICertificateRotation` object for the serving certificate `leaf`
/// (DER): its fingerprint, validity and names.
pub(super) fn api_cert_object(leaf: &[u8]) -> Value {
    let (not_before, not_after) = relaymesh_node::pki::validity_unix(leaf).unwrap_or_default();
    json!({
        "apiVersion": API_VERSION,
        "kind": API_CERT_KIND,
        "metadata": {"name": "api-serving-certificate"},
        "status": {
            "sha256": relaymesh_node::pki::hex(&relaymesh_node::pki::sha256(leaf)),
            "notBefore": super::nodes::rfc3339(not_before.saturating_mul(1000)),
            "notAfter": super::nodes::rfc3339(not_after.saturating_mul(1000)),
        },
    })
}

/// Why the root refuses to finish while `pending` have not moved over to
/// the new `what` (`relayctl rotate COMMAND`).
fn finish_refused(what: &str, command: &str, pending: &[&str]) -> ApiError {
    let names: Vec<&str> = pending.iter().take(10).copied().collect();
    let more = pending.len().saturating_sub(names.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    ApiError::Conflict(format!(
        "{} node(s) have not moved over to the new {what} yet ({}{more}): finishing now would cut them off until they join again with new tokens; wait until `relayctl rotate {command} status` shows none pending, or finish with --force",
        pending.len(),
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_a_known_step_and_nothing_else() {
        let request = |spec: &str| {
            Rotated::MeshCa.parse(
                format!(
                    r#"{{"apiVersion":"relaymesh.dev/v1alpha1","kind":"MeshCARotation","spec":{spec}}}"#
                )
                .as_bytes(),
            )
        };
        assert_eq!(
            request(r#"{"step":"Start"}"#).expect("valid"),
            RotationRequest {
                step: RotationStep::Start,
                force: false
            }
        );
        assert_eq!(
            request(r#"{"step":"Finish","force":true}"#).expect("valid"),
            RotationRequest {
                step: RotationStep::Finish,
                force: true
            }
        );
        let refused = |spec: &str| request(spec).expect_err("refused").to_string();
        assert!(refused(r#"{"step":"start"}"#).contains("spec.step"));
        assert!(refused(r#"{}"#).contains("spec.step"));
        assert!(
            refused(r#"{"step":"Start","forse":true}"#).contains("unknown field \"spec.forse\"")
        );
        assert!(refused(r#"{"step":"Start","force":"yes"}"#).contains("spec.force"));
    }
}
