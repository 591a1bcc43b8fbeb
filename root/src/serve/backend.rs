//! The root's API backend: what the HTTPS API asks of the running relay,
//! answered from the node's inventory and store or by a request to its loop.

use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::query::{Answer, ChildCounts, Observation, Query};
use relaymesh_protocol::{
    BundleId, ClusterLabels, ErrorCode, Move, MoveState, NodeRecord, Refusal, Revocation, Role,
};
use tokio::sync::oneshot;

use super::api_cert::ApiCert;
use crate::api::{
    self, ApiError, Backend, IssuedToken, MoveRequest, NodeLink, NodeRevoked, TokenRequest,
};
use crate::state::RootState;
use relaymesh_node::daemon::root_services::{RootHandle, RootRequest};
use relaymesh_node::daemon::unix_ms;
use relaymesh_node::limits::Limit;
use relaymesh_node::store::TokenRecord;
use relaymesh_node::{pki, token};

/// The relays between the root (`root`, not included) and `node` (not
/// included), top-down, from the inventory's parent links.
fn ancestors(
    nodes: &[Arc<NodeRecord>],
    node: &NodeRecord,
    root: &str,
) -> Result<Vec<String>, ApiError> {
    let mut path = Vec::new();
    let mut parent = node.parent.as_deref();
    while let Some(name) = parent {
        if name == root {
            path.reverse();
            return Ok(path);
        }
        if path.len() > pki::MAX_INTERMEDIATES {
            break;
        }
        path.push(name.to_string());
        parent = nodes
            .iter()
            .find(|record| record.name == name)
            .and_then(|record| record.parent.as_deref());
    }
    Err(ApiError::Invalid {
        field: "spec.parent".into(),
        message: format!(
            "the root does not know the path to relay {:?} yet; try again when its parents have reported",
            node.name
        ),
    })
}

pub(super) struct RootBackend {
    node: RootHandle,
    /// The root's own state (users, issued tokens, issuer keys, keys).
    state: Arc<dyn RootState>,
    watches: relaymesh_apiserver::WatchLimits,
    /// The users an admin revoked, with when (Unix seconds); the store
    /// holds the same.
    revoked_users: std::sync::RwLock<std::collections::BTreeMap<String, u64>>,
    /// The API's serving certificate.
    api_cert: Arc<ApiCert>,
    /// Why this replica answers nothing about the tree, if it is a standby.
    standby: Option<String>,
}

impl RootBackend {
    pub(super) fn new(
        node: RootHandle,
        state: Arc<dyn RootState>,
        watches: relaymesh_apiserver::WatchLimits,
        revoked_users: std::collections::BTreeMap<String, u64>,
        api_cert: Arc<ApiCert>,
        standby: Option<String>,
    ) -> Self {
        Self {
            node,
            state,
            watches,
            revoked_users: std::sync::RwLock::new(revoked_users),
            api_cert,
            standby,
        }
    }

