//! Get, list, create, update, patch and delete on every served resource, the
//! way kube-apiserver answers them: Lists and Tables, `201` on create, `409`
//! on duplicates and stale resourceVersions, `dryRun=All`, label and field
//! selectors with `limit`/`continue`, and the status subresource.
//!
//! Watches are handed to the `watch` module; objects of read-only sources
//! come from the extension ([`crate::Extension::objects`]).

use std::sync::Arc;
use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tracing::info;

use super::body::{self, BodyError};
use super::collection::{object_name, select, store_error, too_deep_error, with_type_meta, Filter};
use super::context::Context;
use super::deletion::{self, Outcome, Propagation};
use super::field_validation::{self, FieldValidation};
use super::http::{json_reply, read_body, ApiBody, MAX_JSON_BODY};
use super::list_options::{self, ListAt};
use super::patch::{self, PatchError, PatchKind, TypeInfo};
use super::protobuf::{self, ProtobufError};
use super::query::Query;
use super::resources::{Resource, Source};
use super::table::{self, IncludeObject};
use super::{crd, scale, strategy, validation, watch, ApiError, Extension};
use crate::objects::{ObjectError, ObjectStore};

/// The most objects a list returns at once. A list without `limit` that
/// would return more is refused (422, naming `limit`) rather than cut short
/// or sent whole: a client that did not ask for pages would not look for a
/// `continue`, and a million Cluster objects in one reply is hundreds of
/// MiB. kubectl and client-go ask for pages of 500 by themselves. A larger
/// `limit` gets pages of this size, which Kubernetes allows.
pub(super) const MAX_UNPAGED_LIST: usize = 10_000;

/// A request path naming a resource, and perhaps a namespace, an object and
/// a subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResourcePath {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) plural: String,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) subresource: Option<String>,
}

/// Answers a request on a resource path.
pub(super) async fn handle<E: Extension>(
    context: &Arc<Context<E>>,
    path: ResourcePath,
    request: Request<Incoming>,
) -> Result<Response<ApiBody>, ApiError> {
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
        let manager = field_manager(&query, &header(&request, USER_AGENT));
        let body = if method == Method::GET {
            Vec::new()
        } else {
            read_body(request.into_body(), MAX_JSON_BODY).await?
        };
        let write = ScaleWrite {
            method,
            content_type: &content_type,
            body: &body,
            manager: &manager,
        };
        return scale_subresource(
            context,
            &resource,
            namespace.as_deref(),
            name,
            &write,
            &query,
        );
    }
    match (method, path.name.clone()) {
        (Method::GET, None) => {
            let filter = Filter::parse(&resource, namespace, &query)?;
            if matches!(query.get("watch"), Some("1" | "true")) {
                return watch::serve(
                    context,
                    &resource,
                    filter,
                    &query,
                    table::is_requested(&accept),
                    &accept,
                );
            }
            list(context, &resource, &filter, &query, &accept)
        }
        (Method::GET, Some(name)) => {
            let object = read(context, &resource, namespace.as_deref(), &name)?;
            if table::is_requested(&accept) {
                let include = IncludeObject::parse(query.get("includeObject"));
                let version = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let rendered = table::render(
                    &resource,
                    std::slice::from_ref(&object),
                    include,
                    version,
                    SystemTime::now(),
                );
                return json_reply(StatusCode::OK, &rendered);
            }
            json_reply(StatusCode::OK, &object)
        }
        (Method::POST, None) => {
            let manager = field_manager(&query, &header(&request, USER_AGENT));
            let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
            let mut object = decode_aside(body, &content_type).await?;
            generate_name(&mut object);
            create(
                context,
                &resource,
                namespace.as_deref(),
                object,
                &query,
                &manager,
            )
        }
        (Method::PUT, Some(name)) => {
            let manager = field_manager(&query, &header(&request, USER_AGENT));
            let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
            let object = decode_aside(body, &content_type).await?;
            update(context, &resource, &path, &name, object, &query, &manager)
        }
        (Method::PATCH, Some(name)) => {
            let agent = header(&request, USER_AGENT);
            let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
            // Decoding and applying a patch costs what decoding a body does
            // (see `decode_aside`): it runs on the blocking pool too.
            let context = Arc::clone(context);
            tokio::task::spawn_blocking(move || {
                patch_object(
                    &context,
                    &resource,
                    &path,
                    &name,
                    &content_type,
                    &agent,
                    &body,
                    &query,
                )
            })
            .await
            .map_err(|error| ApiError::Internal(format!("applying the patch failed: {error}")))?
        }
        (Method::DELETE, Some(name)) => {
            let options = delete_options(request, &content_type).await?;
            let propagation = Propagation::parse(&query, options.as_ref())?;
            let dry_run = is_dry_run(&query) || asks_dry_run(options.as_ref());
            delete(
                context,
                &resource,
                namespace.as_deref(),
                &name,
                dry_run,
                propagation,
            )
        }
        (Method::DELETE, None) if resource.has_delete_collection() => {
            if resource.namespaced && namespace.is_none() {
                return Err(ApiError::MethodNotAllowed(format!(
                    "deletecollection of {} needs a namespace: DELETE \
                     .../namespaces/NAMESPACE/{}",
                    resource.qualified(),
                    resource.plural
                )));
            }
            let filter = Filter::parse(&resource, namespace, &query)?;
            let options = delete_options(request, &content_type).await?;
            let propagation = Propagation::parse(&query, options.as_ref())?;
            let dry_run = is_dry_run(&query) || asks_dry_run(options.as_ref());
            delete_collection(context, &resource, &filter, dry_run, propagation)
        }
        (method, _) => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow method {method} on the requested resource"
        ))),
    }
}

