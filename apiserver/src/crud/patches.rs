//! `PATCH`: JSON, merge, strategic merge and server-side apply patches,
//! applied to the stored object and written back with a retry when another
//! writer slips in between; an apply to a missing object creates it.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::USER_AGENT;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use tracing::info;

use super::admission::{admit, admit_write, with_warnings};
use super::overwrite::{kept_changing, store_update};
use super::request::{field_manager, header, ResourcePath};
use super::writes::{create, keep_other_half};
use crate::body;
use crate::collection::{store_error, too_deep_error};
use crate::context::Context;
use crate::http::{json_reply, read_body, ApiBody, MAX_JSON_BODY};
use crate::objects::ObjectError;
use crate::patch::{self, PatchError, PatchKind, TypeInfo};
use crate::query::Query;
use crate::resources::Resource;
use crate::{crd, strategy, validation, ApiError, Extension};

/// `PATCH` on an object.
pub(super) async fn patch<E: Extension>(
    context: &Arc<Context<E>>,
    resource: Resource,
    path: ResourcePath,
    name: String,
    request: Request<Incoming>,
    query: Query,
    content_type: String,
) -> Result<Response<ApiBody>, ApiError> {
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
    let kind = patch_kind(resource, media_type, query)?;
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

/// The patch format `media_type` names. Strategic merge needs the merge
/// keys of a built-in kind; apply needs a field manager to own the fields.
fn patch_kind(resource: &Resource, media_type: &str, query: &Query) -> Result<PatchKind, ApiError> {
    match media_type {
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/strategic-merge-patch+json" if resource.builtin => Ok(PatchKind::StrategicMerge),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
            let field_manager = query
                .get("fieldManager")
                .filter(|manager| !manager.is_empty())
                .ok_or_else(|| {
                    ApiError::BadRequest("PATCH with apply requires the fieldManager query parameter".into())
                })?
                .to_string();
            Ok(PatchKind::Apply { field_manager, force: query.get("force") == Some("true") })
        }
        other => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
        ))),
    }
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
