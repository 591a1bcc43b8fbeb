//! Reads: get an object (or its one-row Table), list a collection in
//! pages with `continue` tokens and at a chosen resourceVersion, or hand a
//! watch to the `watch` module.

use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::collection::{select, store_error, with_type_meta, Filter};
use crate::context::Context;
use crate::http::{json_reply, ApiBody};
use crate::list_options::{self, ListAt};
use crate::objects::ObjectError;
use crate::query::Query;
use crate::resources::{Resource, Source};
use crate::table::{self, IncludeObject};
use crate::{watch, ApiError, Extension};

/// The most objects a list returns at once. A list without `limit` that
/// would return more is refused (422, naming `limit`) rather than cut short
/// or sent whole: a client that did not ask for pages would not look for a
/// `continue`, and a million Cluster objects in one reply is hundreds of
/// MiB. kubectl and client-go ask for pages of 500 by themselves. A larger
/// `limit` gets pages of this size, which Kubernetes allows.
pub(super) const MAX_UNPAGED_LIST: usize = 10_000;

/// `GET` on a collection: a watch when the query asks for one, else a list.
pub(super) fn list_or_watch<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<String>,
    query: &Query,
    accept: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let filter = Filter::parse(resource, namespace, query)?;
    if matches!(query.get("watch"), Some("1" | "true")) {
        return watch::serve(
            context,
            resource,
            filter,
            query,
            table::is_requested(accept),
            accept,
        );
    }
    list(context, resource, &filter, query, accept)
}

/// `GET` on an object: the object, or a Table of it when `accept` asks.
pub(super) fn get<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    query: &Query,
    accept: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let object = read(context, resource, namespace, name)?;
    if table::is_requested(accept) {
        let include = IncludeObject::parse(query.get("includeObject"));
        let version = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let rendered = table::render(
            resource,
            std::slice::from_ref(&object),
            include,
            version,
            SystemTime::now(),
        );
        return json_reply(StatusCode::OK, &rendered);
    }
    json_reply(StatusCode::OK, &object)
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
        if let Some(reason) = context.extension.views_unavailable() {
            return Err(ApiError::Unavailable(reason));
        }
        context
            .extension
            .objects(resource)
            .into_iter()
            .find(|object| object.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    };
    let object = object.ok_or_else(|| resource.not_found(name))?;
    Ok(with_type_meta(resource, vec![object]).remove(0))
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