fn list<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    filter: &Filter,
    query: &Query,
    accept: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let token = query.get("continue").filter(|token| !token.is_empty());
    let at = list_options::list_at(query, context.objects.resource_version())?;
    let (mut objects, version) = match (token, at) {
        (None, ListAt::Exact(version)) if resource.source == Source::Stored => (
            snapshot_at(context, resource, filter, version, TOO_OLD_VERSION)?,
            version.to_string(),
        ),
        (None, _) => select(context, resource, filter)?,
        (Some(token), _) => {
            let (snapshot, after) = decode_continue(token)?;
            let (mut objects, version) = match (resource.source, snapshot) {
                // Later pages show the store as the first page saw it.
                (Source::Stored, Some(snapshot)) => (
                    snapshot_at(context, resource, filter, snapshot, TOO_OLD_CONTINUE)?,
                    snapshot.to_string(),
                ),
                // A read-only view keeps no history: its pages are read as
                // they are now.
                _ => select(context, resource, filter)?,
            };
            objects.retain(|object| position(object) > after);
            (objects, version)
        }
    };
    let mut next = None;
    let limit: usize = query
        .get("limit")
        .and_then(|limit| limit.parse().ok())
        .unwrap_or(0);
    if limit == 0 && objects.len() > MAX_UNPAGED_LIST {
        return Err(unpaged_list_too_long(resource, objects.len()));
    }
    // A page may hold fewer objects than asked, as in Kubernetes: the
    // client follows `continue` either way.
    let limit = limit.min(MAX_UNPAGED_LIST);
    if limit > 0 && objects.len() > limit {
        objects.truncate(limit);
        next = objects
            .last()
            .map(|last| encode_continue(&version, &position(last)));
    }
    if table::is_requested(accept) {
        let include = IncludeObject::parse(query.get("includeObject"));
        let mut rendered = table::render(resource, &objects, include, &version, SystemTime::now());
        if let Some(next) = next {
            rendered["metadata"]["continue"] = json!(next);
        }
        return json_reply(StatusCode::OK, &rendered);
    }
    let mut metadata = json!({"resourceVersion": version});
    if let Some(next) = next {
        metadata["continue"] = json!(next);
    }
    let list = json!({
        "apiVersion": resource.api_version(),
        "kind": format!("{}List", resource.kind),
        "metadata": metadata,
        "items": objects,
    });
    json_reply(StatusCode::OK, &list)
}

/// The refusal of a list without `limit` that would return more than
/// [`MAX_UNPAGED_LIST`] objects.
fn unpaged_list_too_long(resource: &Resource, count: usize) -> ApiError {
    ApiError::OverLimit {
        limit: crate::limits::ApiLimit::UnpagedList,
        error: Box::new(ApiError::Invalid {
            field: "limit".into(),
            message: format!(
                "Required value: there are {count} {}, more than the {MAX_UNPAGED_LIST} this \
                 server returns at once; ask for pages with ?limit=500 and follow \
                 metadata.continue (kubectl get and relayctl get do so by themselves)",
                resource.qualified()
            ),
        }),
    }
}

