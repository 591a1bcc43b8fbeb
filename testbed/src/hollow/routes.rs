//! The HTTP face of a hollow cluster: a tower [`Service`] that kube's
//! `Client` sends its requests to directly, the paths and methods it
//! answers, and the response body (a whole document or a watch stream).
//!
//! Served: `GET /version`; discovery (`/api`, `/apis`, `/apis/{group}`,
//! `/api/v1`, `/apis/{group}/{version}`); and for every served kind, get,
//! list (selectors), watch, create, update, delete, server-side apply and
//! JSON, merge and strategic merge patches. Anything else gets a 404 or 405
//! with a `metav1.Status`, as kube-apiserver answers; subresources
//! (`status`, `scale`) are not served.
//!
//! A cluster becomes a client here ([`HollowCluster::client`],
//! [`HollowCluster::service`]) rather than beside its writes, so that the
//! cluster does not depend on its HTTP face.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt as _;
use relaymesh_apiserver::patch::PatchKind;
use relaymesh_apiserver::query::Query;
use relaymesh_apiserver::status::Status;
use relaymesh_apiserver::ApiError;
use tower_service::Service;

use super::cluster::HollowCluster;
use super::watch::{self, WatchStream};

/// The largest request body taken, as kube-apiserver's limit (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A hollow cluster as a tower service (see [`HollowCluster::service`]).
#[derive(Debug, Clone)]
pub struct HollowService {
    cluster: HollowCluster,
}

impl HollowCluster {
    /// A kube client for this cluster: requests go straight to it, with no
    /// socket and no TLS; its default namespace is `default`. Must be
    /// called within a tokio runtime (kube's client runs a buffer task).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// The cluster as a tower service of HTTP requests, for a client made
    /// another way.
    pub fn service(&self) -> HollowService {
        HollowService {
            cluster: self.clone(),
        }
    }
}

impl<B> Service<Request<B>> for HollowService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let cluster = self.cluster.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(error) => {
                    let error = ApiError::PayloadTooLarge(format!(
                        "the request body could not be read (at most {MAX_BODY} bytes): {error}"
                    ));
                    return Ok(failure(&error));
                }
            };
            let response = match handle(&cluster, &parts, &body) {
                Ok(response) => response,
                Err(error) => {
                    tracing::debug!(cluster = %cluster.name(), method = %parts.method, uri = %parts.uri, %error, "request refused");
                    failure(&error)
                }
            };
            Ok(response)
        })
    }
}

/// The body of a hollow cluster's response.
#[derive(Debug)]
pub struct ResponseBody(Content);

#[derive(Debug)]
enum Content {
    /// A whole document; `None` once sent.
    Whole(Option<Bytes>),
    /// A watch's events as they happen.
    Watch(Box<WatchStream>),
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.0 {
            Content::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Content::Watch(stream) => stream
                .poll_next(context)
                .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, Content::Whole(None))
    }
}

/// Which path a request names.
#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    Version,
    CoreVersions,
    Groups,
    Group(&'a str),
    ResourceList {
        group: &'a str,
        version: &'a str,
    },
    Objects {
        group: &'a str,
        version: &'a str,
        namespace: Option<&'a str>,
        plural: &'a str,
        name: Option<&'a str>,
        subresource: Option<&'a str>,
    },
}

/// The route of `path`, if it is one.
fn route(path: &str) -> Option<Route<'_>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Some(Route::Version),
        ["api"] => return Some(Route::CoreVersions),
        ["apis"] => return Some(Route::Groups),
        ["apis", group] => return Some(Route::Group(group)),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let objects = |namespace, plural, name, subresource| Route::Objects {
        group,
        version,
        namespace,
        plural,
        name,
        subresource,
    };
    Some(match rest {
        [] => Route::ResourceList { group, version },
        // `/namespaces/{name}` is a namespace; deeper, a namespaced path.
        ["namespaces", namespace, plural, rest @ ..] => match rest {
            [] => objects(Some(*namespace), *plural, None, None),
            [name] => objects(Some(*namespace), *plural, Some(*name), None),
            [name, subresource] => {
                objects(Some(*namespace), *plural, Some(*name), Some(*subresource))
            }
            _ => return None,
        },
        [plural] => objects(None, *plural, None, None),
        [plural, name] => objects(None, *plural, Some(*name), None),
        [plural, name, subresource] => objects(None, *plural, Some(*name), Some(*subresource)),
        _ => return None,
    })
}

