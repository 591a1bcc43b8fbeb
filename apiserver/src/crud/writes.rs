//! Whole-object writes: `POST` creates an object (naming it from
//! `generateName` when it has no name), `PUT` replaces one, or its status
//! on the status subresource.

use hyper::body::Incoming;
use hyper::header::USER_AGENT;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use tracing::info;

use super::admission::{admit, admit_write, require_namespace, with_warnings};
use super::decoding::decode_aside;
use super::overwrite::store_update;
use super::request::{field_manager, header, is_dry_run, ResourcePath};
use crate::collection::{object_name, store_error};
use crate::context::Context;
use crate::http::{json_reply, read_body, ApiBody, MAX_JSON_BODY};
use crate::patch;
use crate::query::Query;
use crate::resources::Resource;
use crate::{crd, strategy, validation, ApiError, Extension};

/// `POST` on a collection: creates the object in the body.
pub(super) async fn post<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    request: Request<Incoming>,
    query: &Query,
    content_type: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let manager = field_manager(query, &header(&request, USER_AGENT));
    let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
    let mut object = decode_aside(body, content_type).await?;
    generate_name(&mut object);
    create(context, resource, namespace, object, query, &manager)
}

/// `PUT` on an object: replaces it with the object in the body.
pub(super) async fn put<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    path: &ResourcePath,
    name: &str,
    request: Request<Incoming>,
    query: &Query,
    content_type: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let manager = field_manager(query, &header(&request, USER_AGENT));
    let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
    let object = decode_aside(body, content_type).await?;
    update(context, resource, path, name, object, query, &manager)
}

pub(super) fn create<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    mut object: Value,
    query: &Query,
    manager: &str,
) -> Result<Response<ApiBody>, ApiError> {
    validation::default_type_meta(resource, &mut object)?;
    let warnings = admit(resource, namespace, None, &object, query, false)?;
    require_namespace(&context.objects, resource, namespace)?;
    strategy::prepare(resource, &mut object, true);
    crd::prepare(resource, &mut object, &context.reserved_groups)?;
    admit_write(context, resource, namespace, &object)?;
    if !manager.is_empty() {
        patch::track_update(None, &mut object, manager);
    }
    let name = object_name(&object);
    let key = resource.key(namespace, &name);
    let stored = if is_dry_run(query) {
        context.objects.create_dry_run(&key, object)
    } else {
        context.objects.create(&key, object)
    }
    .map_err(|error| store_error(resource, &name, error))?;
    info!(resource = %resource.qualified(), namespace, name, "created");
    json_reply(StatusCode::CREATED, &stored).map(|reply| with_warnings(reply, &warnings))
}

fn update<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    path: &ResourcePath,
    name: &str,
    mut object: Value,
    query: &Query,
    manager: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let namespace = path.namespace.as_deref();
    validation::default_type_meta(resource, &mut object)?;
    let subresource = path.subresource.is_some();
    let warnings = admit(resource, namespace, Some(name), &object, query, subresource)?;
    let key = resource.key(namespace, name);
    let live = context
        .objects
        .get(&key)
        .map_err(|error| store_error(resource, name, error))?
        .ok_or_else(|| resource.not_found(name))?;
    keep_other_half(&live, &mut object, path.subresource.is_some());
    strategy::prepare(resource, &mut object, false);
    crd::prepare(resource, &mut object, &context.reserved_groups)?;
    admit_write(context, resource, namespace, &object)?;
    patch::track_update(Some(&live), &mut object, manager);
    let stored = store_update(context, &key, object, query)
        .map_err(|error| store_error(resource, name, error))?;
    info!(resource = %resource.qualified(), namespace, name, "updated");
    json_reply(StatusCode::OK, &stored).map(|reply| with_warnings(reply, &warnings))
}

/// On the main resource, the stored status wins; on the status subresource,
/// everything but the status is kept.
pub(super) fn keep_other_half(live: &Value, object: &mut Value, status_subresource: bool) {
    if status_subresource {
        let status = object.get("status").cloned();
        let mut merged = live.clone();
        match status {
            Some(status) => merged["status"] = status,
            None => {
                if let Some(fields) = merged.as_object_mut() {
                    fields.remove("status");
                }
            }
        }
        merged["metadata"]["resourceVersion"] = object["metadata"]["resourceVersion"].clone();
        *object = merged;
    } else if let Some(status) = live.get("status") {
        object["status"] = status.clone();
    }
}

/// `metadata.generateName` plus five random characters, when there is no name.
fn generate_name(object: &mut Value) {
    let has_name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let prefix = object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let (false, Some(prefix)) = (has_name, prefix) {
        use rand::Rng;
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut random = rand::thread_rng();
        let suffix: String = (0..5)
            .map(|_| ALPHABET[random.gen_range(0..ALPHABET.len())] as char)
            .collect();
        object["metadata"]["name"] = json!(format!("{prefix}{suffix}"));
    }
}