fn read<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Value, ApiError> {
    let object = if resource.source == Source::Stored {
        context
            .objects
            .get(&resource.key(namespace, name))
            .map_err(|error| store_error(resource, name, error))?
    } else {
        context
            .extension
            .objects(resource)
            .into_iter()
            .find(|object| object.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    };
    let object = object.ok_or_else(|| resource.not_found(name))?;
    Ok(with_type_meta(resource, vec![object]).remove(0))
}

fn create<E: Extension>(
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

#[allow(clippy::too_many_arguments)]
fn patch_object<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    path: &ResourcePath,
    name: &str,
    content_type: &str,
    user_agent: &str,
    body: &[u8],
    query: &Query,
) -> Result<Response<ApiBody>, ApiError> {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    let kind = match media_type {
        "application/json-patch+json" => PatchKind::Json,
        "application/merge-patch+json" => PatchKind::Merge,
        "application/strategic-merge-patch+json" if resource.builtin => PatchKind::StrategicMerge,
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
            let field_manager = query
                .get("fieldManager")
                .filter(|manager| !manager.is_empty())
                .ok_or_else(|| {
                    ApiError::BadRequest("PATCH with apply requires the fieldManager query parameter".into())
                })?
                .to_string();
            PatchKind::Apply { field_manager, force: query.get("force") == Some("true") }
        }
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
            )))
        }
    };
    let namespace = path.namespace.as_deref();
    let key = resource.key(namespace, name);
    let type_info = TypeInfo {
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        builtin: resource.builtin,
    };
    // A concurrent writer can slip in between read and write: retry then.
    for _ in 0..5 {
        let live = context
            .objects
            .get(&key)
            .map_err(|error| store_error(resource, name, error))?;
        if live.is_none() && !matches!(kind, PatchKind::Apply { .. }) {
            return Err(resource.not_found(name));
        }
        let mut object =
            patch::apply_patch(&kind, live.as_ref(), body, &type_info).map_err(patch_error)?;
        if !matches!(kind, PatchKind::Apply { .. }) {
            let manager = field_manager(query, user_agent);
            patch::track_update(live.as_ref(), &mut object, &manager);
        }
        let Some(live) = live else {
            if object.pointer("/metadata/name").is_none()
                && object.get("metadata").is_some_and(Value::is_object)
            {
                object["metadata"]["name"] = json!(name);
            }
            // The name on the URL is the object's: checked here, as
            // `create` has no URL name to check it against.
            validation::validate(resource, namespace, Some(name), &object)?;
            return create(context, resource, namespace, object, query, "");
        };
        let subresource = path.subresource.is_some();
        let warnings = admit(resource, namespace, Some(name), &object, query, subresource)?;
        keep_other_half(&live, &mut object, path.subresource.is_some());
        strategy::prepare(resource, &mut object, false);
        crd::prepare(resource, &mut object, &context.reserved_groups)?;
        admit_write(context, resource, namespace, &object)?;
        // A resourceVersion the patch sets is a precondition, as in
        // kube-apiserver (`kubectl annotate --resource-version`).
        if let Some(asked) = patch_precondition(&kind, body) {
            let stored = live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if Some(asked.as_str()) != stored {
                return Err(store_error(
                    resource,
                    name,
                    ObjectError::Conflict {
                        stored: 0,
                        given: asked,
                    },
                ));
            }
        }
        // The patch applies to what was read: make the store check that.
        object["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
        let result = store_update(context, &key, object, query);
        match result {
            Ok(stored) => {
                info!(resource = %resource.qualified(), namespace, name, patch = media_type, "patched");
                return json_reply(StatusCode::OK, &stored)
                    .map(|reply| with_warnings(reply, &warnings));
            }
            Err(ObjectError::Conflict { .. }) => continue,
            Err(error) => return Err(store_error(resource, name, error)),
        }
    }
    Err(kept_changing(resource, name))
}

