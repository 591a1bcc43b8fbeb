//! Starting the root's services when its daemon starts: the object store,
//! the API (with its certificate and audit log), the placement controller
//! and the renewal of the API's certificate. What the API asks of the
//! running relay is `serve::backend`'s.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::api::{self, ApiTls};
use relaymesh_node::daemon::root_services::{RootHandle, RootServices, Serving};
use relaymesh_node::daemon::DaemonError;
use tracing::Instrument;

mod api_cert;
mod backend;

use backend::RootBackend;

/// The audit log's file name in the data directory.
pub const AUDIT_LOG: &str = "audit.log";

/// The root's API and placement controller, as the daemon starts them.
#[derive(Debug, Clone)]
pub struct RootApi {
    /// The bounds on the API's watches.
    pub watches: relaymesh_apiserver::WatchLimits,
    /// Set at a standby replica of a replicated root (why it answers
    /// nothing about the tree): it serves the objects in etcd, and neither
    /// the placement controller nor the API certificate's renewal runs.
    pub standby: Option<String>,
    /// How the placement controller encodes the bundles it packs.
    pub bundle_encoding: crate::placement::BundleEncoding,
}

impl RootServices for RootApi {
    fn start(
        &self,
        address: String,
        node: RootHandle,
        shutdown: CancellationToken,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Serving, DaemonError>> + Send>>
    {
        let (watches, standby) = (self.watches, self.standby.clone());
        let encoding = self.bundle_encoding;
        Box::pin(async move {
            let serve = serve_api(&address, node, watches, standby, encoding, shutdown).await?;
            Ok(Box::pin(serve) as Serving)
        })
    }
}

/// Binds the API listener and returns the server task; `watches` bounds
/// the API's watches.
pub(super) async fn serve_api(
    address: &str,
    node: RootHandle,
    watches: relaymesh_apiserver::WatchLimits,
    standby: Option<String>,
    encoding: crate::placement::BundleEncoding,
    shutdown: CancellationToken,
) -> Result<impl std::future::Future<Output = ()>, DaemonError> {
    let listen_error = |source| DaemonError::Listen {
        address: address.to_string(),
        source,
    };
    let opened = crate::objects_store::open(node.store())
        .map_err(|error| listen_error(std::io::Error::other(error)))?;
    let (objects, state) = (opened.objects, opened.state);
    let state_error = |error: crate::state::StateError| listen_error(std::io::Error::other(error));
    let certificate = state
        .api_certificate()
        .map_err(state_error)?
        .ok_or_else(|| {
            listen_error(std::io::Error::other(
                "this relay has no API certificate (only the root serves the API)",
            ))
        })?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(listen_error)?;
    tracing::info!(%address, "serving the root API");
    let api_cert = Arc::new(api_cert::ApiCert::new(
        state.clone(),
        &certificate,
        state.previous_api_ca().map_err(state_error)?,
    )?);
    let tls = ApiTls {
        server: relaymesh_apiserver::ApiTls {
            client_ca_der: certificate.authority.cert_der.clone(),
            chain_der: certificate.chain_der,
            key_der: certificate.key_der,
            serving: Some(api_cert.serving()),
            clients: Some(api_cert.clients()),
        },
        authorities: api_cert.authorities(),
    };
    let audit_path = node.store().dir().join(AUDIT_LOG);
    let audit = api::AuditLog::open(&audit_path).map_err(|error| {
        listen_error(std::io::Error::other(format!(
            "cannot open the audit log {}: {error}",
            audit_path.display()
        )))
    })?;
    // One cache of Placement specs for the API, the controller and the
    // store's generation dependents.
    let specs = crate::placement::Specs::default();
    objects.set_generation_dependents(Arc::new(crate::placement::PlacementsOfWorkloads {
        specs: specs.clone(),
    }));
    // One controller in the fleet: a standby's would fight the leader's.
    let controller = standby.is_none().then(|| {
        tokio::spawn(
            crate::controller::run(
                objects.clone(),
                node.clone(),
                specs.clone(),
                encoding,
                shutdown.clone(),
            )
            .instrument(tracing::Span::current()),
        )
    });
    // Revoked users, by name, with when: asked on every API request, so
    // kept in memory, loaded from the store (they survive a restart).
    let revoked_users = state
        .users()
        .map_err(|error| listen_error(std::io::Error::other(error)))?
        .into_iter()
        .filter_map(|user| Some((user.name, user.revoked_unix?)))
        .collect();
    let renewing = standby.is_none().then(|| {
        let (api_cert, shutdown) = (api_cert.clone(), shutdown.clone());
        tokio::spawn(
            async move { api_cert.renew_before_expiry(shutdown).await }
                .instrument(tracing::Span::current()),
        )
    });
    let backend = Arc::new(RootBackend::new(
        node,
        state,
        watches,
        revoked_users,
        api_cert,
        standby,
    ));
    Ok(async move {
        let stopped = async move { shutdown.cancelled().await };
        if let Err(error) =
            api::serve(listener, tls, backend, objects, specs, Some(audit), stopped).await
        {
            tracing::error!(%error, "root API stopped");
        }
        for task in [controller, renewing].into_iter().flatten() {
            let _ = task.await;
        }
    })
}
