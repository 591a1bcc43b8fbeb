//! The root relay's HTTPS API: the Kubernetes API server of the
//! `relaymesh-apiserver` crate, with relaymesh's own kinds and paths mounted
//! on it ([`Relaymesh`], its [`Extension`]):
//!
//! * Placements (stored, checked by the placement module before they are);
//! * read-only views of the tree made from the inventory: `Cluster`,
//!   `Relay` and `Agent` objects and SIG-Multicluster `ClusterProfile`s
//!   (the `inventory` and `nodes` modules);
//! * join tokens, revocations and user certificates (`tokens`,
//!   `revocations`, `users`), written with relaymesh's own verbs that only
//!   admins hold by default (`policy`, which authorizes every request with
//!   the RBAC objects the root stores);
//! * a raw bundle push for smoke tests and the placement explainer;
//! * what the tree knows only below, asked on demand: a node's link
//!   (`agents/NAME/link`) and one cluster's live object and events
//!   (`clusters/NAME/object`, `clusters/NAME/events`; `observed`).
//!
//! The API does not own state: everything relaymesh-specific it serves
//! comes from a [`Backend`] the daemon implements.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::{Method, Response, StatusCode};
use relaymesh_apiserver::http::{json_reply, ApiBody, MAX_JSON_BODY};
use relaymesh_apiserver::objects::{ObjectKey, ObjectStore};
use relaymesh_apiserver::query::Query;
use relaymesh_apiserver::rbac::Rbac;
use relaymesh_apiserver::{
    ApiLimit, Attributes, Call, Extension, ExtensionRoute, Resource, Validator, Warner,
};
use relaymesh_protocol::limits::MAX_BUNDLE_LEN;
use relaymesh_protocol::{BundleId, LinkStatus, NodeRecord, Role};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::placement::{PlacementError, RELAYMESH_GROUP};
use relaymesh_node::limits::Limit;
use relaymesh_node::store::{TokenRecord, UserRecord};

mod cluster_labels;
pub mod cordons;
#[doc(hidden)]
pub mod fuzzing;
mod inventory;
mod moves;
mod nodes;
mod observed;
mod policy;
mod revocations;
mod rotations;
mod schemas;
mod tokens;
mod users;
pub use users::ApiAuthorities;

pub use cluster_labels::{merge as merge_cluster_labels, LabelChange, MAX_ANNOTATION_BYTES};
pub use moves::{check_move, MoveRequest, DEFAULT_MOVE_TTL};
pub use policy::{check_group, ADMINS, GROUPS, ISSUE, MOVE, OPERATORS, REVOKE, VIEWERS};
pub use relaymesh_apiserver::{ApiError, AuditLog, PeerIdentity, User};
pub use users::DEFAULT_VALIDITY as DEFAULT_USER_CERT_VALIDITY;

use inventory::View;

/// relaymesh's API version within its group.
const VERSION: &str = "v1alpha1";

/// The SIG-Multicluster API group of ClusterProfiles.
const MULTICLUSTER_GROUP: &str = "multicluster.x-k8s.io";

/// Where the API CA stands (see `relayctl rotate api-ca`).
#[derive(Debug, Clone)]
pub struct ApiCaState {
    /// The CA that signs new users (the new one during a rotation).
    pub signing: Vec<u8>,
    /// The CA being retired, during a rotation: its clients are still
    /// accepted and it still signs the serving certificate.
    pub previous: Option<Vec<u8>>,
    /// The serving certificate's leaf.
    pub serving: Vec<u8>,
}

/// The API server's TLS material: what the server presents and whom it
/// accepts (`server`), and the API CA(s) that sign users and that their
/// kubeconfigs trust (`authorities`).
#[derive(Clone)]
pub struct ApiTls {
    /// The server's certificate and client CAs.
    pub server: relaymesh_apiserver::ApiTls,
    /// What signs user certificates and what their kubeconfigs trust.
    pub authorities: users::ApiAuthorities,
}

impl std::fmt::Debug for ApiTls {
    // Never print a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTls")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl ApiTls {
    /// One API CA, `authority`, that accepts clients and signs users,
    /// with the server certificate `chain_der` (leaf first) and its key
    /// `key_der` (PKCS#8).
    pub fn new(
        authority: relaymesh_node::pki::ApiAuthority,
        chain_der: Vec<Vec<u8>>,
        key_der: Vec<u8>,
    ) -> Self {
        let server = relaymesh_apiserver::ApiTls {
            client_ca_der: authority.cert_der.clone(),
            chain_der,
            key_der,
            serving: None,
            clients: None,
        };
        let trusted = std::slice::from_ref(&authority.cert_der).to_vec();
        Self {
            server,
            authorities: users::ApiAuthorities::new(authority, &trusted),
        }
    }
}

/// A validated request for a join token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The name the joining node will have (a DNS-1123 label).
    pub name: String,
    /// [`Role::Relay`] or [`Role::Agent`]; never [`Role::Admin`].
    pub role: Role,
    /// The relay the node must join under; `None` lets the root choose.
    pub parent: Option<String>,
    /// Other relays the node may join under instead (the nearest that
    /// admits it); it also fails over to them (see
    /// [`relaymesh_protocol::parents`]).
    pub candidates: Vec<String>,
    /// How long the token stays valid (more than zero, at most a day).
    pub ttl: Duration,
}

/// A join token the backend issued.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The token, as `relay join` and `edge-agent join` take it.
    pub token: String,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_unix: u64,
    /// Every relay it lets the node join under, parent first, when it
    /// names more than one.
    pub candidates: Vec<relaymesh_protocol::CandidateParent>,
}

