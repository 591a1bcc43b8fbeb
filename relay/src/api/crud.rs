//! Get, list, create, update, patch and delete on every served resource, the
//! way kube-apiserver answers them: Lists and Tables, `201` on create, `409`
//! on duplicates and stale resourceVersions, `dryRun=All`, label and field
//! selectors with `limit`/`continue`, and the status subresource.
//!
//! Watches are handed to the `watch` module; objects of read-only sources
//! come from the backend's view of the tree (the `inventory` module).

use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tracing::info;

use super::patch::{self, PatchError, PatchKind, TypeInfo};
use super::protobuf::{self, ProtobufError};
use super::query::Query;
use super::resources::{Registry, Resource, Source};
use super::routes::{json_reply, read_body, ApiBody, Context, MAX_JSON_BODY};
use super::selector::{FieldSelector, LabelSelector};
use super::table::{self, IncludeObject};
use super::{crd, inventory, scale, validation, watch, ApiError, Backend};
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

/// Which objects of a resource a list or watch wants.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    pub(super) namespace: Option<String>,
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
}

impl Filter {
    pub(super) fn parse(namespace: Option<String>, query: &Query) -> Result<Self, ApiError> {
        let bad = |error: super::selector::SelectorError| ApiError::BadRequest(error.to_string());
        Ok(Self {
            namespace,
            labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())
                .map_err(bad)?,
            fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())
                .map_err(bad)?,
        })
    }

    /// Whether `object` passes.
    pub(super) fn matches(&self, object: &Value) -> bool {
        self.labels.matches_object(object) && self.fields.matches_object(object)
    }
}

/// Answers a request on a resource path.
pub(super) async fn handle<B: Backend>(
    context: &Context<B>,
    path: ResourcePath,
    request: Request<Incoming>,
) -> Result<Response<ApiBody>, ApiError> {
    let registry = Registry::load(&context.objects)?;
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
        None | Some("status") => {}
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
            let filter = Filter::parse(namespace, &query)?;
            if matches!(query.get("watch"), Some("1" | "true")) {
                return watch::serve(
                    context,
                    &resource,
                    filter,
                    &query,
                    table::is_requested(&accept),
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
            let mut object = decode(&body, &content_type)?;
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
            let object = decode(&body, &content_type)?;
            update(context, &resource, &path, &name, object, &query, &manager)
        }
        (Method::PATCH, Some(name)) => {
            let agent = header(&request, USER_AGENT);
            let body = read_body(request.into_body(), MAX_JSON_BODY).await?;
            patch_object(
                context,
                &resource,
                &path,
                &name,
                &content_type,
                &agent,
                &body,
                &query,
            )
        }
        (Method::DELETE, Some(name)) => {
            delete(context, &resource, namespace.as_deref(), &name, &query)
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
            let filter = Filter::parse(namespace, &query)?;
            delete_collection(context, &resource, &filter, &query)
        }
        (method, _) => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow method {method} on the requested resource"
        ))),
    }
}

/// The objects of `resource` matching `filter`, and their list version.
pub(super) fn select<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    filter: &Filter,
) -> Result<(Vec<Value>, String), ApiError> {
    let (objects, version) = if resource.source == Source::Stored {
        let (objects, version) = context
            .objects
            .list(
                &resource.group,
                &resource.plural,
                filter.namespace.as_deref(),
            )
            .map_err(|error| store_error(resource, "", error))?;
        (objects, version.to_string())
    } else {
        (
            inventory::objects(resource.source, &context.backend.nodes()),
            String::new(),
        )
    };
    let objects = objects
        .into_iter()
        .filter(|object| filter.matches(object))
        .collect();
    Ok((with_type_meta(resource, objects), version))
}

fn list<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    filter: &Filter,
    query: &Query,
    accept: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let (mut objects, version) = select(context, resource, filter)?;
    if let Some(token) = query.get("continue").filter(|token| !token.is_empty()) {
        let after = decode_continue(token)?;
        objects.retain(|object| position(object) > after);
    }
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
            .map(|last| URL_SAFE_NO_PAD.encode(position(last)));
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
        limit: crate::limits::Limit::ApiUnpagedList,
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

fn read<B: Backend>(
    context: &Context<B>,
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
        inventory::objects(resource.source, &context.backend.nodes())
            .into_iter()
            .find(|object| object.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    };
    let object = object.ok_or_else(|| resource.not_found(name))?;
    Ok(with_type_meta(resource, vec![object]).remove(0))
}

fn create<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    namespace: Option<&str>,
    mut object: Value,
    query: &Query,
    manager: &str,
) -> Result<Response<ApiBody>, ApiError> {
    validation::default_type_meta(resource, &mut object)?;
    validation::validate(resource, namespace, None, &object, is_strict(query))?;
    require_namespace(&context.objects, resource, namespace)?;
    crd::prepare(resource, &mut object)?;
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
    json_reply(StatusCode::CREATED, &stored)
}

fn update<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    path: &ResourcePath,
    name: &str,
    mut object: Value,
    query: &Query,
    manager: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let namespace = path.namespace.as_deref();
    validation::default_type_meta(resource, &mut object)?;
    validation::validate(resource, namespace, Some(name), &object, is_strict(query))?;
    let key = resource.key(namespace, name);
    let live = context
        .objects
        .get(&key)
        .map_err(|error| store_error(resource, name, error))?
        .ok_or_else(|| resource.not_found(name))?;
    keep_other_half(&live, &mut object, path.subresource.is_some());
    crd::prepare(resource, &mut object)?;
    patch::track_update(Some(&live), &mut object, manager);
    let stored = store_update(context, &key, object, query)
        .map_err(|error| store_error(resource, name, error))?;
    info!(resource = %resource.qualified(), namespace, name, "updated");
    json_reply(StatusCode::OK, &stored)
}