    /// Hands a revocation to the loop, which signs it and sends it down.
    async fn revoke(&self, revocation: Revocation) -> Result<(), ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::Revoke { revocation, reply }, answer)
            .await?
            .map_err(ApiError::Internal)
    }

    /// Sends `event` to the loop and waits for its answer.
    async fn ask<T>(
        &self,
        event: RootRequest,
        answer: oneshot::Receiver<T>,
    ) -> Result<T, ApiError> {
        self.node
            .send(event)
            .await
            .map_err(|_| ApiError::Unavailable("the relay is stopping".into()))?;
        tokio::time::timeout(Duration::from_secs(30), answer)
            .await
            .map_err(|_| ApiError::Unavailable("the relay did not answer in time".into()))?
            .map_err(|_| ApiError::Unavailable("the relay is stopping".into()))
    }

    /// Relay `name` as a token names it: where to dial it and the relays
    /// between the root and it. `field` is what a refusal names.
    fn token_parent(
        &self,
        nodes: &[Arc<NodeRecord>],
        name: &str,
        field: &str,
    ) -> Result<token::TokenParent, ApiError> {
        let identity = self.node.identity().get();
        let (addresses, issuers, issuer_key) = if name == identity.name {
            // The key the root signs with now (the new mesh CA's during a
            // rotation), which signed the certificate it serves.
            let signing = identity
                .issuer
                .as_ref()
                .map_or(&identity.ca_cert_der, |issuer| &issuer.cert_der);
            let ca_key = pki::public_key_sha256(signing)
                .map_err(|error| ApiError::Internal(error.to_string()))?;
            (self.node.config().advertise.clone(), Vec::new(), ca_key)
        } else {
            let record = nodes
                .iter()
                .find(|node| node.name == name)
                .ok_or_else(|| ApiError::NotFound(format!("relay {name:?} is not in the tree")))?;
            if record.role != Role::Relay {
                return Err(ApiError::Invalid {
                    field: field.into(),
                    message: format!("{name:?} is an {}, not a relay", record.role),
                });
            }
            // Its key as the root recorded it, never a name: see
            // `store::issuer_keys`.
            let issuer_key = self
                .state
                .issuer_key(name)
                .map_err(|error| ApiError::Internal(error.to_string()))?
                .ok_or_else(|| ApiError::Invalid {
                    field: field.into(),
                    message: format!(
                        "relay {name:?} has not reported its issuer key to the root yet; retry once it is connected"
                    ),
                })?;
            (
                record.addresses.clone(),
                ancestors(nodes, record, &identity.name)?,
                issuer_key,
            )
        };
        if addresses.is_empty() {
            return Err(ApiError::Invalid {
                field: field.into(),
                message: format!("relay {name:?} advertises no address to dial"),
            });
        }
        Ok(token::TokenParent {
            name: name.to_string(),
            addresses,
            issuers,
            issuer_key,
        })
    }
}

fn root_is_no_candidate(field: &str) -> ApiError {
    ApiError::Invalid {
        field: field.into(),
        message: "the root cannot be one of several candidate parents (its children's \
                  certificates come from the mesh CA itself); name relays below it"
            .into(),
    }
}

/// `name` and every node below it, from the inventory's parent links.
fn subtree(nodes: &[Arc<NodeRecord>], name: &str) -> Vec<String> {
    let mut names = vec![name.to_string()];
    let mut index = 0;
    while index < names.len() {
        let parent = names[index].clone();
        for node in nodes {
            if node.parent.as_deref() == Some(parent.as_str()) && !names.contains(&node.name) {
                names.push(node.name.clone());
            }
        }
        index += 1;
    }
    names
}

impl Backend for RootBackend {
    fn standby(&self) -> Option<String> {
        self.standby.clone()
    }

    fn inventory(&self) -> api::Inventory {
        self.node.inventory()
    }

    fn count_limit_refusal(&self, limit: Limit) {
        self.node.refusals().count(limit);
    }

    fn watch_limits(&self) -> relaymesh_apiserver::WatchLimits {
        self.watches
    }

