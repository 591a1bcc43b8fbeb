//! The limits the API enforces, as plain data: which one refused a request
//! ([`ApiLimit`], what an extension counts) and how many watches may be open
//! at once ([`WatchLimits`], what an extension sets). A leaf: the
//! [`crate::Extension`] trait and the handlers that enforce the limits use
//! it, and it uses none of them.

/// The limits the API itself enforces, each counted when it refuses a
/// request ([`crate::Extension::count_limit_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiLimit {
    /// The size of a request's body.
    RequestBody,
    /// The operations of a JSON patch, and what its `copy` operations add.
    JsonPatch,
    /// The objects a list without `limit` returns.
    UnpagedList,
    /// The watches open at once, from everyone ([`WatchLimits::total`]).
    Watches,
    /// The watches one user has open at once ([`WatchLimits::per_user`]).
    WatchesPerUser,
    /// What one watch queues for a client that does not read: counted when
    /// such a watch is ended.
    WatchBuffer,
}

/// How many watches may be open at once ([`crate::Extension::watch_limits`]);
/// one more gets `429 TooManyRequests`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Watches one user (a certificate's common name) may have open.
    pub per_user: usize,
    /// Watches open at once, from everyone.
    pub total: usize,
}

impl WatchLimits {
    /// No limit: what kube-apiserver does, and the default of
    /// [`crate::Extension::watch_limits`].
    pub const UNLIMITED: Self = Self {
        per_user: usize::MAX,
        total: usize::MAX,
    };
}
