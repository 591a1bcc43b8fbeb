//! What every request on one connection shares, handed to every handler.

use std::net::SocketAddr;
use std::sync::Arc;

use super::audit::AuditLog;
use super::resources::{Registry, Resource};
use super::tls::PeerIdentity;
use super::watch_gate::WatchGate;
use super::ApiError;
use crate::objects::ObjectStore;

/// What every request on one connection shares.
pub(super) struct Context<E> {
    /// What the server adds to Kubernetes.
    pub(super) extension: Arc<E>,
    /// The extension's kinds, asked for once when the server started.
    pub(super) extension_resources: Arc<Vec<Resource>>,
    /// The API groups no CRD may use ([`crate::Extension::reserved_groups`]).
    pub(super) reserved_groups: Arc<Vec<String>>,
    /// The watches open on the whole server, per user and in all.
    pub(super) watches: Arc<WatchGate>,
    /// Who the client is, decided once per connection.
    pub(super) peer: PeerIdentity,
    /// The client's address, for logs.
    pub(super) remote: SocketAddr,
    /// The stored Kubernetes objects.
    pub(super) objects: ObjectStore,
    /// Changes when the server shuts down, so watches end.
    pub(super) stop: tokio::sync::watch::Receiver<()>,
    /// Where writes are recorded, if anywhere.
    pub(super) audit: Option<Arc<AuditLog>>,
}

impl<E> Context<E> {
    /// Every resource served now: the built-ins, the extension's, and the
    /// served versions of every stored CRD outside the reserved groups.
    pub(super) fn registry(&self) -> Result<Registry, ApiError> {
        let registry = Registry::load(&self.objects, &self.extension_resources)?;
        Ok(super::crd::without_reserved(
            registry,
            &self.extension_resources,
            &self.reserved_groups,
        ))
    }
}
