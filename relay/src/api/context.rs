//! What every request on one connection shares, handed to every handler.

use std::net::SocketAddr;
use std::sync::Arc;

use super::audit::AuditLog;
use super::tls::PeerIdentity;
use crate::objects::ObjectStore;

/// What every request on one connection shares.
pub(super) struct Context<B> {
    /// Where the data comes from.
    pub(super) backend: Arc<B>,
    /// Who the client is, decided once per connection.
    pub(super) peer: PeerIdentity,
    /// The client's address, for logs.
    pub(super) remote: SocketAddr,
    /// The stored Kubernetes objects.
    pub(super) objects: ObjectStore,
    /// Changes when the server shuts down, so watches end.
    pub(super) stop: tokio::sync::watch::Receiver<()>,
    /// The API CA, which signs user certificates.
    pub(super) authority: Arc<crate::pki::ApiAuthority>,
    /// Where writes are recorded, if anywhere.
    pub(super) audit: Option<Arc<AuditLog>>,
}