fn delete<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    dry_run: bool,
    propagation: Propagation,
) -> Result<Response<ApiBody>, ApiError> {
    crd::check_delete(resource, name)?;
    let key = resource.key(namespace, name);
    // A stored object that cannot be decoded has no finalizers or
    // dependents to honour: it is removed as it is.
    if !dry_run
        && resource.source == Source::Stored
        && context
            .objects
            .remove_quarantined(&key)
            .map_err(|error| store_error(resource, name, error))?
    {
        info!(resource = %resource.qualified(), namespace, name, "deleted a quarantined object");
        let status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": resource.group, "kind": resource.plural},
        });
        return json_reply(StatusCode::OK, &status);
    }
    let outcome = deletion::delete(&context.objects, &key, propagation, dry_run)
        .map_err(|error| store_error(resource, name, error))?;
    match outcome {
        Outcome::Gone(deleted) => {
            if !dry_run {
                crd::delete_contents(
                    &context.objects,
                    resource,
                    &deleted,
                    &context.reserved_groups,
                )?;
                info!(resource = %resource.qualified(), namespace, name, ?propagation, "deleted");
            }
            let status = json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "group": resource.group, "kind": resource.plural, "uid": deleted.pointer("/metadata/uid")},
            });
            json_reply(StatusCode::OK, &status)
        }
        // As kube-apiserver: 202 and the object, marked, while finalizers
        // (or dependents, in the foreground) hold it.
        Outcome::Pending(marked) => json_reply(
            StatusCode::ACCEPTED,
            &with_type_meta(resource, vec![marked]).remove(0),
        ),
    }
}

/// The `DeleteOptions` body of a delete, if it has one.
async fn delete_options(
    request: Request<Incoming>,
    content_type: &str,
) -> Result<Option<Value>, ApiError> {
    let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode(&body, content_type).map(Some)
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

/// Writes `object` over the stored one at `key`, or only checks that it
/// would, with `dryRun=All`.
fn store_update<E: Extension>(
    context: &Context<E>,
    key: &crate::objects::ObjectKey,
    object: Value,
    query: &Query,
) -> Result<Value, ObjectError> {
    if is_dry_run(query) {
        context.objects.update_dry_run(key, object)
    } else {
        let stored = context.objects.update(key, object)?;
        // A write that removed the last finalizer of a marked object
        // completes its deletion.
        deletion::finish(&context.objects, key, &stored)?;
        Ok(stored)
    }
}

/// The answer when an object changed under every retry of a
/// read-modify-write.
fn kept_changing(resource: &Resource, name: &str) -> ApiError {
    ApiError::Conflict(format!(
        "{} {name:?} kept changing; try again",
        resource.qualified()
    ))
}

/// `deletecollection`: deletes every object of `resource` that `filter`
/// (namespace, label and field selectors) matches, and answers with the
/// list of what it deleted, as kube-apiserver does. An object deleted by
/// someone else meanwhile is skipped; with `dryRun=All` nothing is deleted.
fn delete_collection<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    filter: &Filter,
    dry_run: bool,
    propagation: Propagation,
) -> Result<Response<ApiBody>, ApiError> {
    let (objects, _) = select(context, resource, filter)?;
    let mut deleted = Vec::with_capacity(objects.len());
    for object in objects {
        let name = object_name(&object);
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|_| resource.namespaced);
        if dry_run {
            deleted.push(object);
            continue;
        }
        match deletion::delete(
            &context.objects,
            &resource.key(namespace, &name),
            propagation,
            false,
        ) {
            Ok(Outcome::Gone(gone)) => {
                crd::delete_contents(&context.objects, resource, &gone, &context.reserved_groups)?;
                deleted.push(gone);
            }
            Ok(Outcome::Pending(marked)) => deleted.push(marked),
            Err(crate::objects::ObjectError::NotFound(_)) => {}
            Err(error) => return Err(store_error(resource, &name, error)),
        }
    }
    info!(resource = %resource.qualified(), namespace = ?filter.namespace, deleted = deleted.len(), "deleted a collection");
    let list = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": context.objects.resource_version().to_string()},
        "items": with_type_meta(resource, deleted),
    });
    json_reply(StatusCode::OK, &list)
}

/// On the main resource, the stored status wins; on the status subresource,
/// everything but the status is kept.
fn keep_other_half(live: &Value, object: &mut Value, status_subresource: bool) {
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

/// What a write must pass beyond its verb, with `object` as it will be
/// stored: a role or binding may grant only what its writer holds
/// ([`crate::rbac::Rbac::check_escalation`], when the extension authorizes
/// with RBAC), and the extension's own check
/// ([`Extension::admit_write`]).
fn admit_write<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    object: &Value,
) -> Result<(), ApiError> {
    let crate::tls::PeerIdentity::Verified(user) = &context.peer else {
        return Ok(());
    };
    if let Some(rbac) = context.extension.rbac() {
        if resource.group == crate::rbac::GROUP {
            rbac.check_escalation(
                &*context.extension,
                user,
                &resource.plural,
                namespace,
                object,
            )
            .map_err(ApiError::Forbidden)?;
        }
    }
    context
        .extension
        .admit_write(user, resource, namespace, object)
        .map_err(ApiError::Forbidden)
}

