//! Get, list, create, update, patch and delete on every served resource, the
//! way kube-apiserver answers them: Lists and Tables, `201` on create, `409`
//! on duplicates and stale resourceVersions, `dryRun=All`, label and field
//! selectors with `limit`/`continue`, and the status subresource.
//!
//! Watches are handed to the `watch` module; objects of read-only sources
//! come from the extension ([`crate::Extension::objects`]).
//!
//! Where the work is split: [`handle`] (here) finds the resource a path
//! names and hands the request to its verb's module: `reads`, `writes`
//! (create and replace), `patches`, `deletes`, and `scale_subresource`.
//! What several of them share sits in leaves: `request` (what the path,
//! headers and query ask), `decoding` (request bodies), `admission` (what a
//! write must pass) and `overwrite` (writing over a stored object).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response};

use super::context::Context;
use super::http::ApiBody;
use super::query::Query;
use super::resources::Resource;
use super::{scale, ApiError, Extension};
use request::header;

mod admission;
mod decoding;
mod deletes;
mod overwrite;
mod patches;
mod reads;
mod request;
mod scale_subresource;
mod writes;

pub(super) use decoding::{body_error, decode};
pub(super) use request::ResourcePath;

/// Answers a request on a resource path.
pub(super) async fn handle<E: Extension>(
    context: &Arc<Context<E>>,
    path: ResourcePath,
    request: Request<Incoming>,
) -> Result<Response<ApiBody>, ApiError> {
    let resource = served(context, &path)?;
    let query = Query::parse(request.uri().query())?;
    let accept = header(&request, ACCEPT);
    let method = request.method().clone();
    if method != Method::GET && !resource.is_writable() {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} is read-only: it is built from the tree",
            resource.qualified()
        )));
    }
    let content_type = header(&request, CONTENT_TYPE);
    let namespace = path.namespace.clone();
    if let (Some("scale"), Some(name)) = (path.subresource.as_deref(), path.name.as_deref()) {
        return scale_subresource::serve(
            context,
            &resource,
            namespace.as_deref(),
            name,
            request,
            &query,
            &content_type,
        )
        .await;
    }
    match (method, path.name.clone()) {
        (Method::GET, None) => reads::list_or_watch(context, &resource, namespace, &query, &accept),
        (Method::GET, Some(name)) => reads::get(
            context,
            &resource,
            namespace.as_deref(),
            &name,
            &query,
            &accept,
        ),
        (Method::POST, None) => {
            writes::post(
                context,
                &resource,
                namespace.as_deref(),
                request,
                &query,
                &content_type,
            )
            .await
        }
        (Method::PUT, Some(name)) => {
            writes::put(
                context,
                &resource,
                &path,
                &name,
                request,
                &query,
                &content_type,
            )
            .await
        }
        (Method::PATCH, Some(name)) => {
            patches::patch(context, resource, path, name, request, query, content_type).await
        }
        (Method::DELETE, Some(name)) => {
            deletes::delete_one(
                context,
                &resource,
                namespace.as_deref(),
                &name,
                request,
                &query,
                &content_type,
            )
            .await
        }
        (Method::DELETE, None) if resource.has_delete_collection() => {
            deletes::delete_all(
                context,
                &resource,
                namespace,
                request,
                &query,
                &content_type,
            )
            .await
        }
        (method, _) => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow method {method} on the requested resource"
        ))),
    }
}

/// The resource `path` names, if it is served there: a namespaced path
/// needs a namespaced kind, and a subresource one the kind has.
fn served<E: Extension>(context: &Context<E>, path: &ResourcePath) -> Result<Resource, ApiError> {
    let registry = context.registry()?;
    let not_served =
        || ApiError::NotFound("the server could not find the requested resource".into());
    let resource = registry
        .find(&path.group, &path.version, &path.plural)
        .ok_or_else(not_served)?
        .clone();
    if path.namespace.is_some() && !resource.namespaced {
        return Err(not_served());
    }
    match path.subresource.as_deref() {
        None => {}
        Some("status") if resource.status => {}
        Some("scale") if scale::is_scalable(&resource) && path.name.is_some() => {}
        Some(_) => return Err(not_served()),
    }
    Ok(resource)
}
