//! Requests to handlers: the router, authentication and authorization, body
//! limits, and request logging.
//!
//! A path is first offered to the extension ([`Extension::route`]), then
//! parsed into a [`Route`] (a table of Kubernetes-shaped paths), then the
//! caller is checked, then the method. Failures of any step become a
//! `metav1.Status` reply.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tracing::{debug, warn};

use super::attributes::Attributes;
use super::authz;
use super::context::Context;
use super::crud::{self, ResourcePath};
use super::extension::{Call, ExtensionRoute};
use super::health::Outcome;
use super::http::{error_reply, json_reply, negotiate, read_body, reply, ApiBody, MAX_JSON_BODY};
use super::query::Query;
use super::tls::{PeerIdentity, User};
use super::{discovery, health, openapi, ApiError, Extension};

/// The Kubernetes version the API claims to be compatible with.
const KUBE_MAJOR: &str = "1";
const KUBE_MINOR: &str = "33";

/// A path the API knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// `/healthz`, `/livez`, `/readyz`, or one check below them
    /// (`/livez/ping`).
    Health(String, Option<String>),
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    GroupVersion(String, String),
    /// A resource, collection or object under a group-version.
    Resource(ResourcePath),
    /// `/openapi/v3` (`None`) or `/openapi/v3/{api/v1, apis/G/V}`.
    OpenApi(Option<String>),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`.
    AccessReview,
    /// `/apis/authentication.k8s.io/v1/selfsubjectreviews`.
    SelfReview,
    /// A path the extension serves.
    Extension(ExtensionRoute),
}

impl Route {
    /// The route of `path`, if the API serves it.
    fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        let route = match segments.as_slice() {
            [endpoint @ ("healthz" | "livez" | "readyz")] => {
                Self::Health(endpoint.to_string(), None)
            }
            [endpoint @ ("healthz" | "livez" | "readyz"), check] => {
                Self::Health(endpoint.to_string(), Some(check.to_string()))
            }
            ["version"] => Self::Version,
            ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] => {
                Self::AccessReview
            }
            ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => Self::SelfReview,
            ["api"] => Self::CoreVersions,
            ["apis"] => Self::Groups,
            ["apis", group] => Self::Group(group.to_string()),
            ["api", version] => Self::GroupVersion(String::new(), version.to_string()),
            ["apis", group, version] => Self::GroupVersion(group.to_string(), version.to_string()),
            ["api", version, rest @ ..] => Self::Resource(resource_path("", version, rest)?),
            ["apis", group, version, rest @ ..] => {
                Self::Resource(resource_path(group, version, rest)?)
            }
            ["openapi", "v2"] => Self::OpenApiV2,
            ["openapi", "v3"] => Self::OpenApi(None),
            ["openapi", "v3", rest @ ..] => Self::OpenApi(Some(rest.join("/"))),
            _ => return None,
        };
        Some(route)
    }

    /// The methods the route answers.
    fn methods(&self) -> &'static [Method] {
        match self {
            Self::Extension(route) => route.methods,
            Self::AccessReview | Self::SelfReview => &[Method::POST],
            Self::Resource(_) => &[
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ],
            _ => &[Method::GET],
        }
    }

    /// Whether anyone may call the route. Health checks come from load
    /// balancers and probes without certificates, and reveal nothing.
    fn is_public(&self) -> bool {
        matches!(self, Self::Health(..))
    }

    /// What a request on the route asks to do, for authorization.
    fn attributes(&self, method: &Method, query: Option<&str>) -> Attributes {
        match self {
            Self::Extension(route) => route.attributes.clone(),
            Self::AccessReview | Self::SelfReview => Attributes::SelfReview,
            Self::Resource(path) => {
                let watch = query.is_some_and(|query| {
                    query
                        .split('&')
                        .any(|pair| pair == "watch=true" || pair == "watch=1")
                });
                let verb = match (method, path.name.is_some()) {
                    (&Method::GET, true) => "get",
                    (&Method::GET, false) if watch => "watch",
                    (&Method::GET, false) => "list",
                    (&Method::POST, _) => "create",
                    (&Method::PUT, _) => "update",
                    (&Method::PATCH, _) => "patch",
                    (&Method::DELETE, true) => "delete",
                    (&Method::DELETE, false) => "deletecollection",
                    _ => "unknown",
                };
                Attributes::Resource {
                    verb: verb.to_string(),
                    group: path.group.clone(),
                    resource: path.plural.clone(),
                    subresource: path.subresource.clone(),
                    namespace: path.namespace.clone(),
                    name: path.name.clone(),
                }
            }
            Self::Health(..)
            | Self::Version
            | Self::CoreVersions
            | Self::Groups
            | Self::Group(_)
            | Self::GroupVersion(..)
            | Self::OpenApi(_)
            | Self::OpenApiV2 => Attributes::Discovery,
        }
    }
}

/// Answers one request, logging it.
pub(super) async fn handle<E: Extension>(
    context: &Arc<Context<E>>,
    request: Request<Incoming>,
) -> Response<ApiBody> {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let accept = request
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let response = match dispatch(context, request).await {
        Ok(response) => response,
        Err(error) => {
            if let ApiError::OverLimit { limit, .. } = &error {
                context.extension.count_limit_refusal(*limit);
            }
            error_reply(&error)
        }
    };
    let status = response.status().as_u16();
    if method != Method::GET && method != Method::HEAD {
        if let Some(audit) = &context.audit {
            audit.record(
                &context.peer,
                method.as_str(),
                &path,
                status,
                context.remote,
            );
        }
    }
    let response = negotiate(response, &accept).await;
    if response.status().is_server_error() {
        warn!(%method, path, status, peer = %context.peer, remote = %context.remote, "API request failed");
    } else {
        debug!(%method, path, status, peer = %context.peer, remote = %context.remote, "API request");
    }
    response
}

async fn dispatch<E: Extension>(
    context: &Arc<Context<E>>,
    request: Request<Incoming>,
) -> Result<Response<ApiBody>, ApiError> {
    let route = match context
        .extension
        .route(request.method(), request.uri().path())
    {
        Some(route) => Some(Route::Extension(route)),
        None => Route::parse(request.uri().path()),
    };
    let user = match &route {
        Some(route) if route.is_public() => None,
        _ => {
            let user = authenticated(&context.peer)?;
            if let Some(reason) = context.extension.refuses_user(user) {
                return Err(ApiError::Unauthorized(reason));
            }
            Some(user)
        }
    };
    let route = route.ok_or_else(not_found)?;
    if let Some(user) = user {
        let attributes = route.attributes(request.method(), request.uri().query());
        authz::decide(&*context.extension, user, &attributes)?;
    }
    if !route.methods().contains(request.method()) {
        let mut reply = error_reply(&ApiError::MethodNotAllowed(format!(
            "the server does not allow method {} on the requested resource",
            request.method()
        )));
        let allowed: Vec<&str> = route.methods().iter().map(Method::as_str).collect();
        if let Ok(value) = HeaderValue::from_str(&allowed.join(", ")) {
            reply.headers_mut().insert(ALLOW, value);
        }
        return Ok(reply);
    }
    match route {
        Route::Health(endpoint, only) => {
            let query = Query::parse(request.uri().query())?;
            let excluded: Vec<&str> = query.all("exclude").collect();
            let default = crate::objects::ObjectKey::new("", "namespaces", None, "default");
            let store = match context.objects.get(&default) {
                Ok(_) | Err(crate::objects::ObjectError::Quarantined { .. }) => Outcome::Passed,
                Err(error) => {
                    tracing::warn!(%error, "health check: the object store cannot be read");
                    Outcome::Failed(error.to_string())
                }
            };
            let mut outcomes = vec![("ping", Outcome::Passed), ("store", store)];
            if endpoint == "readyz" {
                let named = matches!(context.peer, PeerIdentity::Verified(_));
                outcomes.push(("stored-objects", stored_objects(&context.objects, named)));
            }
            let verbose = query.get("verbose").is_some();
            let (code, text) =
                health::answer(&endpoint, only.as_deref(), verbose, &excluded, &outcomes)
                    .ok_or_else(not_found)?;
            Ok(reply(code, "text/plain; charset=utf-8", text.into_bytes()))
        }
        Route::Version => json_reply(StatusCode::OK, &version_info()),
        Route::CoreVersions | Route::Groups => {
            let core = route == Route::CoreVersions;
            let accept = request
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default();
            if discovery::wants_aggregated(accept) {
                let registry = context.registry()?;
                let bytes = serde_json::to_vec(&discovery::aggregated(&registry, core)).map_err(
                    |error| ApiError::Internal(format!("cannot encode the reply: {error}")),
                )?;
                let mut response = reply(StatusCode::OK, discovery::AGGREGATED, bytes);
                response
                    .headers_mut()
                    .insert(hyper::header::VARY, HeaderValue::from_static("Accept"));
                Ok(response)
            } else if core {
                json_reply(StatusCode::OK, &discovery::core_versions())
            } else {
                let registry = context.registry()?;
                json_reply(StatusCode::OK, &discovery::groups(&registry))
            }
        }
        Route::Group(group) => {
            let registry = context.registry()?;
            let document = discovery::group(&registry, &group).ok_or_else(not_found)?;
            json_reply(StatusCode::OK, &document)
        }
        Route::GroupVersion(group, version) => {
            let registry = context.registry()?;
            let document =
                discovery::resources(&registry, &group, &version).ok_or_else(not_found)?;
            json_reply(StatusCode::OK, &document)
        }
        Route::OpenApi(path) => {
            let registry = context.registry()?;
            let document = match path {
                None => openapi::index(&registry),
                Some(path) => openapi::document(&registry, &path).ok_or_else(not_found)?,
            };
            json_reply(StatusCode::OK, &document)
        }
        Route::OpenApiV2 => {
            // client-go asks for the document in gnostic's protobuf form
            // only, which is not served: 406 tells it so, as kube-apiserver
            // would for a type it cannot produce.
            let accept = request
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("*/*");
            if !accepts_json(accept) {
                return Err(ApiError::NotAcceptable(format!(
                    "only application/json is served here, not {accept}"
                )));
            }
            let registry = context.registry()?;
            json_reply(StatusCode::OK, &openapi::document_v2(&registry))
        }
        Route::Resource(path) => crud::handle(context, path, request).await,
        Route::AccessReview => {
            // kubectl auth can-i sends protobuf, like its other typed calls.
            let content_type = request
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
            let review = if content_type.contains("protobuf") {
                super::protobuf::decode(&body)
                    .map_err(|error| ApiError::BadRequest(error.to_string()))?
            } else {
                super::body::json(&body).map_err(super::crud::body_error)?
            };
            let user = authenticated(&context.peer)?;
            json_reply(
                StatusCode::CREATED,
                &authz::access_review(&*context.extension, user, review)?,
            )
        }
        Route::SelfReview => {
            let user = authenticated(&context.peer)?;
            json_reply(StatusCode::CREATED, &authz::self_review(user))
        }
        Route::Extension(route) => {
            let user = authenticated(&context.peer)?.clone();
            let method = request.method().clone();
            let query = request.uri().query().map(str::to_string);
            let limit = u64::try_from(route.body_limit).unwrap_or(u64::MAX);
            let body = read_body(request.into_body(), limit).await?;
            let call = Call {
                route,
                method,
                query,
                body,
                user,
                objects: context.objects.clone(),
            };
            context.extension.call(call).await
        }
    }
}

/// The path of a resource request: the segments after the group-version.
fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let path =
        |namespace: Option<&str>, plural: &str, name: Option<&str>, subresource: Option<&str>| {
            Some(ResourcePath {
                group: group.to_string(),
                version: version.to_string(),
                plural: plural.to_string(),
                namespace: namespace.map(str::to_string),
                name: name.map(str::to_string),
                subresource: subresource.map(str::to_string),
            })
        };
    match rest {
        // A namespace's own subresources, not a collection in it.
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            path(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", namespace, plural] => path(Some(namespace), plural, None, None),
        ["namespaces", namespace, plural, name] => path(Some(namespace), plural, Some(name), None),
        ["namespaces", namespace, plural, name, sub] => {
            path(Some(namespace), plural, Some(name), Some(sub))
        }
        [plural] => path(None, plural, None, None),
        [plural, name] => path(None, plural, Some(name), None),
        [plural, name, sub] => path(None, plural, Some(name), Some(sub)),
        _ => None,
    }
    .filter(|path| !path.plural.is_empty() && path.name.as_deref() != Some(""))
}

/// Whether an `Accept` header takes JSON.
fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        matches!(media, "application/json" | "application/*" | "*/*" | "")
    })
}

fn not_found() -> ApiError {
    ApiError::NotFound("the server could not find the requested resource".into())
}

/// The verified user of a connection: 401 for no or a bad certificate.
/// The `stored-objects` readiness check: degraded while any stored object
/// is quarantined, naming them (to an authenticated caller; others get the
/// count).
fn stored_objects(objects: &crate::objects::ObjectStore, named: bool) -> Outcome {
    let quarantined = objects.quarantined();
    if quarantined.is_empty() {
        return Outcome::Passed;
    }
    let count = quarantined.len();
    let noun = if count == 1 { "object" } else { "objects" };
    if !named {
        return Outcome::Degraded(format!("{count} corrupt {noun} quarantined"));
    }
    let keys: Vec<String> = quarantined.iter().map(|(key, _)| key.to_string()).collect();
    Outcome::Degraded(format!(
        "{count} corrupt {noun} quarantined: {}",
        keys.join(", ")
    ))
}

fn authenticated(peer: &PeerIdentity) -> Result<&User, ApiError> {
    match peer {
        PeerIdentity::Verified(user) => Ok(user),
        PeerIdentity::Anonymous => Err(ApiError::Unauthorized(
            "a client certificate from the API CA is required".into(),
        )),
        PeerIdentity::Rejected(reason) => Err(ApiError::Unauthorized(reason.clone())),
    }
}

/// `kubectl version`'s view of the server (`version.Info`).
pub(crate) fn version_info() -> serde_json::Value {
    serde_json::json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0+relaymesh-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": platform(),
    })
}

/// `os/arch` in Go's spelling, as Kubernetes reports platforms.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse() {
        assert_eq!(Route::parse("/version"), Some(Route::Version));
        assert_eq!(
            Route::parse("/readyz"),
            Some(Route::Health("readyz".into(), None))
        );
        assert_eq!(
            Route::parse("/livez/ping"),
            Some(Route::Health("livez".into(), Some("ping".into())))
        );
        assert_eq!(
            Route::parse("/apis/relaymesh.dev/v1alpha1/agents/edge-1/"),
            Some(Route::Resource(ResourcePath {
                group: "relaymesh.dev".into(),
                version: "v1alpha1".into(),
                plural: "agents".into(),
                namespace: None,
                name: Some("edge-1".into()),
                subresource: None,
            }))
        );
        let Some(Route::Resource(path)) =
            Route::parse("/api/v1/namespaces/shop/configmaps/a/status")
        else {
            panic!("a resource path");
        };
        assert_eq!(
            (
                path.namespace.as_deref(),
                path.plural.as_str(),
                path.name.as_deref(),
                path.subresource.as_deref()
            ),
            (Some("shop"), "configmaps", Some("a"), Some("status"))
        );
        let Some(Route::Resource(path)) = Route::parse("/api/v1/namespaces/shop") else {
            panic!("a resource path");
        };
        assert_eq!(
            (path.plural.as_str(), path.name.as_deref()),
            ("namespaces", Some("shop"))
        );
        assert_eq!(Route::parse("/apis"), Some(Route::Groups));
        assert_eq!(
            Route::parse("/api/v1"),
            Some(Route::GroupVersion(String::new(), "v1".into()))
        );
        assert_eq!(
            Route::parse("/openapi/v3/apis/apps/v1"),
            Some(Route::OpenApi(Some("apis/apps/v1".into())))
        );
        assert_eq!(Route::parse("/openapi/v2"), Some(Route::OpenApiV2));
        assert!(accepts_json("application/json"));
        assert!(accepts_json("application/json;q=0.9,*/*;q=0.8"));
        assert!(!accepts_json(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        for unknown in ["/", "", "/api/v1/a/b/c/d", "/version/x", "//version"] {
            assert_eq!(Route::parse(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn requests_map_to_kubernetes_verbs() {
        let attributes = |method: Method, path: &str, query: Option<&str>| {
            Route::parse(path)
                .expect("a route")
                .attributes(&method, query)
        };
        let verb = |attributes: Attributes| match attributes {
            Attributes::Resource { verb, .. } => verb,
            other => panic!("a resource request, not {other:?}"),
        };
        let deployments = "/apis/apps/v1/namespaces/shop/deployments";
        assert_eq!(verb(attributes(Method::GET, deployments, None)), "list");
        assert_eq!(
            verb(attributes(Method::GET, deployments, Some("watch=true"))),
            "watch"
        );
        assert_eq!(verb(attributes(Method::POST, deployments, None)), "create");
        assert_eq!(
            verb(attributes(Method::DELETE, deployments, None)),
            "deletecollection"
        );
        let web = "/apis/apps/v1/namespaces/shop/deployments/web";
        assert_eq!(verb(attributes(Method::GET, web, None)), "get");
        assert_eq!(verb(attributes(Method::PATCH, web, None)), "patch");
        assert_eq!(verb(attributes(Method::PUT, web, None)), "update");
        assert_eq!(verb(attributes(Method::DELETE, web, None)), "delete");
        assert_eq!(
            attributes(Method::GET, "/apis", None),
            Attributes::Discovery
        );
    }

    #[test]
    fn only_verified_users_are_authenticated() {
        let user = User {
            name: "x".into(),
            groups: vec![],
        };
        assert!(authenticated(&PeerIdentity::Verified(user)).is_ok());
        assert!(matches!(
            authenticated(&PeerIdentity::Anonymous),
            Err(ApiError::Unauthorized(_))
        ));
        assert!(matches!(
            authenticated(&PeerIdentity::Rejected("foreign".into())),
            Err(ApiError::Unauthorized(_))
        ));
    }

    #[test]
    fn version_is_kubectl_compatible() {
        let info = version_info();
        assert_eq!(info["major"], "1");
        let git_version = info["gitVersion"].as_str().unwrap_or_default();
        assert!(
            git_version.starts_with("v1.33.0+relaymesh-"),
            "{git_version}"
        );
        assert!(info["platform"].as_str().is_some_and(|p| p.contains('/')));
    }
}
