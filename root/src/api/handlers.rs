//! What relaymesh's endpoints do once a request was routed and the policy
//! let it through: each handler reads the request, asks the backend, and
//! writes the reply object. Parsing and the objects themselves belong to
//! each kind's own module; the handlers only join them to the backend, so
//! the dispatch reads as a table of endpoints.

use hyper::{Method, Response, StatusCode};
use relaymesh_apiserver::http::{json_reply, ApiBody};
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_apiserver::query::Query;
use relaymesh_apiserver::{ApiError, Call, User};
use relaymesh_node::daemon::root_services::Inventory;
use relaymesh_protocol::Role;
use serde_json::{json, Value};

use super::backend::Backend;
use super::explain::explain;
use super::routing::endpoint;
use super::users::ApiAuthorities;
use super::{
    cluster_labels, cordons, moves, nodes, observed, revocations, rotations, tokens, users,
};
use crate::placement::{Specs, RELAYMESH_GROUP};

/// A handler's answer.
type Reply = Result<Response<ApiBody>, ApiError>;

/// Answers `call` from `backend`; `authorities` sign user certificates and
/// Placements' specs are read through `specs`.
pub(super) async fn call<B: Backend>(
    backend: &B,
    authorities: &ApiAuthorities,
    specs: &Specs,
    call: Call,
) -> Reply {
    let read = call.method == Method::GET;
    // A write's body; `None` for a read, which has none to parse.
    let written = (!read).then_some(call.body.as_slice());
    match (call.route.endpoint, read) {
        (endpoint::JOIN_TOKENS, true) => list_join_tokens(backend),
        (endpoint::JOIN_TOKENS, false) => issue_join_token(backend, &call.body).await,
        (endpoint::JOIN_TOKEN, _) => revoke_join_token(backend, &argument(&call, 0)).await,
        (endpoint::REVOCATIONS, true) => {
            let list = revocations::revocation_list(&backend.revocations().await?);
            json_reply(StatusCode::OK, &list)
        }
        (endpoint::REVOCATIONS, false) => {
            let node = revocations::parse_request(&call.body)?;
            let revoked = backend.revoke_node(node).await?;
            created(&revocations::node_revoked_object(&revoked))
        }
        (endpoint::API_CERT_ROTATIONS, _) => api_cert_rotation(backend, written),
        (endpoint::API_CA_ROTATIONS, _) => api_ca_rotation(backend, written),
        (endpoint::MESH_CA_ROTATIONS, _) => {
            trust_rotation_reply(backend, rotations::Rotated::MeshCa, written).await
        }
        (endpoint::TOKEN_KEY_ROTATIONS, _) => {
            trust_rotation_reply(backend, rotations::Rotated::TokenKey, written).await
        }
        (endpoint::CLUSTER_LABELS, _) => {
            let change = cluster_labels::parse_request(&call.body)?;
            created(&cluster_labels::object(
                &backend.label_cluster(change).await?,
            ))
        }
        (endpoint::CORDONS, _) => {
            let (cluster, state) = cordons::parse_request(&call.body)?;
            let labels = backend.label_cluster(state.change(&cluster).into()).await?;
            created(&cordons::object(state, &labels))
        }
        (endpoint::MOVES, true) => {
            json_reply(StatusCode::OK, &moves::move_list(&backend.moves().await?))
        }
        (endpoint::MOVES, false) => {
            let request = moves::parse_request(&call.body)?;
            created(&moves::move_object(&backend.move_node(request).await?))
        }
        (endpoint::USER_CERTIFICATES, true) => {
            json_reply(StatusCode::OK, &users::user_list(&backend.users()?))
        }
        (endpoint::USER_CERTIFICATES, false) => issue_user(backend, authorities, &call.body),
        (endpoint::USER_CERTIFICATE, _) => revoke_user(backend, &argument(&call, 0), &call.user),
        (endpoint::BUNDLES, _) => push_bundle(backend, call).await,
        (endpoint::EXPLAIN, _) => {
            let (namespace, name) = (argument(&call, 0), argument(&call, 1));
            let key = ObjectKey::new(RELAYMESH_GROUP, "placements", Some(&namespace), &name);
            let object = explain(backend, specs, &call.objects, &key).await?;
            json_reply(StatusCode::OK, &object)
        }
        (endpoint::LINK, _) => link(backend, argument(&call, 0), argument(&call, 1)).await,
        (endpoint::OBJECT | endpoint::EVENTS, _) => observe(backend, &call).await,
        (endpoint::SUBTREE, _) => subtree(backend, &call).await,
        (endpoint::DASHBOARD, _) => crate::dashboard::asset(&argument(&call, 0)),
        (other, _) => Err(ApiError::NotFound(format!("nothing serves {other}"))),
    }
}