impl std::fmt::Debug for IssuedToken {
    // A token is a credential: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("expires_unix", &self.expires_unix)
            .finish_non_exhaustive()
    }
}

/// A node's link to its parent, as the parent measured it, asked of the
/// tree on demand ([`Backend::link`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLink {
    /// The node.
    pub name: String,
    /// The parent that measured the link and answered.
    pub parent: String,
    /// The link.
    pub status: LinkStatus,
}

/// What revoking a node did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRevoked {
    /// The node revoked.
    pub name: String,
    /// When (Unix seconds): certificates issued to it until then are void.
    pub at_unix: u64,
    /// The ids of the node's outstanding join tokens, revoked with it.
    pub tokens: Vec<[u8; 16]>,
    /// The nodes that left the root's inventory: the node and its subtree.
    pub removed: Vec<String>,
}

pub use relaymesh_node::daemon::root_services::Inventory;

/// What the API serves from: the daemon's view of the tree and its stores.
///
/// The synchronous methods are called from request handlers on the async
/// runtime, so they must answer from memory and not block.
pub trait Backend: Send + Sync + 'static {
    /// The tree as the root knows it.
    fn inventory(&self) -> Inventory;

    /// Issues a single-use join token for `request`.
    fn create_token(&self, request: TokenRequest) -> Result<IssuedToken, ApiError>;

    /// Grants node `node` candidate parents (`Some`, parent first), or
    /// takes its grant back (`None`), as the root's signed word to the
    /// relays (see [`relaymesh_protocol::parents`]).
    fn grant_parents(
        &self,
        node: String,
        candidates: Option<Vec<relaymesh_protocol::CandidateParent>>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let _ = (node, candidates);
        async { Ok(()) }
    }

    /// The join tokens the root issued and still remembers, oldest first.
    fn tokens(&self) -> Result<Vec<TokenRecord>, ApiError> {
        Err(ApiError::NotFound(
            "this server does not issue join tokens".into(),
        ))
    }

    /// Revokes the join token `id`, so no relay admits anyone with it.
    fn revoke_token(
        &self,
        id: [u8; 16],
    ) -> impl Future<Output = Result<TokenRecord, ApiError>> + Send {
        let _ = id;
        async {
            Err(ApiError::NotFound(
                "this server does not issue join tokens".into(),
            ))
        }
    }

    /// Revokes node `name`: every relay drops its link and refuses its
    /// certificates (and those of everything its issuer signed), and it
    /// leaves the inventory with its subtree.
    fn revoke_node(
        &self,
        name: String,
    ) -> impl Future<Output = Result<NodeRevoked, ApiError>> + Send {
        let _ = name;
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// The API's serving certificate now (DER).
    fn api_cert(&self) -> Result<Vec<u8>, ApiError> {
        Err(ApiError::NotFound(
            "this server cannot rotate its certificate".into(),
        ))
    }

    /// Replaces the API's serving certificate (a new key, the same hosts,
    /// signed by the API CA); the new one (DER).
    fn rotate_api_cert(&self) -> Result<Vec<u8>, ApiError> {
        Err(ApiError::NotFound(
            "this server cannot rotate its certificate".into(),
        ))
    }

    /// Where the API CA stands.
    fn api_ca(&self) -> Result<ApiCaState, ApiError> {
        Err(ApiError::NotFound(
            "this server cannot rotate its CA".into(),
        ))
    }

    /// Takes `step` of a rotation of the API CA.
    fn rotate_api_ca(
        &self,
        step: relaymesh_node::pki::RotationStep,
    ) -> Result<ApiCaState, ApiError> {
        let _ = step;
        Err(ApiError::NotFound(
            "this server cannot rotate its CA".into(),
        ))
    }

    /// Whether the root ever published its trust (a rotation of the mesh
    /// CA or the token key started): until then nodes report nothing of
    /// it, since each holds the one CA and key it joined with.
    fn trust_published(&self) -> bool {
        false
    }

    /// The mesh CAs the root trusts and the key it signs with now.
    fn mesh_trust(&self) -> Result<relaymesh_protocol::MeshTrust, ApiError> {
        Err(ApiError::NotFound("this server has no mesh CA".into()))
    }

    /// Takes `step` of a rotation of the mesh CA; the trust every node is
    /// told now.
    fn rotate_mesh_ca(
        &self,
        step: relaymesh_node::pki::RotationStep,
    ) -> impl Future<Output = Result<relaymesh_protocol::MeshTrust, ApiError>> + Send {
        let _ = step;
        async { Err(ApiError::NotFound("this server has no mesh CA".into())) }
    }

    /// Takes `step` of a rotation of the token-signing key; the trust every
    /// node is told now.
    fn rotate_token_key(
        &self,
        step: relaymesh_node::pki::RotationStep,
    ) -> impl Future<Output = Result<relaymesh_protocol::MeshTrust, ApiError>> + Send {
        let _ = step;
        async { Err(ApiError::NotFound("this server has no token key".into())) }
    }

    /// The users the root issued certificates to or revoked, by name.
    fn users(&self) -> Result<Vec<UserRecord>, ApiError> {
        Ok(Vec::new())
    }

    /// Records a certificate issued to `record.name`.
    fn record_user(&self, record: UserRecord) -> Result<(), ApiError> {
        let _ = record;
        Ok(())
    }

    /// Revokes user `name`: the API refuses every certificate naming it
    /// from now on, after a restart too, and never issues the name again.
    fn revoke_user(&self, name: &str) -> Result<UserRecord, ApiError> {
        Err(ApiError::NotFound(format!(
            "this server cannot revoke user {name:?}"
        )))
    }

    /// When user `name` was revoked (Unix seconds), if it was. Asked on
    /// every request, so it answers from memory.
    fn user_revoked(&self, name: &str) -> Option<u64> {
        let _ = name;
        None
    }

    /// Moves an agent to another parent relay (see [`relaymesh_protocol::moves`]): the root
    /// issues it a join token under the new parent and sends it the move.
    fn move_node(
        &self,
        request: moves::MoveRequest,
    ) -> impl Future<Output = Result<relaymesh_protocol::Move, ApiError>> + Send {
        let _ = request;
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// Sets and removes labels (and annotations) of cluster
    /// `change.labels.node` at the root,
    /// adding to what the root changed there before; returns all the root
    /// changed there now.
    fn label_cluster(
        &self,
        change: LabelChange,
    ) -> impl Future<Output = Result<relaymesh_protocol::ClusterLabels, ApiError>> + Send {
        let _ = change;
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// The moves the root holds, settled or not.
    fn moves(
        &self,
    ) -> impl Future<Output = Result<Vec<relaymesh_protocol::Move>, ApiError>> + Send {
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// `name`'s link to its parent, asked of that parent through the tree:
    /// measurements stay with the relay that made them (docs/architecture.md,
    /// "Inventory").
    fn link(&self, name: String) -> impl Future<Output = Result<NodeLink, ApiError>> + Send {
        let _ = name;
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// What cluster `name`'s agent reads for `query` (a
    /// [`Query::Object`](relaymesh_protocol::query::Query::Object) or
    /// `Query::Events`), asked through the tree; stale (with its age) when
    /// a relay answered from memory because the agent was out of reach.
    fn observe(
        &self,
        name: String,
        query: relaymesh_protocol::query::Query,
    ) -> impl Future<Output = Result<relaymesh_protocol::query::Observation, ApiError>> + Send {
        let _ = (name, query);
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// How each child of relay `name` is doing with the placement of slice
    /// key `key`, as that relay says (the root answers for itself; deeper
    /// relays are asked through the tree).
    fn subtree(
        &self,
        name: String,
        key: String,
    ) -> impl Future<Output = Result<(Vec<relaymesh_protocol::query::ChildCounts>, u64), ApiError>> + Send
    {
        let _ = (name, key);
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// How relay `name` last split the placement of slice key `key` over
    /// its children, as that relay says (the root answers for itself;
    /// deeper relays are asked through the tree).
    fn split(
        &self,
        name: String,
        key: String,
    ) -> impl Future<Output = Result<crate::placement::RelaySplit, ApiError>> + Send {
        let _ = (name, key);
        async { Err(ApiError::NotFound("this server has no tree".into())) }
    }

    /// Every revocation the root holds.
    fn revocations(
        &self,
    ) -> impl Future<Output = Result<Vec<relaymesh_protocol::Revocation>, ApiError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Stores an opaque bundle at the root under `name` and puts a slice entry
    /// referencing it that targets every node (a debugging / smoke-test path
    /// for bundle distribution).
    fn push_bundle(
        &self,
        name: String,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<BundleId, ApiError>> + Send;

    /// How many API watches may be open at once, per user and in all
    /// (`relay run --max-api-watches-per-user`, `--max-api-watches`).
    fn watch_limits(&self) -> relaymesh_apiserver::WatchLimits {
        watch_limits(&relaymesh_node::limits::Limits::default())
    }

    /// Counts a request the API refused for breaking `limit`, in the root's
    /// own record (`limitRefusals`). Must not block. A backend without
    /// counters ignores it.
    fn count_limit_refusal(&self, limit: Limit) {
        let _ = limit;
    }
}

/// relaymesh's kinds and paths on the Kubernetes API server, for the
/// root: what `backend` knows of the tree, and the API CA that signs user
/// certificates.
pub struct Relaymesh<B> {
    backend: Arc<B>,
    authorities: users::ApiAuthorities,
    rbac: Rbac,
    objects: ObjectStore,
    specs: crate::placement::Specs,
}

impl<B: Backend> Relaymesh<B> {
    /// The extension serving `backend`'s tree; `authorities` sign user
    /// certificates; requests are authorized with the RBAC objects stored
    /// in `objects`; Placements' specs are read through `specs`.
    pub fn new(
        backend: Arc<B>,
        authorities: users::ApiAuthorities,
        objects: ObjectStore,
        specs: crate::placement::Specs,
    ) -> Self {
        Self {
            backend,
            authorities,
            rbac: Rbac::new(objects.clone()),
            objects,
            specs,
        }
    }
}

/// relaymesh's own kinds, each with its schema; `unknown_clusters` says
/// which of the names it is given no cluster of the tree has now, for the
/// Placement's warnings.
impl<B: Backend> Relaymesh<B> {
    /// `GET` (`body` `None`) or `POST` of a `MeshCARotation` or
    /// `TokenKeyRotation`: the object that says where it stands. A finish
    /// is refused while a node is pending, unless forced.
    async fn trust_rotation(
        &self,
        rotated: rotations::Rotated,
        body: Option<&[u8]>,
    ) -> Result<Value, ApiError> {
        let backend = &self.backend;
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

    /// `relayctl explain`: the stored Placement at `key`, with what each
    /// relay says of how it split it.
    async fn explain(&self, objects: &ObjectStore, key: &ObjectKey) -> Result<Value, ApiError> {
        let placement = objects
            .get(key)
            .map_err(|error| ApiError::Internal(error.to_string()))?
            .ok_or_else(|| {
                ApiError::NotFound(format!("placements.relaymesh.dev {:?} not found", key.name))
            })?;
        let nodes = self.backend.inventory().records;
        let invalid =
            |PlacementError::Invalid { field, message }| ApiError::Invalid { field, message };
        let spec = self.specs.read(&placement).map_err(invalid)?;
        let entry = crate::placement::entry_key(&spec.namespace, &spec.name);
        let splits = crate::placement::ask_splits(&nodes, &entry, |relay| {
            self.backend.split(relay, entry.clone())
        })
        .await;
        crate::placement::explain(&spec, &nodes, &splits).map_err(invalid)
    }
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

fn own_resources(
    unknown_clusters: impl Fn(&[&str]) -> Vec<String> + Send + Sync + 'static,
) -> Vec<Resource> {
    let column =
        |name: &str, kind: &str, path: &str| json!({"name": name, "type": kind, "jsonPath": path});
    let connected = column("Connected", "boolean", ".status.connected");
    vec![
        Resource::new(RELAYMESH_GROUP, VERSION, "placements", "Placement", true)
            .short_names(&["pl"])
            // `kubectl get all -n NS` shows what a namespace places next to
            // what it runs.
            .categories_also(&["all"])
            .printer_columns(vec![
                column("Selected", "integer", ".status.clusters.selected"),
                column("Ready", "integer", ".status.clusters.ready"),
            ])
            .schema(schemas::placement())
            .validator(Validator::new(validate_placement))
            .warner(Warner::new(move |_, placement| {
                unknown_cluster_warning(placement, &unknown_clusters)
            })),
        Resource::new(RELAYMESH_GROUP, VERSION, "clusters", "Cluster", false)
            .read_only()
            .schema(schemas::cluster())
            .printer_columns(vec![
                connected.clone(),
                column("Reachable", "boolean", ".status.reachable"),
                column("Relay-Path", "string", ".status.relayPath"),
            ]),
        Resource::new(RELAYMESH_GROUP, VERSION, "relays", "Relay", false)
            .read_only()
            .schema(schemas::node("Relay"))
            .printer_columns(vec![
                connected.clone(),
                column("Parent", "string", ".spec.parent"),
            ]),
        Resource::new(RELAYMESH_GROUP, VERSION, "agents", "Agent", false)
            .read_only()
            .schema(schemas::node("Agent"))
            .printer_columns(vec![connected, column("Parent", "string", ".spec.parent")]),
        Resource::new(
            MULTICLUSTER_GROUP,
            VERSION,
            "clusterprofiles",
            "ClusterProfile",
            false,
        )
        .short_names(&["cp"])
        .read_only()
        .schema(schemas::cluster_profile()),
    ]
}

/// The warning for a Placement whose `spec.clusters.names` name clusters
/// that `unknown_clusters` does not know: it is accepted (the cluster may
/// join later, and is selected then), but a misspelt name would otherwise
/// place nothing without a word.
fn unknown_cluster_warning(
    placement: &Value,
    unknown_clusters: impl Fn(&[&str]) -> Vec<String>,
) -> Vec<String> {
    let names: Vec<&str> = placement
        .pointer("/spec/clusters/names")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let unknown = unknown_clusters(&names);
    if unknown.is_empty() {
        return Vec::new();
    }
    let quoted: Vec<String> = unknown.iter().map(|name| format!("{name:?}")).collect();
    vec![format!(
        "spec.clusters.names: no known cluster is named {}; the placement selects it once it joins",
        quoted.join(", ")
    )]
}

/// Which of `names` no agent in `records` has, in the order given: one
/// pass over the inventory, however many names.
fn unknown_names(records: &[NodeRecord], names: &[&str]) -> Vec<String> {
    let mut found = vec![false; names.len()];
    for record in records.iter().filter(|record| record.role == Role::Agent) {
        for (index, name) in names.iter().enumerate() {
            if record.name == *name {
                found[index] = true;
            }
        }
    }
    let mut unknown: Vec<String> = Vec::new();
    for (name, found) in names.iter().zip(found) {
        if !found && !unknown.iter().any(|seen| seen == name) {
            unknown.push(name.to_string());
        }
    }
    unknown
}

/// A Placement is checked by the code that will place it.
fn validate_placement(namespace: Option<&str>, object: &Value) -> Result<(), ApiError> {
    // The namespace comes from the URL when the object names none.
    let mut placement = object.clone();
    if let (Some(namespace), Some(metadata)) = (namespace, placement.get_mut("metadata")) {
        metadata["namespace"] = Value::from(namespace);
    }
    crate::placement::PlacementSpec::from_object(&placement)
        .map(|_| ())
        .map_err(|PlacementError::Invalid { field, message }| ApiError::Invalid { field, message })
}

/// The endpoints of [`Relaymesh::route`].
mod endpoint {
    pub(super) const JOIN_TOKENS: &str = "jointokens";
    pub(super) const JOIN_TOKEN: &str = "jointoken";
    pub(super) const REVOCATIONS: &str = "revocations";
    pub(super) const MOVES: &str = "moves";
    pub(super) const MESH_CA_ROTATIONS: &str = "meshcarotations";
    pub(super) const API_CERT_ROTATIONS: &str = "apicertificaterotations";
    pub(super) const API_CA_ROTATIONS: &str = "apicarotations";
    pub(super) const TOKEN_KEY_ROTATIONS: &str = "tokenkeyrotations";
    pub(super) const CLUSTER_LABELS: &str = "clusterlabels";
    pub(super) const CORDONS: &str = "cordons";
    pub(super) const USER_CERTIFICATES: &str = "usercertificates";
    pub(super) const USER_CERTIFICATE: &str = "usercertificate";
    pub(super) const BUNDLES: &str = "bundles";
    pub(super) const EXPLAIN: &str = "explain";
    pub(super) const LINK: &str = "link";
    pub(super) const OBJECT: &str = "object";
    pub(super) const EVENTS: &str = "events";
    pub(super) const SUBTREE: &str = "subtree";
}

/// What a request on one of relaymesh's paths asks, for the policy.
fn own(verb: &str, resource: &str, namespace: Option<&str>) -> Attributes {
    Attributes::Resource {
        verb: verb.to_string(),
        group: RELAYMESH_GROUP.to_string(),
        resource: resource.to_string(),
        subresource: None,
        namespace: namespace.map(str::to_string),
        name: None,
    }
}

/// What a request on one named object of relaymesh's asks.
fn own_named(
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: Option<&str>,
    name: &str,
) -> Attributes {
    Attributes::Resource {
        verb: verb.to_string(),
        group: RELAYMESH_GROUP.to_string(),
        resource: resource.to_string(),
        subresource: subresource.map(str::to_string),
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
    }
}

impl<B: Backend> Extension for Relaymesh<B> {
    fn resources(&self) -> Vec<Resource> {
        let backend = Arc::clone(&self.backend);
        own_resources(move |names| unknown_names(&backend.inventory().records, names))
    }

    fn objects(&self, resource: &Resource) -> Vec<Value> {
        let view = match (resource.group(), resource.plural()) {
            (RELAYMESH_GROUP, "clusters") => View::Clusters,
            (RELAYMESH_GROUP, "relays") => View::Relays,
            (RELAYMESH_GROUP, "agents") => View::Agents,
            (MULTICLUSTER_GROUP, "clusterprofiles") => View::ClusterProfiles,
            _ => return Vec::new(),
        };
        inventory::objects(view, &self.backend.inventory())
    }

    fn objects_version(&self, resource: &Resource) -> Option<u64> {
        let views = [RELAYMESH_GROUP, MULTICLUSTER_GROUP];
        views
            .contains(&resource.group())
            .then(|| self.backend.inventory().version)
    }

    fn refuses_user(&self, user: &User) -> Option<String> {
        let revoked_unix = self.backend.user_revoked(&user.name)?;
        Some(users::revoked_message(&user.name, revoked_unix))
    }

    fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), String> {
        self.rbac.authorize(user, attributes)
    }

    fn rbac(&self) -> Option<&Rbac> {
        Some(&self.rbac)
    }

    fn admit_write(
        &self,
        user: &User,
        resource: &Resource,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<(), String> {
        if (resource.group(), resource.plural()) == (RELAYMESH_GROUP, "placements") {
            return policy::admit_placement(&self.rbac, &self.objects, user, namespace, object);
        }
        Ok(())
    }

    fn watch_limits(&self) -> relaymesh_apiserver::WatchLimits {
        self.backend.watch_limits()
    }

    /// relaymesh.dev is relaymesh's alone: a CRD there would sit beside
    /// (or be hidden by) the built-in handlers, and clients would see two
    /// definitions.
    fn reserved_groups(&self) -> Vec<String> {
        vec![RELAYMESH_GROUP.to_string()]
    }

    fn route(&self, method: &Method, path: &str) -> Option<ExtensionRoute> {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        let read = method == Method::GET;
        let route = |endpoint, arguments: Vec<&str>, methods, attributes, body_limit| {
            Some(ExtensionRoute {
                endpoint,
                arguments: arguments.into_iter().map(str::to_string).collect(),
                methods,
                attributes,
                body_limit,
            })
        };
        const GET_POST: &[Method] = &[Method::GET, Method::POST];
        const POST: &[Method] = &[Method::POST];
        const JSON: usize = MAX_JSON_BODY as usize;
        match segments.as_slice() {
            ["apis", RELAYMESH_GROUP, VERSION, "jointokens"] => route(
                endpoint::JOIN_TOKENS,
                vec![],
                GET_POST,
                own(
                    if read { "list" } else { policy::ISSUE },
                    "jointokens",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "jointokens", id] => route(
                endpoint::JOIN_TOKEN,
                vec![id],
                &[Method::DELETE],
                own_named(policy::REVOKE, "jointokens", None, None, id),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "revocations"] => route(
                endpoint::REVOCATIONS,
                vec![],
                GET_POST,
                own(
                    if read { "list" } else { policy::REVOKE },
                    "revocations",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "apicertificaterotations"] => route(
                endpoint::API_CERT_ROTATIONS,
                vec![],
                GET_POST,
                own(
                    if read { "get" } else { policy::ROTATE },
                    "apicertificaterotations",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "tokenkeyrotations"] => route(
                endpoint::TOKEN_KEY_ROTATIONS,
                vec![],
                GET_POST,
                own(
                    if read { "get" } else { policy::ROTATE },
                    "tokenkeyrotations",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "apicarotations"] => route(
                endpoint::API_CA_ROTATIONS,
                vec![],
                GET_POST,
                own(
                    if read { "get" } else { policy::ROTATE },
                    "apicarotations",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "meshcarotations"] => route(
                endpoint::MESH_CA_ROTATIONS,
                vec![],
                GET_POST,
                own(
                    if read { "get" } else { policy::ROTATE },
                    "meshcarotations",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "clusterlabels"] => route(
                endpoint::CLUSTER_LABELS,
                vec![],
                POST,
                own("create", "clusterlabels", None),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "cordons"] => route(
                endpoint::CORDONS,
                vec![],
                POST,
                own("create", "cordons", None),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "moves"] => route(
                endpoint::MOVES,
                vec![],
                GET_POST,
                own(if read { "list" } else { policy::MOVE }, "moves", None),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "usercertificates"] => route(
                endpoint::USER_CERTIFICATES,
                vec![],
                GET_POST,
                own(
                    if read { "list" } else { policy::ISSUE },
                    "usercertificates",
                    None,
                ),
                JSON,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, "usercertificates", name] => route(
                endpoint::USER_CERTIFICATE,
                vec![name],
                &[Method::DELETE],
                own_named(policy::REVOKE, "usercertificates", None, None, name),
                JSON,
            ),
            ["relaymesh", VERSION, "bundles"] => route(
                endpoint::BUNDLES,
                vec![],
                POST,
                own("create", "bundles", None),
                MAX_BUNDLE_LEN as usize,
            ),
            ["apis", RELAYMESH_GROUP, VERSION, plural @ ("agents" | "relays"), name, "link"] => {
                route(
                    endpoint::LINK,
                    vec![plural, name],
                    &[Method::GET],
                    own_named("get", plural, Some("link"), None, name),
                    JSON,
                )
            }
            ["apis", RELAYMESH_GROUP, VERSION, "clusters", name, subresource @ ("object" | "events")] => {
                route(
                    if *subresource == "object" {
                        endpoint::OBJECT
                    } else {
                        endpoint::EVENTS
                    },
                    vec![name],
                    &[Method::GET],
                    own_named("get", "clusters", Some(subresource), None, name),
                    JSON,
                )
            }
            ["apis", RELAYMESH_GROUP, VERSION, "relays", name, "placements", namespace, placement] => {
                route(
                    endpoint::SUBTREE,
                    vec![name, namespace, placement],
                    &[Method::GET],
                    own_named("get", "relays", Some("placements"), None, name),
                    JSON,
                )
            }
            ["relaymesh", VERSION, "explain", namespace, name] => route(
                endpoint::EXPLAIN,
                vec![namespace, name],
                &[Method::GET],
                own_named("get", "placements", None, Some(namespace), name),
                JSON,
            ),
            _ => None,
        }
    }

    async fn call(&self, call: Call) -> Result<Response<ApiBody>, ApiError> {
        let backend = &self.backend;
        let created = |object: &Value| json_reply(StatusCode::CREATED, object);
        let argument = |index: usize| call.route.arguments.get(index).cloned().unwrap_or_default();
        match (call.route.endpoint, call.method == Method::GET) {
            (endpoint::JOIN_TOKENS, true) => {
                let list = revocations::token_list(
                    &backend.tokens()?,
                    &backend.inventory().records,
                    unix_now(),
                );
                json_reply(StatusCode::OK, &list)
            }
            (endpoint::JOIN_TOKENS, false) => {
                let token = tokens::JoinToken::parse(&call.body)?;
                let issued = backend.create_token(token.request.clone())?;
                // Before the token is handed out: the relays it names must
                // hold the grant by the time the node fails over.
                let candidates = (!issued.candidates.is_empty()).then(|| issued.candidates.clone());
                backend
                    .grant_parents(token.request.name.clone(), candidates)
                    .await?;
                created(&token.reply(&issued))
            }
            (endpoint::JOIN_TOKEN, _) => {
                let id = revocations::parse_token_id(&argument(0))?;
                let record = backend.revoke_token(id).await?;
                let object =
                    revocations::token_object(&record, &backend.inventory().records, unix_now());
                json_reply(StatusCode::OK, &object)
            }
            (endpoint::REVOCATIONS, true) => {
                let list = revocations::revocation_list(&backend.revocations().await?);
                json_reply(StatusCode::OK, &list)
            }
            (endpoint::REVOCATIONS, false) => {
                let node = revocations::parse_request(&call.body)?;
                let revoked = backend.revoke_node(node).await?;
                created(&revocations::node_revoked_object(&revoked))
            }
            (endpoint::API_CERT_ROTATIONS, true) => json_reply(
                StatusCode::OK,
                &rotations::api_cert_object(&backend.api_cert()?),
            ),
            (endpoint::API_CERT_ROTATIONS, false) => {
                rotations::parse_api_cert_request(&call.body)?;
                created(&rotations::api_cert_object(&backend.rotate_api_cert()?))
            }
            (endpoint::API_CA_ROTATIONS, true) => json_reply(
                StatusCode::OK,
                &rotations::api_ca_object(&backend.api_ca()?),
            ),
            (endpoint::API_CA_ROTATIONS, false) => {
                let step = rotations::parse_api_ca_request(&call.body)?;
                created(&rotations::api_ca_object(&backend.rotate_api_ca(step)?))
            }
            (endpoint::MESH_CA_ROTATIONS | endpoint::TOKEN_KEY_ROTATIONS, read) => {
                let rotated = if call.route.endpoint == endpoint::MESH_CA_ROTATIONS {
                    rotations::Rotated::MeshCa
                } else {
                    rotations::Rotated::TokenKey
                };
                let body = (!read).then_some(call.body.as_ref());
                let object = self.trust_rotation(rotated, body).await?;
                match read {
                    true => json_reply(StatusCode::OK, &object),
                    false => created(&object),
                }
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
            (endpoint::USER_CERTIFICATES, false) => {
                let revoked = |name: &str| backend.user_revoked(name);
                let (object, record) = users::issue(
                    &self.authorities.signing(),
                    &self.authorities.trusted_pem(),
                    &call.body,
                    revoked,
                )?;
                backend.record_user(record)?;
                created(&object)
            }
            (endpoint::USER_CERTIFICATE, _) => {
                let name = argument(0);
                relaymesh_protocol::name::validate(&name).map_err(|error| {
                    ApiError::NotFound(format!("user {name:?} not found: {error}"))
                })?;
                if name == call.user.name {
                    return Err(ApiError::Invalid {
                        field: "metadata.name".into(),
                        message: format!(
                            "{name:?} is the user asking: an admin cannot revoke itself"
                        ),
                    });
                }
                let record = backend.revoke_user(&name)?;
                json_reply(StatusCode::OK, &users::user_object(&record))
            }
            (endpoint::BUNDLES, _) => {
                let query = Query::parse(call.query.as_deref())?;
                let name = query
                    .get("name")
                    .ok_or_else(|| {
                        ApiError::BadRequest("the query parameter name is required".into())
                    })?
                    .to_string();
                relaymesh_protocol::name::validate(&name).map_err(|error| ApiError::Invalid {
                    field: "name".into(),
                    message: format!("Invalid value: {name:?}: {error}"),
                })?;
                let size = call.body.len();
                let id = backend.push_bundle(name.clone(), call.body).await?;
                created(&json!({"name": name, "id": id.to_hex(), "size": size}))
            }
            (endpoint::EXPLAIN, _) => {
                let key = ObjectKey::new(
                    RELAYMESH_GROUP,
                    "placements",
                    Some(&argument(0)),
                    &argument(1),
                );
                json_reply(StatusCode::OK, &self.explain(&call.objects, &key).await?)
            }
            (endpoint::LINK, _) => {
                let (plural, name) = (argument(0), argument(1));
                let role = if plural == "agents" {
                    Role::Agent
                } else {
                    Role::Relay
                };
                known_node(&backend.inventory(), &name, role, &plural)?;
                let link = backend.link(name).await?;
                json_reply(StatusCode::OK, &nodes::link_object(&link))
            }
            (endpoint::OBJECT | endpoint::EVENTS, _) => {
                let cluster = argument(0);
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
            (endpoint::SUBTREE, _) => {
                let relay = argument(0);
                let (namespace, placement) = (argument(1), argument(2));
                known_node(&backend.inventory(), &relay, Role::Relay, "relays")?;
                let key = crate::placement::entry_key(&namespace, &placement);
                let (children, more) = backend.subtree(relay.clone(), key).await?;
                json_reply(
                    StatusCode::OK,
                    &nodes::subtree_object(&relay, &namespace, &placement, &children, more),
                )
            }
            (other, _) => Err(ApiError::NotFound(format!("nothing serves {other}"))),
        }
    }

    fn count_limit_refusal(&self, limit: ApiLimit) {
        let limit = match limit {
            ApiLimit::RequestBody => Limit::ApiRequestBody,
            ApiLimit::JsonPatch => Limit::ApiJsonPatch,
            ApiLimit::Watches => Limit::ApiWatches,
            ApiLimit::WatchesPerUser => Limit::ApiWatchesPerUser,
            ApiLimit::WatchBuffer => Limit::ApiWatchBuffer,
            _ => Limit::ApiUnpagedList,
        };
        self.backend.count_limit_refusal(limit);
    }
}

/// Serves the root's API on `listener` until `shutdown` completes, then lets
/// open requests finish for a few seconds.
///
/// Fails only if `tls` is unusable; errors on single connections are logged.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    tls: ApiTls,
    backend: Arc<B>,
    objects: ObjectStore,
    specs: crate::placement::Specs,
    audit: Option<AuditLog>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let written = policy::bootstrap(&objects).map_err(|error| {
        ApiError::Internal(format!("cannot write the default RBAC policy: {error}"))
    })?;
    if !written.is_empty() {
        tracing::info!(objects = ?written, "default RBAC policy written where missing");
    }
    let extension = Arc::new(Relaymesh::new(
        backend,
        tls.authorities,
        objects.clone(),
        specs,
    ));
    relaymesh_apiserver::serve(listener, tls.server, extension, objects, audit, shutdown).await
}

/// The watch limits of the root's API, from the limits `relay run` was given.
pub fn watch_limits(limits: &relaymesh_node::limits::Limits) -> relaymesh_apiserver::WatchLimits {
    relaymesh_apiserver::WatchLimits {
        per_user: limits.max_api_watches_per_user,
        total: limits.max_api_watches,
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend with an empty tree that refuses everything.
    struct NoTree;

    impl Backend for NoTree {
        fn inventory(&self) -> Inventory {
            Inventory::default()
        }

        fn create_token(&self, _request: TokenRequest) -> Result<IssuedToken, ApiError> {
            Err(ApiError::Forbidden("no tokens here".into()))
        }

        async fn push_bundle(&self, _name: String, _bytes: Vec<u8>) -> Result<BundleId, ApiError> {
            Err(ApiError::Forbidden("no bundles here".into()))
        }
    }

    fn extension() -> (tempfile::TempDir, Relaymesh<NoTree>) {
        let mesh = relaymesh_node::pki::create_mesh("root", &["127.0.0.1".into()]).expect("a mesh");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = sled::open(dir.path()).expect("sled opens");
        let objects = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
        let authorities = users::ApiAuthorities::new(
            mesh.api_authority.clone(),
            std::slice::from_ref(&mesh.api_authority.cert_der),
        );
        let extension = Relaymesh::new(Arc::new(NoTree), authorities, objects, Default::default());
        (dir, extension)
    }

    #[test]
    fn own_paths_route_with_their_verbs_and_limits() {
        let (_dir, extension) = extension();
        let route = |method: Method, path: &str| extension.route(&method, path);
        let tokens = "/apis/relaymesh.dev/v1alpha1/jointokens";
        let listed = route(Method::GET, tokens).expect("a route");
        assert_eq!(listed.attributes, own("list", "jointokens", None));
        let created = route(Method::POST, tokens).expect("a route");
        assert_eq!(created.attributes, own(ISSUE, "jointokens", None));
        assert_eq!(created.methods, [Method::GET, Method::POST]);

        let revoked = route(Method::DELETE, &format!("{tokens}/00ff")).expect("a route");
        assert_eq!(revoked.arguments, ["00ff"]);
        assert_eq!(
            revoked.attributes,
            own_named(REVOKE, "jointokens", None, None, "00ff")
        );
        // kubectl and client-go send DeleteOptions with a delete.
        assert_eq!(revoked.body_limit, MAX_JSON_BODY as usize);

        let bundles = route(Method::POST, "/relaymesh/v1alpha1/bundles").expect("a route");
        assert_eq!(bundles.body_limit, MAX_BUNDLE_LEN as usize);
        let explain = route(Method::GET, "/relaymesh/v1alpha1/explain/shop/web").expect("a route");
        assert_eq!(explain.arguments, ["shop", "web"]);
        assert_eq!(
            explain.attributes,
            own_named("get", "placements", None, Some("shop"), "web")
        );

        let link = route(
            Method::GET,
            "/apis/relaymesh.dev/v1alpha1/agents/edge-7/link",
        );
        let link = link.expect("a route");
        assert_eq!(link.arguments, ["agents", "edge-7"]);
        assert_eq!(link.methods, [Method::GET]);
        let Attributes::Resource { subresource, .. } = &link.attributes else {
            panic!("{:?}", link.attributes);
        };
        assert_eq!(subresource.as_deref(), Some("link"));
        let clusters = "/apis/relaymesh.dev/v1alpha1/clusters/edge-7/link";
        assert!(route(Method::GET, clusters).is_none(), "not a node kind");

        for subresource in ["object", "events"] {
            let path = format!("/apis/relaymesh.dev/v1alpha1/clusters/edge-7/{subresource}");
            let observed = route(Method::GET, &path).expect("a route");
            assert_eq!(observed.arguments, ["edge-7"]);
            assert_eq!(observed.methods, [Method::GET]);
            let Attributes::Resource {
                verb,
                resource,
                subresource: asked,
                ..
            } = &observed.attributes
            else {
                panic!("{:?}", observed.attributes);
            };
            assert_eq!((verb.as_str(), resource.as_str()), ("get", "clusters"));
            assert_eq!(asked.as_deref(), Some(subresource));
        }

        for kubernetes in [
            "/api/v1/namespaces",
            "/apis/relaymesh.dev/v1alpha1/placements",
        ] {
            assert!(route(Method::GET, kubernetes).is_none(), "{kubernetes}");
        }
    }

    #[test]
    fn placements_naming_unknown_clusters_are_warned_of() {
        let record = |name: &str, role: Role| NodeRecord {
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
            name: name.into(),
            role,
            parent: Some("root".into()),
            labels: Default::default(),
            addresses: vec![],
            version: "0.1.0".into(),
            link: None,
        };
        let records = [record("edge-1", Role::Agent), record("eu", Role::Relay)];
        let unknown = |names: &[&str]| unknown_names(&records, names);
        let placement = |names: Value| json!({"spec": {"clusters": {"names": names}}});
        assert!(unknown_cluster_warning(&placement(json!(["edge-1"])), unknown).is_empty());
        assert!(unknown_cluster_warning(&json!({"spec": {}}), unknown).is_empty());
        // A relay is not a cluster; a name given twice is named once.
        let warned =
            unknown_cluster_warning(&placement(json!(["edge-1", "eu", "edge-9", "eu"])), unknown);
        assert_eq!(
            warned,
            ["spec.clusters.names: no known cluster is named \"eu\", \"edge-9\"; the placement selects it once it joins"]
        );
    }

    #[test]
    fn views_come_from_the_inventory_and_placements_are_checked() {
        let (_dir, extension) = extension();
        let resources = extension.resources();
        let clusters = resources
            .iter()
            .find(|resource| resource.plural() == "clusters")
            .expect("clusters");
        assert!(clusters.is_view());
        assert!(extension.objects(clusters).is_empty());
        let mut placement = json!({
            "metadata": {"name": "p"},
            "spec": {
                "workloads": [{"kind": "ConfigMap"}],
                "clusters": {"names": ["edge-1"]},
                "maxClusters": 2,
            },
        });
        assert!(validate_placement(Some("shop"), &placement).is_ok());
        placement["spec"]["maxClusters"] = json!("two");
        let refused = validate_placement(Some("shop"), &placement);
        assert!(
            matches!(&refused, Err(ApiError::Invalid { field, .. }) if field == "spec.maxClusters"),
            "{refused:?}"
        );
        // A status rule's CEL is compiled on every write: a 422 that names
        // the field, the rule and the position.
        placement["spec"]["maxClusters"] = json!(2);
        placement["spec"]["statusRules"] =
            json!([{"name": "ready", "aggregate": "sum", "select": "object.status.("}]);
        let refused = validate_placement(Some("shop"), &placement);
        assert!(
            matches!(&refused, Err(ApiError::Invalid { field, message })
                if field == "spec.statusRules[0].select"
                    && message.starts_with("rule \"ready\": Syntax error at 1:")),
            "{refused:?}"
        );
    }
}