    fn create_token(&self, request: TokenRequest) -> Result<IssuedToken, ApiError> {
        let identity = self.node.identity().get();
        let signing_key = identity
            .token_signing_key
            .as_deref()
            .ok_or_else(|| ApiError::Forbidden("only the root issues join tokens".into()))?;
        let parent = request.parent.unwrap_or_else(|| identity.name.clone());
        let nodes = self.inventory().records;
        let first = self.token_parent(&nodes, &parent, "spec.parent")?;
        let mut candidates = Vec::new();
        if !request.candidates.is_empty() {
            if parent == identity.name {
                return Err(root_is_no_candidate("spec.parent"));
            }
            candidates.push(first.clone());
            for (index, name) in request.candidates.iter().enumerate() {
                let field = format!("spec.candidates[{index}]");
                if *name == identity.name {
                    return Err(root_is_no_candidate(&field));
                }
                candidates.push(self.token_parent(&nodes, name, &field)?);
            }
            if request.role == Role::Relay {
                // A relay that fails over has its issuer signed by the
                // candidate it reaches: under each, chains must stay short
                // enough to verify.
                for (index, candidate) in candidates.iter().enumerate() {
                    let depth = candidate.issuers.len() + 2;
                    if depth > pki::MAX_INTERMEDIATES {
                        return Err(ApiError::Invalid {
                            field: if index == 0 {
                                "spec.parent".into()
                            } else {
                                format!("spec.candidates[{}]", index - 1)
                            },
                            message: format!(
                                "a relay under {:?} would be {depth} issuers deep, more than the {} that certificate verification accepts",
                                candidate.name,
                                pki::MAX_INTERMEDIATES
                            ),
                        });
                    }
                }
            }
        }
        let now_unix = unix_ms() / 1000;
        let mut claims = token::new_claims(
            &request.name,
            request.role,
            first,
            pki::sha256(&identity.ca_cert_der),
            request.ttl,
            now_unix,
        );
        let candidates: Vec<relaymesh_protocol::CandidateParent> = candidates
            .into_iter()
            .map(|candidate| relaymesh_protocol::CandidateParent {
                name: candidate.name,
                addresses: candidate.addresses,
                issuers: candidate.issuers,
                issuer_key: candidate.issuer_key,
            })
            .collect();
        claims.candidates = candidates.iter().skip(1).cloned().collect();
        let issued = token::issue(signing_key, &claims)
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        if request.role == Role::Relay {
            // A relay that joins again makes a new issuer key.
            self.state
                .expect_new_issuer_key(&request.name, claims.not_after_unix)
                .map_err(|error| ApiError::Internal(error.to_string()))?;
        }
        // Remembered before it is handed out, so every token an admin holds
        // can be listed and revoked.
        self.state
            .record_issued_token(
                &TokenRecord {
                    id: claims.id,
                    name: request.name.clone(),
                    role: request.role,
                    parent: parent.clone(),
                    issued_unix: now_unix,
                    not_after_unix: claims.not_after_unix,
                    revoked: false,
                },
                now_unix,
            )
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        tracing::info!(name = %request.name, role = %request.role, %parent, ttl = ?request.ttl, "issued a join token");
        Ok(IssuedToken {
            token: issued,
            expires_unix: claims.not_after_unix,
            candidates,
        })
    }

