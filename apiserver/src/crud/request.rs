//! What a request on a resource path asks, read from its path, headers
//! and query: the parts every verb's handler needs.

use hyper::body::Incoming;
use hyper::Request;

use crate::query::Query;

/// A request path naming a resource, and perhaps a namespace, an object and
/// a subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
}

pub(super) fn header(request: &Request<Incoming>, name: hyper::header::HeaderName) -> String {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// `fieldManager`, else the user agent's program name, as kube-apiserver
/// defaults it.
pub(super) fn field_manager(query: &Query, user_agent: &str) -> String {
    query
        .get("fieldManager")
        .filter(|manager| !manager.is_empty())
        .map(str::to_string)
        .or_else(|| {
            user_agent
                .split('/')
                .next()
                .filter(|agent| !agent.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".to_string())
}

pub(super) fn is_dry_run(query: &Query) -> bool {
    query.get("dryRun") == Some("All")
}
