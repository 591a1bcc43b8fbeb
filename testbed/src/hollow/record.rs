//! The record of what was written to a hollow cluster, one entry per request
//! that changed it, in the order received: what tests and benchmarks read to
//! check the agent's dependency order and to time it.

/// What was written to a cluster, one entry per request that changed it,
/// in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRecord {
    /// How it was written.
    pub operation: Operation,
    /// The API group; empty for the core group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// The cluster's resourceVersion after the write.
    pub resource_version: u64,
    /// When the write was made (tokio's clock, so virtual time in tests):
    /// the fanout benchmark times each agent by it.
    pub at: tokio::time::Instant,
}

/// The kind of write an [`AppliedRecord`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply (`PATCH` with `application/apply-patch+yaml`).
    Apply,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// A JSON, merge or strategic merge `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}