fn require_namespace(
    store: &ObjectStore,
    resource: &Resource,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let (true, Some(namespace)) = (resource.namespaced, namespace) else {
        return Ok(());
    };
    let key = crate::objects::ObjectKey::new("", "namespaces", None, namespace);
    match store.get(&key) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ApiError::NotFound(format!(
            "namespaces {namespace:?} not found"
        ))),
        Err(error) => Err(ApiError::Internal(error.to_string())),
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

fn position(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"))
}

/// The 410 of a continue token older than the store's history.
const TOO_OLD_CONTINUE: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter.";

/// The 410 of an exact list older than the store's history.
const TOO_OLD_VERSION: &str = "The resourceVersion for the provided list is too old.";

/// A continue token: the list's resourceVersion (empty for the inventory,
/// which has none) and the position of the page's last object.
fn encode_continue(version: &str, position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{version}|{position}"))
}

/// The version and position a continue token holds.
fn decode_continue(token: &str) -> Result<(Option<u64>, String), ApiError> {
    let invalid = || ApiError::BadRequest("invalid continue token".into());
    let text = URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(invalid)?;
    let (version, position) = text.split_once('|').ok_or_else(invalid)?;
    let version = match version {
        "" => None,
        version => Some(version.parse().map_err(|_| invalid())?),
    };
    Ok((version, position.to_string()))
}

/// The objects of `resource` that `filter` selects, as they were at
/// `version`; `410 Expired` when the store's history no longer reaches back
/// that far, worded as kube-apiserver words it.
fn snapshot_at<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    filter: &Filter,
    version: u64,
    too_old: &str,
) -> Result<Vec<Value>, ApiError> {
    let objects = context
        .objects
        .list_at(
            &resource.group,
            &resource.plural,
            filter.namespace.as_deref(),
            version,
        )
        .map_err(|error| match error {
            ObjectError::Gone { .. } => ApiError::Gone(too_old.to_string()),
            error => store_error(resource, "", error),
        })?;
    let objects = objects
        .into_iter()
        .filter(|object| filter.matches(object))
        .collect();
    Ok(with_type_meta(resource, objects))
}

/// [`decode`] on tokio's blocking pool. A body of the largest size nested
/// to the depth limit takes seconds to decode as YAML; on the API's async
/// workers three such bodies held `/healthz` for 6 s on 2 cores (`testbed
/// bench decode`, issue 29). Aside, they only share the CPU.
async fn decode_aside(body: Vec<u8>, content_type: &str) -> Result<Value, ApiError> {
    let content_type = content_type.to_string();
    tokio::task::spawn_blocking(move || decode(&body, &content_type))
        .await
        .map_err(|error| ApiError::Internal(format!("decoding the body failed: {error}")))?
}

/// The object in a create or update body: JSON, YAML, or the protobuf of
/// the few kinds kubectl's typed commands send.
pub(super) fn decode(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") {
        let mut object = protobuf::decode(body).map_err(|error| match error {
            ProtobufError::UnknownKind { .. } => ApiError::UnsupportedMediaType(error.to_string()),
            _ => ApiError::BadRequest(error.to_string()),
        })?;
        // client-go writes a status of zero values (`observedGeneration:
        // 0`) for a new object; kubectl wait would read it as stale.
        if object.get("status").is_some_and(is_zero) {
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
        }
        crate::depth::check_value(&object).map_err(too_deep_error)?;
        return Ok(object);
    }
    if content_type.contains("cbor") {
        return Err(ApiError::UnsupportedMediaType(
            "CBOR bodies are not supported; send JSON".into(),
        ));
    }
    // YAML only when the content type says so: a JSON body that fails is
    // not tried again as YAML (whose parse of deep nesting is slow).
    let decoded = if body::is_yaml(content_type) {
        body::yaml(body)
    } else {
        body::json(body)
    };
    decoded.map_err(body_error)
}

/// The answer to a body that cannot be decoded: 422 naming the path when
/// it is too deep, else 400.
pub(super) fn body_error(error: BodyError) -> ApiError {
    match error {
        BodyError::TooDeep(too_deep) => too_deep_error(too_deep),
        other => ApiError::BadRequest(format!("cannot decode the object: {other}")),
    }
}

