//! How a daemon runs beyond what its store holds: certificate lifetimes,
//! limits, failover and logging intervals, and the root's services.

use std::sync::Arc;
use std::time::Duration;

use super::{refusal_log, root_services};
use crate::limits::Limits;
use crate::pki;
use crate::transport::uplink;

/// How a daemon runs, beyond what its store holds.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How long the TLS certificates this relay signs for its children
    /// (at join and renewal) last, and, at the root, its own.
    pub node_cert_validity: Duration,
    /// How long after a child's certificate expired this relay still
    /// renews it over the link, unless the child is revoked.
    pub expired_cert_grace: Duration,
    /// The limits on what peers may cost this relay.
    pub limits: Limits,
    /// The QUIC endpoints to dial the parent from; empty (the default), the
    /// uplink opens its own.
    pub endpoints: uplink::Endpoints,
    /// How long a node with candidate parents lets its parent stay silent
    /// before it dials the others (see [`relaymesh_protocol::parents`]).
    pub parent_grace: Duration,
    /// How long an agent child may be disconnected before count-bounded
    /// placements treat its cluster as lost and place it elsewhere;
    /// `None`: never.
    pub lost_after: Option<Duration>,
    /// How long the listener stays quiet about a peer it refused (for one
    /// reason) after logging it; the next line counts the refusals since.
    pub refusal_log_interval: Duration,
    /// The root's services, started when the configuration has an API
    /// address; `None` in programs that are never the root (the edge
    /// agent).
    pub root: Option<Root>,
    /// A standby replica of a replicated root: it serves the root's API
    /// (its services say how) but accepts no child; the leader does.
    pub standby: bool,
    /// How long a link to a child may stay silent before it ends (the
    /// child's own limit holds if lower): how soon children notice this
    /// node is gone.
    pub link_idle_timeout: Duration,
    /// The metrics endpoint is served: the loop samples its state for it
    /// each second.
    pub metrics: bool,
}

/// The root's services, as [`RunOptions`] carries them.
#[derive(Clone)]
pub struct Root(pub Arc<dyn root_services::RootServices>);

impl std::fmt::Debug for Root {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Root(..)")
    }
}

/// How long a parent may stay silent before a node with candidate parents
/// re-parents, unless `--parent-grace` says otherwise.
pub const DEFAULT_PARENT_GRACE: Duration = Duration::from_secs(30);

/// How long the listener stays quiet about a refused peer after a line,
/// unless `--refusal-log-interval` says otherwise.
pub const DEFAULT_REFUSAL_LOG_INTERVAL: Duration = refusal_log::DEFAULT_INTERVAL;

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            node_cert_validity: pki::DEFAULT_NODE_CERT_VALIDITY,
            expired_cert_grace: pki::DEFAULT_EXPIRED_CERT_GRACE,
            limits: Limits::default(),
            endpoints: uplink::Endpoints::default(),
            parent_grace: DEFAULT_PARENT_GRACE,
            lost_after: None,
            refusal_log_interval: DEFAULT_REFUSAL_LOG_INTERVAL,
            root: None,
            standby: false,
            link_idle_timeout: pki::IDLE_TIMEOUT,
            metrics: false,
        }
    }
}
