//! The API server's limits in the daemon's terms: the watch limits that
//! `relay run` sets, and which of the daemon's counters a refusal by the
//! API server is counted in. The API server crate knows nothing of the
//! daemon's `Limits`, so the translation sits here, on the root's side.

use relaymesh_apiserver::ApiLimit;
use relaymesh_node::limits::Limit;

/// The watch limits of the root's API, from the limits `relay run` was given.
pub fn watch_limits(limits: &relaymesh_node::limits::Limits) -> relaymesh_apiserver::WatchLimits {
    relaymesh_apiserver::WatchLimits {
        per_user: limits.max_api_watches_per_user,
        total: limits.max_api_watches,
    }
}

/// The daemon's counter (`limitRefusals`) for a request the API server
/// refused for breaking `limit`.
pub(super) fn counted_as(limit: ApiLimit) -> Limit {
    match limit {
        ApiLimit::RequestBody => Limit::ApiRequestBody,
        ApiLimit::JsonPatch => Limit::ApiJsonPatch,
        ApiLimit::Watches => Limit::ApiWatches,
        ApiLimit::WatchesPerUser => Limit::ApiWatchesPerUser,
        ApiLimit::WatchBuffer => Limit::ApiWatchBuffer,
        _ => Limit::ApiUnpagedList,
    }
}
