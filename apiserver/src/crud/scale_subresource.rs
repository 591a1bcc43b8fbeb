//! The `scale` subresource of workloads: `GET` their `Scale` view, or
//! change `spec.replicas` with `PUT` or `PATCH` of that view, the way
//! `kubectl scale` and autoscalers do.

use hyper::body::Incoming;
use hyper::header::USER_AGENT;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use tracing::info;

use super::decoding::decode;
use super::overwrite::{kept_changing, store_update};
use super::request::{field_manager, header};
use crate::collection::store_error;
use crate::context::Context;
use crate::http::{json_reply, read_body, ApiBody, MAX_JSON_BODY};
use crate::objects::ObjectError;
use crate::patch::{self, PatchKind};
use crate::query::Query;
use crate::resources::Resource;
use crate::{scale, ApiError, Extension};

/// A request on the `scale` subresource of the object `name`.
pub(super) async fn serve<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    request: Request<Incoming>,
    query: &Query,
    content_type: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let method = request.method().clone();
    let manager = field_manager(query, &header(&request, USER_AGENT));
    let body = if method == Method::GET {
        Vec::new()
    } else {
        read_body(request.into_body(), MAX_JSON_BODY).await?
    };
    let write = ScaleWrite {
        method,
        content_type,
        body: &body,
        manager: &manager,
    };
    scale_subresource(context, resource, namespace, name, &write, query)
}

/// A request on the `scale` subresource.
struct ScaleWrite<'a> {
    method: Method,
    content_type: &'a str,
    body: &'a [u8],
    manager: &'a str,
}

/// The `scale` subresource ([`scale`]): `GET` the `Scale` view, or change
/// `spec.replicas` with `PUT` or `PATCH`, and answer with the new view.
fn scale_subresource<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    request: &ScaleWrite<'_>,
    query: &Query,
) -> Result<Response<ApiBody>, ApiError> {
    let key = resource.key(namespace, name);
    // A concurrent writer can slip in between read and write: retry then,
    // unless the client named the version it read.
    for _ in 0..5 {
        let live = context
            .objects
            .get(&key)
            .map_err(|error| store_error(resource, name, error))?
            .ok_or_else(|| resource.not_found(name))?;
        let (replicas, pinned) = match request.method {
            Method::GET => return json_reply(StatusCode::OK, &scale::view(&live)),
            Method::PUT => scale::replicas_from_put(&decode(request.body, request.content_type)?)?,
            Method::PATCH => {
                let kind = match request.content_type.split(';').next().unwrap_or_default().trim() {
                    "application/json-patch+json" => PatchKind::Json,
                    "application/merge-patch+json" => PatchKind::Merge,
                    "application/strategic-merge-patch+json" => PatchKind::StrategicMerge,
                    other => {
                        return Err(ApiError::UnsupportedMediaType(format!(
                            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
                        )))
                    }
                };
                (
                    scale::replicas_from_patch(&kind, &live, request.body)?,
                    None,
                )
            }
            ref other => {
                return Err(ApiError::MethodNotAllowed(format!(
                    "the server does not allow method {other} on the scale subresource"
                )))
            }
        };
        let mut object = scale::with_replicas(live.clone(), replicas);
        patch::track_update(Some(&live), &mut object, request.manager);
        object["metadata"]["resourceVersion"] = match &pinned {
            Some(version) => json!(version),
            None => live["metadata"]["resourceVersion"].clone(),
        };
        let result = store_update(context, &key, object, query);
        match result {
            Ok(stored) => {
                info!(resource = %resource.qualified(), namespace, name, replicas, "scaled");
                return json_reply(StatusCode::OK, &scale::view(&stored));
            }
            Err(ObjectError::Conflict { .. }) if pinned.is_none() => continue,
            Err(error) => return Err(store_error(resource, name, error)),
        }
    }
    Err(kept_changing(resource, name))
}