#[allow(clippy::too_many_arguments)]
fn patch_object<B: Backend>(
    context: &Context<B>,
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
            validation::validate(resource, namespace, Some(name), &object, false)?;
            return create(context, resource, namespace, object, query, "");
        };
        validation::validate(resource, namespace, Some(name), &object, false)?;
        keep_other_half(&live, &mut object, path.subresource.is_some());
        crd::prepare(resource, &mut object)?;
        // The patch applies to what was read: make the store check that.
        object["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
        let result = store_update(context, &key, object, query);
        match result {
            Ok(stored) => {
                info!(resource = %resource.qualified(), namespace, name, patch = media_type, "patched");
                return json_reply(StatusCode::OK, &stored);
            }
            Err(ObjectError::Conflict { .. }) => continue,
            Err(error) => return Err(store_error(resource, name, error)),
        }
    }
    Err(kept_changing(resource, name))
}

fn delete<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    query: &Query,
) -> Result<Response<ApiBody>, ApiError> {
    crd::check_delete(resource, name)?;
    let key = resource.key(namespace, name);
    let deleted = if is_dry_run(query) {
        read(context, resource, namespace, name)?
    } else {
        let deleted = context
            .objects
            .delete(&key)
            .map_err(|error| store_error(resource, name, error))?;
        crd::delete_contents(&context.objects, resource, &deleted)?;
        info!(resource = %resource.qualified(), namespace, name, "deleted");
        deleted
    };
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": resource.group, "kind": resource.plural, "uid": deleted.pointer("/metadata/uid")},
    });
    json_reply(StatusCode::OK, &status)
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
fn scale_subresource<B: Backend>(
    context: &Context<B>,
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
fn store_update<B: Backend>(
    context: &Context<B>,
    key: &crate::objects::ObjectKey,
    object: Value,
    query: &Query,
) -> Result<Value, ObjectError> {
    if is_dry_run(query) {
        context.objects.update_dry_run(key, object)
    } else {
        context.objects.update(key, object)
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
fn delete_collection<B: Backend>(
    context: &Context<B>,
    resource: &Resource,
    filter: &Filter,
    query: &Query,
) -> Result<Response<ApiBody>, ApiError> {
    let (objects, _) = select(context, resource, filter)?;
    let mut deleted = Vec::with_capacity(objects.len());
    for object in objects {
        let name = object_name(&object);
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|_| resource.namespaced);
        if is_dry_run(query) {
            deleted.push(object);
            continue;
        }
        match context.objects.delete(&resource.key(namespace, &name)) {
            Ok(gone) => {
                crd::delete_contents(&context.objects, resource, &gone)?;
                deleted.push(gone);
            }
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

/// Sets `apiVersion` and `kind`, which stored objects of read-only sources
/// and old writes may lack.
fn with_type_meta(resource: &Resource, mut objects: Vec<Value>) -> Vec<Value> {
    for object in &mut objects {
        if object.is_object() {
            object["apiVersion"] = json!(resource.api_version());
            object["kind"] = json!(resource.kind);
        }
    }
    objects
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

fn decode_continue(token: &str) -> Result<String, ApiError> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| ApiError::BadRequest("invalid continue token".into()))
}

/// The object in a create or update body: JSON, YAML, or the protobuf of
/// the few kinds kubectl's typed commands send.
pub(super) fn decode(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") {
        return protobuf::decode(body).map_err(|error| match error {
            ProtobufError::UnknownKind { .. } => ApiError::UnsupportedMediaType(error.to_string()),
            _ => ApiError::BadRequest(error.to_string()),
        });
    }
    if content_type.contains("cbor") {
        return Err(ApiError::UnsupportedMediaType(
            "CBOR bodies are not supported; send JSON".into(),
        ));
    }
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml::from_slice(body))
        .map_err(|error| ApiError::BadRequest(format!("cannot decode the object: {error}")))
}

pub(super) fn object_name(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
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

fn is_strict(query: &Query) -> bool {
    query.get("fieldValidation") == Some("Strict")
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
        PatchError::TooLarge(message) => ApiError::OverLimit {
            limit: crate::limits::Limit::ApiJsonPatch,
            error: Box::new(ApiError::PayloadTooLarge(message)),
        },
    }
}

/// Maps a store failure onto the API's errors, in Kubernetes' words.
pub(super) fn store_error(resource: &Resource, name: &str, error: ObjectError) -> ApiError {
    let qualified = resource.qualified();
    match error {
        ObjectError::AlreadyExists(_) => ApiError::AlreadyExists(format!("{qualified} {name:?} already exists")),
        ObjectError::NotFound(_) => resource.not_found(name),
        ObjectError::Conflict { .. } => ApiError::Conflict(format!(
            "Operation cannot be fulfilled on {qualified} {name:?}: the object has been modified; please apply your changes to the latest version and try again"
        )),
        ObjectError::Gone { .. } => ApiError::Gone(error.to_string()),
        ObjectError::NotAnObject => ApiError::BadRequest(error.to_string()),
        other => ApiError::Internal(other.to_string()),
    }
}
