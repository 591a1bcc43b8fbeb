//! The root relay's HTTPS API: a Kubernetes-compatible server that `kubectl`
//! and `relayctl` talk to.
//!
//! What it does now: `/version` and the health endpoints, the read-only
//! `Relay` and `Agent` views of the tree, join token issuance, and a raw
//! bundle push for smoke tests. What it will do (see DESIGN.md): discovery,
//! unstructured storage of any kind, watch, patch, CRDs. The router (the
//! `routes` module) is a table of Kubernetes-shaped paths so those slot in.
//!
//! Where the work is split:
//! * [`serve`] (here) accepts TCP, runs TLS, and hands each connection's
//!   requests to hyper (HTTP/1.1 and h2, chosen by ALPN).
//! * `tls` makes the rustls server config and authenticates peers: the TLS
//!   layer asks for a client certificate but accepts any, as kube-apiserver
//!   does, and the application verifies it against the mesh CA, so a missing
//!   or foreign certificate gets a `401 Status` rather than a TLS alert.
//! * `routes` maps requests to handlers; `crud` answers resource paths and
//!   `watch` streams changes. What they share sits in leaves that import
//!   none of them: `http` (reply bodies, JSON and error replies, reading a
//!   body under a limit), `context` (what a connection's requests share)
//!   and `collection` (the filter a list or watch asks for, and what it
//!   selects).
//! * `objects` and `tokens` build and check the JSON objects without IO;
//!   [`status`] shapes errors as `metav1.Status`.
//!
//! The API does not own state: everything it serves comes from a [`Backend`]
//! the daemon implements.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use relaymesh_protocol::{BundleId, NodeRecord, Role};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch as signal;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::limits::Limit;
use crate::objects::ObjectStore;

mod audit;
mod authz;
mod builtins;
mod collection;
mod context;
mod crd;
mod crud;
mod deletion;
mod discovery;
mod field_validation;
#[doc(hidden)]
pub mod fuzzing;
mod health;
mod http;
mod inventory;
mod list_options;
mod objects;
mod openapi;
pub mod patch;
pub mod protobuf;
mod query;
mod resources;
mod revocations;
mod routes;
mod scale;
mod selector;
pub mod status;
mod strategy;
mod table;
mod tls;
mod tokens;
mod users;
mod validation;
mod watch;

pub use audit::AuditLog;
pub use authz::{ADMINS, GROUPS, OPERATORS, VIEWERS};
pub use tls::{PeerIdentity, User};
pub use users::DEFAULT_VALIDITY as DEFAULT_USER_CERT_VALIDITY;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1.1 client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`serve`] lets open requests finish once shutdown is asked.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The API server's TLS material.
#[derive(Clone)]
pub struct ApiTls {
    /// The API CA: client certificates must chain to it, and it signs user
    /// certificates.
    pub authority: crate::pki::ApiAuthority,
    /// The server's certificate chain (DER), leaf first.
    pub chain_der: Vec<Vec<u8>>,
    /// The server certificate's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

impl std::fmt::Debug for ApiTls {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTls")
            .field("chain_len", &self.chain_der.len())
            .finish_non_exhaustive()
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
}

impl std::fmt::Debug for IssuedToken {
    // A token is a credential: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("expires_unix", &self.expires_unix)
            .finish_non_exhaustive()
    }
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

/// What the API serves from: the daemon's view of the tree and its stores.
///
/// The synchronous methods are called from request handlers on the async
/// runtime, so they must answer from memory and not block.
pub trait Backend: Send + Sync + 'static {
    /// Every node the root knows (itself included): relays and agents, with
    /// link status set by each node's parent.
    fn nodes(&self) -> Vec<NodeRecord>;

    /// Issues a single-use join token for `request`.
    fn create_token(&self, request: TokenRequest) -> Result<IssuedToken, ApiError>;

    /// The join tokens the root issued and still remembers, oldest first.
    fn tokens(&self) -> Result<Vec<crate::store::TokenRecord>, ApiError> {
        Err(ApiError::NotFound(
            "this server does not issue join tokens".into(),
        ))
    }