/// What the route read from the path at `index` (empty if it read none).
fn argument(call: &Call, index: usize) -> String {
    call.route.arguments.get(index).cloned().unwrap_or_default()
}

/// `201 Created` with `object`.
fn created(object: &Value) -> Reply {
    json_reply(StatusCode::CREATED, object)
}

/// `GET .../jointokens`: the tokens the root remembers, as they stand now.
fn list_join_tokens<B: Backend>(backend: &B) -> Reply {
    let list =
        revocations::token_list(&backend.tokens()?, &backend.inventory().records, unix_now());
    json_reply(StatusCode::OK, &list)
}

/// `POST .../jointokens`: issues a join token.
async fn issue_join_token<B: Backend>(backend: &B, body: &[u8]) -> Reply {
    let token = tokens::JoinToken::parse(body)?;
    let issued = backend.create_token(token.request.clone())?;
    // Before the token is handed out: the relays it names must
    // hold the grant by the time the node fails over.
    let candidates = (!issued.candidates.is_empty()).then(|| issued.candidates.clone());
    backend
        .grant_parents(token.request.name.clone(), candidates)
        .await?;
    created(&token.reply(&issued))
}

/// `DELETE .../jointokens/ID`.
async fn revoke_join_token<B: Backend>(backend: &B, id: &str) -> Reply {
    let id = revocations::parse_token_id(id)?;
    let record = backend.revoke_token(id).await?;
    let object = revocations::token_object(&record, &backend.inventory().records, unix_now());
    json_reply(StatusCode::OK, &object)
}

/// `.../apicertificaterotations`: the serving certificate (`body` `None`),
/// or a new one.
fn api_cert_rotation<B: Backend>(backend: &B, body: Option<&[u8]>) -> Reply {
    match body {
        None => json_reply(
            StatusCode::OK,
            &rotations::api_cert_object(&backend.api_cert()?),
        ),
        Some(body) => {
            rotations::parse_api_cert_request(body)?;
            created(&rotations::api_cert_object(&backend.rotate_api_cert()?))
        }
    }
}

/// `.../apicarotations`: where the API CA stands (`body` `None`), or a
/// step of its rotation.
fn api_ca_rotation<B: Backend>(backend: &B, body: Option<&[u8]>) -> Reply {
    match body {
        None => json_reply(
            StatusCode::OK,
            &rotations::api_ca_object(&backend.api_ca()?),
        ),
        Some(body) => {
            let step = rotations::parse_api_ca_request(body)?;
            created(&rotations::api_ca_object(&backend.rotate_api_ca(step)?))
        }
    }
}

/// [`trust_rotation`], answered `200` for a read and `201` for a step.
async fn trust_rotation_reply<B: Backend>(
    backend: &B,
    rotated: rotations::Rotated,
    body: Option<&[u8]>,
) -> Reply {
    let object = trust_rotation(backend, rotated, body).await?;
    match body {
        None => json_reply(StatusCode::OK, &object),
        Some(_) => created(&object),
    }
}

/// `GET` (`body` `None`) or `POST` of a `MeshCARotation` or
/// `TokenKeyRotation`: the object that says where it stands. A finish
/// is refused while a node is pending, unless forced.
async fn trust_rotation<B: Backend>(
    backend: &B,
    rotated: rotations::Rotated,
    body: Option<&[u8]>,
) -> Result<Value, ApiError> {
    let nodes = backend.inventory().records;
    let below = nodes.iter().filter(|node| node.parent.is_some()).count();
    let trust = match body {
        None => backend.mesh_trust()?,
        Some(body) => {
            let request = rotated.parse(body)?;
            if request.step == relaymesh_node::pki::RotationStep::Finish && !request.force {
                let pending =
                    rotated.pending(&backend.mesh_trust()?, &nodes, backend.trust_published());
                if !pending.is_empty() {
                    return Err(rotated.finish_refused(&pending));
                }
            }
            match rotated {
                rotations::Rotated::MeshCa => backend.rotate_mesh_ca(request.step).await?,
                rotations::Rotated::TokenKey => backend.rotate_token_key(request.step).await?,
            }
        }
    };
    let pending = rotated.pending(&trust, &nodes, backend.trust_published());
    Ok(rotated.object(&trust, &pending, below))
}