fn header(request: &Request<Incoming>, name: hyper::header::HeaderName) -> String {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// `fieldManager`, else the user agent's program name, as kube-apiserver
/// defaults it.
fn field_manager(query: &Query, user_agent: &str) -> String {
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

fn is_dry_run(query: &Query) -> bool {
    query.get("dryRun") == Some("All")
}

/// The `metadata.resourceVersion` a merge, strategic merge or apply patch
/// sets, if any: a precondition on the object it patches.
fn patch_precondition(kind: &PatchKind, body: &[u8]) -> Option<String> {
    if matches!(kind, PatchKind::Json) {
        return None;
    }
    let patch = match kind {
        PatchKind::Apply { .. } => body::yaml(body),
        _ => body::json(body),
    }
    .ok()?;
    patch
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|asked| !asked.is_empty())
        .map(str::to_string)
}

/// Whether `value` holds nothing but zero values (`""`, `0`, `false`,
/// empty lists and maps).
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.iter().all(is_zero),
        Value::Object(fields) => fields.values().all(is_zero),
    }
}

/// Whether a `DeleteOptions` body asks for a dry run (`dryRun: ["All"]`,
/// what `kubectl delete --dry-run=server` sends).
fn asks_dry_run(options: Option<&Value>) -> bool {
    options
        .and_then(|options| options.get("dryRun"))
        .and_then(Value::as_array)
        .is_some_and(|modes| modes.iter().any(|mode| mode == "All"))
}

fn field_validation(query: &Query) -> Result<FieldValidation, ApiError> {
    FieldValidation::parse(query.get("fieldValidation"))
}

/// The checks of an object about to be written, in kube-apiserver's order
/// (decoding, where `Strict` refuses unknown fields, before validation):
/// the generic checks, unknown fields and JSON types, then the
/// extension's validator. Returns the `Warning`s to send: unknown fields
/// under `Warn`, and the extension's advice on a write to the main
/// resource (`status` is the server's to write, and a write to the main
/// resource keeps the stored one, so its status is not checked).
fn admit(
    resource: &Resource,
    namespace: Option<&str>,
    name: Option<&str>,
    object: &Value,
    query: &Query,
    subresource: bool,
) -> Result<Vec<String>, ApiError> {
    validation::validate(resource, namespace, name, object)?;
    let mode = field_validation(query)?;
    let mut warnings = match subresource {
        true => field_validation::check(mode, resource, object)?,
        false => field_validation::check_main(mode, resource, object)?,
    };
    validation::validate_for_extension(resource, namespace, object).map_err(|error| {
        // Under `Warn` a misspelt field is stored, so the refusal it
        // causes (a required field missing) says which field it was: the
        // `Warning` headers do not travel with an error.
        match error {
            ApiError::Invalid { field, message } if !warnings.is_empty() => ApiError::Invalid {
                field,
                message: format!("{message} ({})", warnings.join(", ")),
            },
            error => error,
        }
    })?;
    if let (Some(warner), false) = (&resource.warner, subresource) {
        warnings.extend(warner.warnings(namespace, object));
    }
    Ok(warnings)
}

/// `reply` with one `Warning` header per message, as kube-apiserver sends
/// them (`299 - "message"`); kubectl prints each as `Warning: message`.
fn with_warnings(mut reply: Response<ApiBody>, warnings: &[String]) -> Response<ApiBody> {
    for warning in warnings {
        let text = format!("299 - {:?}", warning.replace(['\r', '\n'], " "));
        if let Ok(value) = hyper::header::HeaderValue::from_str(&text) {
            reply.headers_mut().append(hyper::header::WARNING, value);
        }
    }
    reply
}

fn patch_error(error: PatchError) -> ApiError {
    match error {
        PatchError::BadPatch(message) => ApiError::BadRequest(message),
        PatchError::Invalid(message) => ApiError::Invalid {
            field: String::new(),
            message,
        },
        PatchError::Conflict { message, causes } => ApiError::FieldConflicts { message, causes },
        PatchError::NotFound => ApiError::NotFound("the object to patch does not exist".into()),
        PatchError::UnsupportedMediaType(message) => ApiError::UnsupportedMediaType(message),
        PatchError::TooDeep(too_deep) => too_deep_error(too_deep),
        PatchError::TooLarge(message) => ApiError::OverLimit {
            limit: crate::limits::ApiLimit::JsonPatch,
            error: Box::new(ApiError::PayloadTooLarge(message)),
        },
    }
}
