//! A Kubernetes-compatible API server: what `kubectl`, client-go and the
//! official client libraries talk to. relaymesh's root serves its API with
//! it, and the testbed's simulated clusters are each one of these.
//!
//! It knows nothing of relays. An [`Extension`] adds what a particular
//! server needs beyond Kubernetes: its own kinds (stored, or read-only
//! views it makes), paths of its own, and who may do what. The server itself
//! holds every built-in kind of the Kubernetes version it reports, custom
//! resources from stored CRDs, and the machinery clients rely on (patch
//! types, watch, discovery, OpenAPI, protobuf, tables, finalizers and
//! garbage collection).
//!
//! Where the work is split:
//! * [`serve`] (here) accepts TCP, runs TLS, and hands each connection's
//!   requests to hyper (HTTP/1.1 and h2, chosen by ALPN).
//! * `tls` makes the rustls server config and authenticates peers: the TLS
//!   layer asks for a client certificate but accepts any, as kube-apiserver
//!   does, and the application verifies it against the client CA, so a
//!   missing or foreign certificate gets a `401 Status` rather than a TLS
//!   alert.
//! * `routes` maps requests to handlers; `crud` answers resource paths and
//!   `watch` streams changes. What they share sits in leaves that import
//!   none of them: [`http`] (reply bodies, JSON and error replies, reading a
//!   body under a limit), `context` (what a connection's requests share)
//!   and `collection` (the filter a list or watch asks for, and what it
//!   selects).
//! * [`Extension`] (`extension`) speaks plain data kept in leaves of its
//!   own: [`Attributes`] (`attributes`: what a request asks to do), and
//!   [`ApiLimit`] and [`WatchLimits`] (`limits`). `authz`, the handlers and
//!   `watch_gate` (the server's count of open watches) take that data from
//!   the leaves, not from the trait's module; of [`rbac`], which the trait
//!   names, only the escalation check (a file of its own) asks the
//!   extension back.
//! * [`objects`] stores objects in a sled tree with a resourceVersion per
//!   write and a bounded history for watches.
//! * [`status`] shapes errors as `metav1.Status`.
//! * [`served`] offers the kinds and discovery documents to servers that
//!   serve them without this router (the testbed's hollow clusters).
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch as signal;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::objects::ObjectStore;

mod attributes;
mod audit;
mod authz;
pub mod blocking;
pub mod body;
mod builtins;
mod collection;
mod context;
mod crd;
mod crud;
mod deletion;
pub mod depth;
mod discovery;
pub mod etcd;
mod extension;
mod field_validation;
#[doc(hidden)]
pub mod fuzzing;
mod health;
pub mod http;
mod limits;
mod list_options;
pub mod objects;
mod openapi;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod rbac;
mod resources;
mod routes;
mod scale;
pub mod selector;
pub mod served;
pub mod status;
mod strategy;
mod table;
mod tls;
mod validation;
mod watch;
mod watch_gate;

pub use attributes::{Attributes, Denied};
pub use audit::AuditLog;
pub use extension::{Call, Extension, ExtensionRoute, Plain, RbacEnforced};
pub use field_validation::{check_schema, SchemaFindings};
pub use limits::{ApiLimit, WatchLimits};
pub use resources::{api_version, Resource, Validator, Warner};
pub use table::of_objects as table_of_objects;
pub use tls::{user_of, Authenticator, PeerIdentity, ServingCert, User};
pub use validation::label_error;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1.1 client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`serve`] lets open requests finish once shutdown is asked.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The API server's TLS material.
#[derive(Clone)]
pub struct ApiTls {
    /// The client CA (DER): client certificates must chain to it.
    pub client_ca_der: Vec<u8>,
    /// The server's certificate chain (DER), leaf first.
    pub chain_der: Vec<Vec<u8>>,
    /// The server certificate's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
    /// When given, what the server presents instead of `chain_der` and
    /// `key_der`: a certificate its owner can replace while it runs.
    pub serving: Option<ServingCert>,
    /// When given, who verifies client certificates instead of
    /// `client_ca_der`: CAs their owner can replace while it runs.
    pub clients: Option<Authenticator>,
}

impl std::fmt::Debug for ApiTls {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTls")
            .field("chain_len", &self.chain_der.len())
            .finish_non_exhaustive()
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
    /// The client has too much open at once; retrying later may help (429,
    /// `TooManyRequests`, with `Retry-After`).
    #[error("{message}")]
    TooManyRequests {
        /// A sentence for humans.
        message: String,
        /// When to try again, in seconds.
        retry_after_seconds: u32,
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
    /// The request broke one of the API's limits ([`ApiLimit`]): `error` is
    /// what the client gets, and the refusal is counted
    /// ([`Extension::count_limit_refusal`]).
    #[error("{error}")]
    OverLimit {
        /// The limit.
        limit: ApiLimit,
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
pub async fn serve<E: Extension>(
    listener: TcpListener,
    tls: ApiTls,
    extension: Arc<E>,
    objects: ObjectStore,
    audit: Option<AuditLog>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(&tls)?));
    let authenticator = match &tls.clients {
        Some(clients) => clients.clone(),
        None => tls::Authenticator::new(std::slice::from_ref(&tls.client_ca_der))?,
    };
    let reserved_groups = Arc::new(extension.reserved_groups());
    crd::warn_reserved(&objects, &reserved_groups);
    let shared = Arc::new(ConnectionShared {
        authenticator,
        extension_resources: Arc::new(extension.resources()),
        reserved_groups,
        watches: watch_gate::WatchGate::new(extension.watch_limits()),
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
                        extension.clone(),
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
    extension_resources: Arc<Vec<resources::Resource>>,
    reserved_groups: Arc<Vec<String>>,
    watches: Arc<watch_gate::WatchGate>,
    audit: Option<Arc<AuditLog>>,
}

/// Runs TLS and HTTP on one accepted connection.
async fn serve_connection<E: Extension>(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    remote: SocketAddr,
    shared: Arc<ConnectionShared>,
    extension: Arc<E>,
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
        extension,
        extension_resources: shared.extension_resources.clone(),
        reserved_groups: shared.reserved_groups.clone(),
        watches: shared.watches.clone(),
        peer,
        remote,
        objects,
        stop: stop.clone(),
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