/// `POST .../usercertificates`: signs a user's certificate and records
/// the user.
fn issue_user<B: Backend>(backend: &B, authorities: &ApiAuthorities, body: &[u8]) -> Reply {
    let revoked = |name: &str| backend.user_revoked(name);
    let (object, record) = users::issue(
        &authorities.signing(),
        &authorities.trusted_pem(),
        body,
        revoked,
    )?;
    backend.record_user(record)?;
    created(&object)
}

/// `DELETE .../usercertificates/NAME`, asked by `asking`.
fn revoke_user<B: Backend>(backend: &B, name: &str, asking: &User) -> Reply {
    relaymesh_protocol::name::validate(name)
        .map_err(|error| ApiError::NotFound(format!("user {name:?} not found: {error}")))?;
    if name == asking.name {
        return Err(ApiError::Invalid {
            field: "metadata.name".into(),
            message: format!("{name:?} is the user asking: an admin cannot revoke itself"),
        });
    }
    let record = backend.revoke_user(name)?;
    json_reply(StatusCode::OK, &users::user_object(&record))
}

/// `POST /relaymesh/v1alpha1/bundles?name=NAME`: the body, stored whole.
async fn push_bundle<B: Backend>(backend: &B, call: Call) -> Reply {
    let query = Query::parse(call.query.as_deref())?;
    let name = query
        .get("name")
        .ok_or_else(|| ApiError::BadRequest("the query parameter name is required".into()))?
        .to_string();
    relaymesh_protocol::name::validate(&name).map_err(|error| ApiError::Invalid {
        field: "name".into(),
        message: format!("Invalid value: {name:?}: {error}"),
    })?;
    let size = call.body.len();
    let id = backend.push_bundle(name.clone(), call.body).await?;
    created(&json!({"name": name, "id": id.to_hex(), "size": size}))
}

/// `GET .../PLURAL/NAME/link`, `plural` `agents` or `relays`.
async fn link<B: Backend>(backend: &B, plural: String, name: String) -> Reply {
    let role = if plural == "agents" {
        Role::Agent
    } else {
        Role::Relay
    };
    known_node(&backend.inventory(), &name, role, &plural)?;
    let link = backend.link(name).await?;
    json_reply(StatusCode::OK, &nodes::link_object(&link))
}

/// `GET .../clusters/NAME/object` or `.../events`.
async fn observe<B: Backend>(backend: &B, call: &Call) -> Reply {
    let cluster = argument(call, 0);
    let events = call.route.endpoint == endpoint::EVENTS;
    let query = match events {
        true => observed::events_query(call.query.as_deref())?,
        false => observed::object_query(call.query.as_deref())?,
    };
    known_node(&backend.inventory(), &cluster, Role::Agent, "clusters")?;
    let observation = backend.observe(cluster.clone(), query).await?;
    json_reply(
        StatusCode::OK,
        &observed::reply(&cluster, events, &observation)?,
    )
}

/// `GET .../relays/NAME/placements/NAMESPACE/PLACEMENT`.
async fn subtree<B: Backend>(backend: &B, call: &Call) -> Reply {
    let relay = argument(call, 0);
    let (namespace, placement) = (argument(call, 1), argument(call, 2));
    known_node(&backend.inventory(), &relay, Role::Relay, "relays")?;
    let key = crate::placement::entry_key(&namespace, &placement);
    let (children, more) = backend.subtree(relay.clone(), key).await?;
    json_reply(
        StatusCode::OK,
        &nodes::subtree_object(&relay, &namespace, &placement, &children, more),
    )
}

/// Whether the tree has a node `name` of `role` (`plural` names the kind
/// in the error, as kube-apiserver does): `404` if not.
fn known_node(inventory: &Inventory, name: &str, role: Role, plural: &str) -> Result<(), ApiError> {
    if inventory
        .records
        .iter()
        .any(|record| record.name == name && record.role == role)
    {
        return Ok(());
    }
    Err(ApiError::NotFound(format!(
        "{plural}.{RELAYMESH_GROUP} {name:?} not found"
    )))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
