//! Deletes: one object (honouring finalizers and the propagation policy,
//! and removing a quarantined object as it is), or every object a
//! collection's selectors match (`deletecollection`).

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use tracing::info;

use super::decoding::decode;
use super::request::is_dry_run;
use crate::collection::{object_name, select, store_error, with_type_meta, Filter};
use crate::context::Context;
use crate::deletion::{self, Outcome, Propagation};
use crate::http::{json_reply, read_body, ApiBody, MAX_JSON_BODY};
use crate::query::Query;
use crate::resources::{Resource, Source};
use crate::{crd, ApiError, Extension};

/// `DELETE` on an object, with the `DeleteOptions` its body may hold.
pub(super) async fn delete_one<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    request: Request<Incoming>,
    query: &Query,
    content_type: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let options = delete_options(request, content_type).await?;
    let propagation = Propagation::parse(query, options.as_ref())?;
    let dry_run = is_dry_run(query) || asks_dry_run(options.as_ref());
    delete(context, resource, namespace, name, dry_run, propagation)
}

/// `DELETE` on a collection. A namespaced kind's objects are deleted one
/// namespace at a time: kube-apiserver serves no `deletecollection` across
/// namespaces either.
pub(super) async fn delete_all<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    namespace: Option<String>,
    request: Request<Incoming>,
    query: &Query,
    content_type: &str,
) -> Result<Response<ApiBody>, ApiError> {
    if resource.namespaced && namespace.is_none() {
        return Err(ApiError::MethodNotAllowed(format!(
            "deletecollection of {} needs a namespace: DELETE \
             .../namespaces/NAMESPACE/{}",
            resource.qualified(),
            resource.plural
        )));
    }
    let filter = Filter::parse(resource, namespace, query)?;
    let options = delete_options(request, content_type).await?;
    let propagation = Propagation::parse(query, options.as_ref())?;
    let dry_run = is_dry_run(query) || asks_dry_run(options.as_ref());
    delete_collection(context, resource, &filter, dry_run, propagation)
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

/// Whether a `DeleteOptions` body asks for a dry run (`dryRun: ["All"]`,
/// what `kubectl delete --dry-run=server` sends).
fn asks_dry_run(options: Option<&Value>) -> bool {
    options
        .and_then(|options| options.get("dryRun"))
        .and_then(Value::as_array)
        .is_some_and(|modes| modes.iter().any(|mode| mode == "All"))
}
