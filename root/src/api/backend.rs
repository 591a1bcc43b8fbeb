//! The [`Backend`] trait: everything relaymesh-specific the API serves,
//! which the daemon implements. The API owns no state of the tree; keeping
//! the trait apart from the handlers lets the daemon and the tests see
//! just what they must provide.

use std::future::Future;

use relaymesh_apiserver::ApiError;
use relaymesh_node::daemon::root_services::Inventory;
use relaymesh_node::limits::Limit;
use relaymesh_node::store::{TokenRecord, UserRecord};
use relaymesh_protocol::BundleId;

use super::cluster_labels::LabelChange;
use super::limits::watch_limits;
use super::moves::MoveRequest;
use super::types::{ApiCaState, IssuedToken, NodeLink, NodeRevoked, TokenRequest};

/// What the API serves from: the daemon's view of the tree and its stores.
///
/// The synchronous methods are called from request handlers on the async
/// runtime, so they must answer from memory and not block.
pub trait Backend: Send + Sync + 'static {
    /// The tree as the root knows it.
    fn inventory(&self) -> Inventory;

    /// Why this replica of a replicated root answers nothing about the
    /// tree (it is a standby; the leader does), or `None` when it does.
    fn standby(&self) -> Option<String> {
        None
    }

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
        request: MoveRequest,
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