    /// Revokes the join token `id`, so no relay admits anyone with it.
    fn revoke_token(
        &self,
        id: [u8; 16],
    ) -> impl Future<Output = Result<crate::store::TokenRecord, ApiError>> + Send {
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

    /// Counts a request the API refused for breaking `limit`, in the root's
    /// own record (`limitRefusals`). Must not block. A backend without
    /// counters ignores it.
    fn count_limit_refusal(&self, limit: Limit) {
        let _ = limit;
    }
}

/// Why a request failed, or why the server could not start. Each request
/// error becomes a `metav1.Status` with the code and reason noted on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The request is malformed (400, `BadRequest`).
    #[error("{0}")]
    BadRequest(String),
    /// No client certificate, or one not from the mesh CA (401,
    /// `Unauthorized`).
    #[error("{0}")]
    Unauthorized(String),
    /// The client is known but may not do this (403, `Forbidden`).
    #[error("{0}")]
    Forbidden(String),
    /// No such object or path (404, `NotFound`).
    #[error("{0}")]
    NotFound(String),
    /// The path exists but not with this method (405, `MethodNotAllowed`).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The object changed meanwhile (409, `Conflict`).
    #[error("{0}")]
    Conflict(String),
    /// The object to create exists already (409, `AlreadyExists`).
    #[error("{0}")]
    AlreadyExists(String),
    /// A server-side apply would take fields other managers own (409,
    /// `Conflict`, one cause per field).
    #[error("{message}")]
    FieldConflicts {
        /// A sentence for humans.
        message: String,
        /// The conflicting (manager, field path) pairs.
        causes: Vec<(String, String)>,
    },
    /// A watch asked for a resourceVersion older than the history (410,
    /// `Expired`).
    #[error("{0}")]
    Gone(String),
    /// No representation the client accepts can be served (406,
    /// `NotAcceptable`).
    #[error("{0}")]
    NotAcceptable(String),
    /// The request body's media type is not supported here (415,
    /// `UnsupportedMediaType`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The request body is larger than the endpoint accepts (413,
    /// `RequestEntityTooLarge`).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A field of the object is invalid (422, `Invalid`).
    #[error("{field}: {message}")]
    Invalid {
        /// The field's JSON path, as `spec.name`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The backend cannot serve this now; retrying may help (503,
    /// `ServiceUnavailable`).
    #[error("{0}")]
    Unavailable(String),
    /// What was asked for is not there yet, such as a list at a
    /// resourceVersion newer than the store's (504, `Timeout`).
    #[error("{0}")]
    Timeout(String),
    /// A bug or a failure the client cannot fix (500, `InternalError`).
    #[error("{0}")]
    Internal(String),
    /// The request broke one of the API's limits ([`Limit::ApiRequestBody`],
    /// [`Limit::ApiJsonPatch`], [`Limit::ApiUnpagedList`]): `error` is what
    /// the client gets, and the refusal is counted.
    #[error("{error}")]
    OverLimit {
        /// The limit.
        limit: Limit,
        /// The error the client gets (413 or 422).
        error: Box<ApiError>,
    },
    /// The server's TLS material was refused by rustls ([`serve`] only).
    #[error("cannot use the API server's TLS material")]
    TlsConfig(#[source] rustls::Error),
}

/// Serves the API on `listener` until `shutdown` completes, then lets open
/// requests finish for a few seconds.
///
/// Fails only if `tls` is unusable; errors on single connections are logged.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    tls: ApiTls,
    backend: Arc<B>,
    objects: ObjectStore,
    audit: Option<AuditLog>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(&tls)?));
    let authenticator = tls::Authenticator::new(&tls.authority.cert_der)?;
    let shared = Arc::new(ConnectionShared {
        authenticator,
        authority: Arc::new(tls.authority.clone()),
        audit: audit.map(Arc::new),
    });
    let (stop_sender, stop) = signal::channel(());
    let mut connections = JoinSet::new();
    if let Ok(address) = listener.local_addr() {
        info!(%address, "API server listening");
    }
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    connections.spawn(serve_connection(
                        acceptor.clone(),
                        stream,
                        remote,
                        shared.clone(),
                        backend.clone(),
                        objects.clone(),
                        stop.clone(),
                    ));
                }
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    warn!(%error, "cannot accept an API connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    info!(open = connections.len(), "API server shutting down");
    // Receivers see the change and shut their connections down gracefully.
    let _ = stop_sender.send(());
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            open = connections.len(),
            "closing API connections that did not finish in time"
        );
        connections.abort_all();
    }
    Ok(())
}

/// What every connection of one server shares.
struct ConnectionShared {
    authenticator: tls::Authenticator,
    authority: Arc<crate::pki::ApiAuthority>,
    audit: Option<Arc<AuditLog>>,
}

/// Runs TLS and HTTP on one accepted connection.
async fn serve_connection<B: Backend>(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    remote: SocketAddr,
    shared: Arc<ConnectionShared>,
    backend: Arc<B>,
    objects: ObjectStore,
    mut stop: signal::Receiver<()>,
) {
    let tls_stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls_stream)) => tls_stream,
        Ok(Err(error)) => {
            debug!(%remote, %error, "API TLS handshake failed");
            return;
        }
        Err(_) => {
            debug!(%remote, "API TLS handshake timed out");
            return;
        }
    };
    let peer = shared
        .authenticator
        .authenticate(tls_stream.get_ref().1.peer_certificates());
    debug!(%remote, %peer, "API connection");
    let context = Arc::new(context::Context {
        backend,
        peer,
        remote,
        objects,
        stop: stop.clone(),
        authority: shared.authority.clone(),
        audit: shared.audit.clone(),
    });
    let service = service_fn(move |request| {
        let context = context.clone();
        async move { Ok::<_, Infallible>(routes::handle(&context, request).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A client that never finishes its request headers is dropped.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = builder.serve_connection(TokioIo::new(tls_stream), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = stop.changed() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        debug!(%remote, %error, "API connection ended with an error");
    }
}