    async fn grant_parents(
        &self,
        node: String,
        candidates: Option<Vec<relaymesh_protocol::CandidateParent>>,
    ) -> Result<(), ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(
            RootRequest::GrantParents {
                node,
                candidates,
                reply,
            },
            answer,
        )
        .await?
        .map_err(ApiError::Internal)
    }

    fn users(&self) -> Result<Vec<relaymesh_node::store::UserRecord>, ApiError> {
        self.state
            .users()
            .map_err(|error| ApiError::Internal(error.to_string()))
    }

    fn record_user(&self, record: relaymesh_node::store::UserRecord) -> Result<(), ApiError> {
        self.state
            .record_user(&record)
            .map_err(|error| ApiError::Internal(error.to_string()))
    }

    fn revoke_user(&self, name: &str) -> Result<relaymesh_node::store::UserRecord, ApiError> {
        let record = self
            .state
            .revoke_user(name, unix_ms() / 1000)
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        if let Some(at) = record.revoked_unix {
            // Stored first: a refusal never outlives a crash unrecorded.
            self.revoked_users
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(record.name.clone(), at);
        }
        tracing::warn!(user = %name, "revoked a user");
        Ok(record)
    }

    fn user_revoked(&self, name: &str) -> Option<u64> {
        self.revoked_users
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .copied()
    }

    fn tokens(&self) -> Result<Vec<TokenRecord>, ApiError> {
        self.state
            .issued_tokens()
            .map_err(|error| ApiError::Internal(error.to_string()))
    }

    async fn revoke_token(&self, id: [u8; 16]) -> Result<TokenRecord, ApiError> {
        let record = self
            .state
            .revoke_issued_token(&id)
            .map_err(|error| ApiError::Internal(error.to_string()))?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "jointokens.relaymesh.dev {:?} not found",
                    relaymesh_protocol::revocation::hex(&id)
                ))
            })?;
        self.revoke(Revocation::Token {
            id,
            name: record.name.clone(),
            not_after_unix: record.not_after_unix,
        })
        .await?;
        tracing::warn!(token = %relaymesh_protocol::revocation::hex(&id), name = %record.name, "revoked a join token");
        Ok(record)
    }

    fn api_cert(&self) -> Result<Vec<u8>, ApiError> {
        Ok(self.api_cert.leaf())
    }

    fn rotate_api_cert(&self) -> Result<Vec<u8>, ApiError> {
        self.api_cert.rotate().map_err(ApiError::Internal)
    }

    fn api_ca(&self) -> Result<crate::api::ApiCaState, ApiError> {
        self.api_cert.ca_state().map_err(ApiError::Internal)
    }

    fn rotate_api_ca(&self, step: pki::RotationStep) -> Result<crate::api::ApiCaState, ApiError> {
        match step {
            pki::RotationStep::Start => self.api_cert.start_ca_rotation(),
            pki::RotationStep::Finish => self.api_cert.finish_ca_rotation(),
        }
        .map_err(ApiError::Conflict)
    }

    fn trust_published(&self) -> bool {
        self.node.trust_published()
    }

    fn mesh_trust(&self) -> Result<relaymesh_protocol::MeshTrust, ApiError> {
        let identity = self.node.identity().get();
        let next = self
            .state
            .next_token_key()
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        pki::current_trust(
            &identity,
            next.as_ref().map(|(_, public)| public.as_slice()),
        )
        .map_err(|error| ApiError::Internal(error.to_string()))
    }

    async fn rotate_token_key(
        &self,
        step: pki::RotationStep,
    ) -> Result<relaymesh_protocol::MeshTrust, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::RotateTokenKey { step, reply }, answer)
            .await?
            .map_err(ApiError::Conflict)
    }

    async fn rotate_mesh_ca(
        &self,
        step: pki::RotationStep,
    ) -> Result<relaymesh_protocol::MeshTrust, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::RotateMeshCa { step, reply }, answer)
            .await?
            .map_err(ApiError::Conflict)
    }

    async fn revoke_node(&self, name: String) -> Result<NodeRevoked, ApiError> {
        if name == self.node.identity().get().name {
            return Err(ApiError::Invalid {
                field: "spec.node".into(),
                message: format!("{name:?} is the root, which cannot be revoked"),
            });
        }
        let nodes = self.inventory().records;
        if !nodes.iter().any(|node| node.name == name) {
            return Err(ApiError::NotFound(format!(
                "node {name:?} is not in the tree"
            )));
        }
        let removed = subtree(&nodes, &name);
        let now_unix = unix_ms() / 1000;
        // The node's outstanding tokens go with it: a stolen one must not
        // bring it back.
        let mut tokens = Vec::new();
        for record in self.tokens()? {
            if record.name == name && !record.revoked && record.not_after_unix > now_unix {
                self.revoke_token(record.id).await?;
                tokens.push(record.id);
            }
        }
        self.revoke(Revocation::Node {
            name: name.clone(),
            at_unix: now_unix,
        })
        .await?;
        tracing::warn!(node = %name, ?removed, tokens = tokens.len(), "revoked a node");
        Ok(NodeRevoked {
            name,
            at_unix: now_unix,
            tokens,
            removed,
        })
    }

    async fn link(&self, name: String) -> Result<NodeLink, ApiError> {
        let (reply, answer) = oneshot::channel();
        let query = RootRequest::Query {
            node: name.clone(),
            query: Query::Link,
            reply,
        };
        match self.ask(query, answer).await? {
            Answer::Link { parent, status } => Ok(NodeLink {
                name,
                parent,
                status,
            }),
            Answer::Failed(refusal) => Err(refused(refusal)),
            other => Err(unexpected(&other)),
        }
    }

    async fn observe(&self, cluster: String, query: Query) -> Result<Observation, ApiError> {
        let (reply, answer) = oneshot::channel();
        let events = matches!(query, Query::Events { .. });
        let asked = RootRequest::Query {
            node: cluster,
            query,
            reply,
        };
        match self.ask(asked, answer).await? {
            Answer::Object(observation) if !events => Ok(observation),
            Answer::Events(observation) if events => Ok(observation),
            Answer::Failed(refusal) => Err(refused(refusal)),
            other => Err(unexpected(&other)),
        }
    }

    async fn subtree(
        &self,
        name: String,
        key: String,
    ) -> Result<(Vec<ChildCounts>, u64), ApiError> {
        let (reply, answer) = oneshot::channel();
        let asked = RootRequest::Query {
            node: name,
            query: Query::Placement { key },
            reply,
        };
        match self.ask(asked, answer).await? {
            Answer::Placement { children, more } => Ok((children, more)),
            Answer::Failed(refusal) => Err(refused(refusal)),
            other => Err(unexpected(&other)),
        }
    }

    async fn split(
        &self,
        name: String,
        key: String,
    ) -> Result<crate::placement::RelaySplit, ApiError> {
        let (reply, answer) = oneshot::channel();
        let asked = RootRequest::Query {
            node: name,
            query: Query::Split { key },
            reply,
        };
        match self.ask(asked, answer).await? {
            Answer::Split {
                quota,
                children,
                more,
            } => Ok(crate::placement::RelaySplit {
                quota,
                children,
                more,
            }),
            Answer::Failed(refusal) => Err(refused(refusal)),
            other => Err(unexpected(&other)),
        }
    }

    async fn move_node(&self, request: MoveRequest) -> Result<Move, ApiError> {
        let MoveRequest { node, to, ttl } = request;
        let (from, role) = crate::api::check_move(&self.inventory().records, &node, &to)?;
        let issued = self.create_token(TokenRequest {
            name: node.clone(),
            role,
            parent: Some(to.clone()),
            candidates: Vec::new(),
            ttl,
        })?;
        let moved = Move {
            node: node.clone(),
            from: from.clone(),
            to: to.clone(),
            token: issued.token,
            at_unix_ms: unix_ms(),
            state: MoveState::Moving,
        };
        let (reply, answer) = oneshot::channel();
        self.ask(
            RootRequest::OrderMove {
                moved: moved.clone(),
                reply,
            },
            answer,
        )
        .await?
        .map_err(ApiError::Internal)?;
        tracing::info!(%node, %from, %to, "ordered a move");
        Ok(moved)
    }

    async fn label_cluster(
        &self,
        change: crate::api::LabelChange,
    ) -> Result<ClusterLabels, ApiError> {
        let node = change.labels.node.clone();
        let nodes = self.inventory().records;
        let record = nodes
            .iter()
            .find(|record| record.name == node)
            .ok_or_else(|| ApiError::NotFound(format!("cluster {node:?} is not in the tree")))?;
        if record.role != Role::Agent {
            return Err(ApiError::Invalid {
                field: "spec.cluster".into(),
                message: format!("{node:?} is a {}, not a cluster", record.role),
            });
        }
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::LabelCluster { change, reply }, answer)
            .await?
            .map_err(|error| match error {
                relaymesh_node::daemon::labels::LabelError::TooLong(error) => ApiError::Invalid {
                    field: "spec.annotations".into(),
                    message: error.to_string(),
                },
                relaymesh_node::daemon::labels::LabelError::Unsigned(message) => {
                    ApiError::Internal(message)
                }
            })
    }

    async fn moves(&self) -> Result<Vec<Move>, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::Moves { reply }, answer).await
    }

    async fn revocations(&self) -> Result<Vec<Revocation>, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::Revocations { reply }, answer).await
    }

    async fn push_bundle(&self, name: String, bytes: Vec<u8>) -> Result<BundleId, ApiError> {
        let id = BundleId::of(&bytes);
        let store = self.node.store().clone();
        tokio::task::spawn_blocking(move || store.put_bundle(&id, &bytes))
            .await
            .map_err(|error| ApiError::Internal(error.to_string()))?
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        let (reply, answer) = oneshot::channel();
        self.ask(RootRequest::PublishBundle { name, id, reply }, answer)
            .await?;
        Ok(id)
    }
}

/// The API error for a refusal that came back up the tree instead of an
/// answer.
fn refused(refusal: Refusal) -> ApiError {
    match refusal.code {
        ErrorCode::NotFound => ApiError::NotFound(refusal.message),
        ErrorCode::Unavailable => ApiError::Unavailable(refusal.message),
        ErrorCode::Forbidden => ApiError::Forbidden(refusal.message),
        _ => ApiError::Internal(refusal.to_string()),
    }
}

/// The API error for an answer of another kind than asked (the core
/// checks this; a mismatch here is a bug).
fn unexpected(answer: &Answer) -> ApiError {
    ApiError::Internal(format!("the tree answered another question: {answer:?}"))
}
