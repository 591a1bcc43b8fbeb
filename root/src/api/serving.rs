//! Starting the root's API: the TLS material it serves with, and
//! [`serve`], which writes the default RBAC policy where it is missing
//! and hands relaymesh's extension to the Kubernetes API server.

use std::future::Future;
use std::sync::Arc;

use relaymesh_apiserver::objects::ObjectStore;
use relaymesh_apiserver::{ApiError, AuditLog};
use tokio::net::TcpListener;

use super::backend::Backend;
use super::extension::Relaymesh;
use super::policy;
use super::users::ApiAuthorities;

/// The API server's TLS material: what the server presents and whom it
/// accepts (`server`), and the API CA(s) that sign users and that their
/// kubeconfigs trust (`authorities`).
#[derive(Clone)]
pub struct ApiTls {
    /// The server's certificate and client CAs.
    pub server: relaymesh_apiserver::ApiTls,
    /// What signs user certificates and what their kubeconfigs trust.
    pub authorities: ApiAuthorities,
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
            authorities: ApiAuthorities::new(authority, &trusted),
        }
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