fn handle(
    cluster: &HollowCluster,
    parts: &http::request::Parts,
    body: &Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let path = parts.uri.path();
    let not_found = || {
        ApiError::NotFound(format!(
            "the server could not find the requested resource ({path})"
        ))
    };
    let route = route(path).ok_or_else(not_found)?;
    let discovery = &cluster.inner.discovery;
    if !matches!(route, Route::Objects { .. }) && parts.method != Method::GET {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} is not allowed on {path}",
            parts.method
        )));
    }
    let custom = || cluster.inner.lock().custom.clone();
    let document = match route {
        Route::Version => discovery.version(),
        Route::CoreVersions => discovery.core_versions(),
        Route::Groups => discovery.groups_with(&custom()),
        Route::Group(group) => discovery
            .group_with(&custom(), group)
            .ok_or_else(not_found)?,
        Route::ResourceList { group, version } => discovery
            .resource_list_with(&custom(), group, version)
            .ok_or_else(not_found)?,
        Route::Objects {
            group,
            version,
            namespace,
            plural,
            name,
            subresource,
        } => {
            if subresource.is_some() {
                return Err(not_found());
            }
            let resource = cluster.resource(group, version, plural)?;
            let query = Query::parse(parts.uri.query())?;
            let method = &parts.method;
            return Ok(match (method, name) {
                (&Method::GET, Some(name)) => ok(cluster.get(&resource, namespace, name)?),
                (&Method::GET, None) if watching(&query) => {
                    let stream = watch::start(&cluster.inner, &resource, namespace, &query)?;
                    respond(
                        StatusCode::OK,
                        ResponseBody(Content::Watch(Box::new(stream))),
                    )
                }
                (&Method::GET, None) => {
                    ok(watch::list(&cluster.inner, &resource, namespace, &query)?)
                }
                (&Method::POST, None) => respond(
                    StatusCode::CREATED,
                    whole(cluster.create(&resource, namespace, body)?),
                ),
                (&Method::PUT, Some(name)) => ok(cluster.update(&resource, namespace, name, body)?),
                (&Method::DELETE, Some(name)) => ok(cluster.delete(&resource, namespace, name)?),
                (&Method::PATCH, Some(name)) => match patch_kind(parts, &query)? {
                    PatchKind::Apply { .. } => ok(cluster.apply(&resource, namespace, name, body)?),
                    kind => ok(cluster.patch(&resource, namespace, name, &kind, body)?),
                },
                _ => {
                    return Err(ApiError::MethodNotAllowed(format!(
                        "{method} is not allowed on {path}"
                    )))
                }
            });
        }
    };
    Ok(ok(document))
}

/// Whether a collection `GET` is a watch.
fn watching(query: &Query) -> bool {
    matches!(query.get("watch"), Some("true" | "1"))
}

/// The patch format the request's `Content-Type` names.
fn patch_kind(parts: &http::request::Parts, query: &Query) -> Result<PatchKind, ApiError> {
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    match media {
        "application/apply-patch+yaml" => {
            let field_manager = query
                .get("fieldManager")
                .filter(|manager| !manager.is_empty())
                .ok_or_else(|| {
                    ApiError::BadRequest(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: \
                         is required for apply patch"
                            .into(),
                    )
                })?;
            Ok(PatchKind::Apply {
                field_manager: field_manager.to_string(),
                force: matches!(query.get("force"), Some("true")),
            })
        }
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/strategic-merge-patch+json" => Ok(PatchKind::StrategicMerge),
        other => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format ({other:?}) - accepted media types \
             include: application/json-patch+json, application/merge-patch+json, \
             application/apply-patch+yaml, application/strategic-merge-patch+json"
        ))),
    }
}

fn whole(bytes: Bytes) -> ResponseBody {
    ResponseBody(Content::Whole(Some(bytes)))
}

fn ok(bytes: Bytes) -> Response<ResponseBody> {
    respond(StatusCode::OK, whole(bytes))
}

fn respond(status: StatusCode, body: ResponseBody) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The `metav1.Status` response for `error`.
fn failure(error: &ApiError) -> Response<ResponseBody> {
    let status = Status::from_error(error);
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // A Status always serializes: its fields are strings and numbers.
    let body = serde_json::to_vec(&status).unwrap_or_default();
    respond(code, whole(Bytes::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_like_kube_apiserver() {
        assert_eq!(route("/version"), Some(Route::Version));
        assert_eq!(route("/apis/apps"), Some(Route::Group("apps")));
        assert_eq!(
            route("/api/v1"),
            Some(Route::ResourceList {
                group: "",
                version: "v1"
            })
        );
        let namespace = route("/api/v1/namespaces/shop");
        assert!(matches!(
            namespace,
            Some(Route::Objects {
                namespace: None,
                plural: "namespaces",
                name: Some("shop"),
                ..
            })
        ));
        let deployment = route("/apis/apps/v1/namespaces/shop/deployments/web");
        assert!(matches!(
            deployment,
            Some(Route::Objects {
                group: "apps",
                namespace: Some("shop"),
                plural: "deployments",
                name: Some("web"),
                subresource: None,
                ..
            })
        ));
        let status = route("/apis/apps/v1/namespaces/shop/deployments/web/status");
        assert!(matches!(
            status,
            Some(Route::Objects {
                subresource: Some("status"),
                ..
            })
        ));
        assert!(matches!(
            route("/apis/apps/v1/deployments"),
            Some(Route::Objects {
                namespace: None,
                name: None,
                ..
            })
        ));
        assert_eq!(route("/healthz"), None);
    }
}
