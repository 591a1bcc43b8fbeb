//! The root's API backend: what the HTTPS API asks of the running relay.

use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::{BundleId, NodeRecord, Role};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{unix_ms, DaemonError, Event, Shared};
use crate::api::{self, ApiError, ApiTls, Backend, IssuedToken, TokenRequest};
use crate::limits::Limit;
use crate::objects::ObjectStore;
use crate::{pki, token};
use tracing::Instrument;

/// The audit log's file name in the data directory.
pub const AUDIT_LOG: &str = "audit.log";

/// Binds the API listener and returns the server task.
pub(super) async fn serve_api(
    address: &str,
    shared: Shared,
    shutdown: CancellationToken,
) -> Result<impl std::future::Future<Output = ()>, DaemonError> {
    let listen_error = |source| DaemonError::Listen {
        address: address.to_string(),
        source,
    };
    let certificate = shared.store.api_certificate()?.ok_or_else(|| {
        listen_error(std::io::Error::other(
            "this relay has no API certificate (only the root serves the API)",
        ))
    })?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(listen_error)?;
    tracing::info!(%address, "serving the root API");
    let tls = ApiTls {
        authority: certificate.authority,
        chain_der: certificate.chain_der,
        key_der: certificate.key_der,
    };
    let audit_path = shared.store.dir().join(AUDIT_LOG);
    let audit = api::AuditLog::open(&audit_path).map_err(|error| {
        listen_error(std::io::Error::other(format!(
            "cannot open the audit log {}: {error}",
            audit_path.display()
        )))
    })?;
    let objects = ObjectStore::open(shared.store.open_tree("objects")?)
        .map_err(|error| listen_error(std::io::Error::other(error)))?;
    let controller = tokio::spawn(
        super::placements::run(objects.clone(), shared.clone(), shutdown.clone())
            .instrument(tracing::Span::current()),
    );
    let backend = Arc::new(RootBackend { shared });
    Ok(async move {
        let stopped = async move { shutdown.cancelled().await };
        if let Err(error) = api::serve(listener, tls, backend, objects, Some(audit), stopped).await
        {
            tracing::error!(%error, "root API stopped");
        }
        let _ = controller.await;
    })
}

/// The relays between the root (`root`, not included) and `node` (not
/// included), top-down, from the inventory's parent links.
fn ancestors(nodes: &[NodeRecord], node: &NodeRecord, root: &str) -> Result<Vec<String>, ApiError> {
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

struct RootBackend {
    shared: Shared,
}

impl Backend for RootBackend {
    fn nodes(&self) -> Vec<NodeRecord> {
        self.shared
            .nodes
            .read()
            .map(|nodes| nodes.clone())
            .unwrap_or_default()
    }

    fn count_limit_refusal(&self, limit: Limit) {
        self.shared.refusals.count(limit);
    }

    fn create_token(&self, request: TokenRequest) -> Result<IssuedToken, ApiError> {
        let identity = &self.shared.identity;
        let signing_key = identity
            .token_signing_key
            .as_deref()
            .ok_or_else(|| ApiError::Forbidden("only the root issues join tokens".into()))?;
        let parent = request.parent.unwrap_or_else(|| identity.name.clone());
        let nodes = self.nodes();
        let (addresses, issuers) = if parent == identity.name {
            (self.shared.config.advertise.clone(), Vec::new())
        } else {
            let record = nodes
                .iter()
                .find(|node| node.name == parent)
                .ok_or_else(|| {
                    ApiError::NotFound(format!("relay {parent:?} is not in the tree"))
                })?;
            if record.role != Role::Relay {
                return Err(ApiError::Invalid {
                    field: "spec.parent".into(),
                    message: format!("{parent:?} is an {}, not a relay", record.role),
                });
            }
            (
                record.addresses.clone(),
                ancestors(&nodes, record, &identity.name)?,
            )
        };
        if addresses.is_empty() {
            return Err(ApiError::Invalid {
                field: "spec.parent".into(),
                message: format!("relay {parent:?} advertises no address to dial"),
            });
        }
        let now_unix = unix_ms() / 1000;
        let claims = token::new_claims(
            &request.name,
            request.role,
            token::TokenParent {
                name: parent.clone(),
                addresses,
                issuers,
            },
            pki::sha256(&identity.ca_cert_der),
            request.ttl,
            now_unix,
        );
        let issued = token::issue(signing_key, &claims)
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        tracing::info!(name = %request.name, role = %request.role, %parent, ttl = ?request.ttl, "issued a join token");
        Ok(IssuedToken {
            token: issued,
            expires_unix: claims.not_after_unix,
        })
    }

    async fn push_bundle(&self, name: String, bytes: Vec<u8>) -> Result<BundleId, ApiError> {
        let id = BundleId::of(&bytes);
        let store = self.shared.store.clone();
        tokio::task::spawn_blocking(move || store.put_bundle(&id, &bytes))
            .await
            .map_err(|error| ApiError::Internal(error.to_string()))?
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        let (reply_tx, reply_rx) = oneshot::channel();
        self.shared
            .events
            .send(Event::PublishBundle {
                name,
                id,
                reply: reply_tx,
            })
            .await
            .map_err(|_| ApiError::Unavailable("the relay is stopping".into()))?;
        tokio::time::timeout(Duration::from_secs(30), reply_rx)
            .await
            .map_err(|_| ApiError::Unavailable("the relay did not answer in time".into()))?
            .map_err(|_| ApiError::Unavailable("the relay is stopping".into()))?;
        Ok(id)
    }
}
