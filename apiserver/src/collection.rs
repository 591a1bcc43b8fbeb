//! A collection of objects as lists and watches see it: the filter a request
//! asks for (namespace, label and field selectors), the objects it selects,
//! and the store's errors in Kubernetes' words. A leaf: handlers and watches
//! both use it, and it uses neither.

use serde_json::{json, Value};

use super::context::Context;
use super::query::Query;
use super::resources::{Resource, Source};
use super::selector::{FieldSelector, LabelSelector};
use super::{ApiError, Extension};
use crate::objects::{BackendError, ObjectError};

/// Which objects of a resource a list or watch wants.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    pub(super) namespace: Option<String>,
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
}

impl Filter {
    pub(super) fn parse(
        resource: &Resource,
        namespace: Option<String>,
        query: &Query,
    ) -> Result<Self, ApiError> {
        let bad = |error: super::selector::SelectorError| ApiError::BadRequest(error.to_string());
        Ok(Self {
            namespace,
            labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())
                .map_err(bad)?,
            fields: FieldSelector::parse_for(
                query.get("fieldSelector").unwrap_or_default(),
                &resource.group,
                &resource.plural,
            )
            .map_err(bad)?,
        })
    }

    /// Whether `object` passes.
    pub(super) fn matches(&self, object: &Value) -> bool {
        self.labels.matches_object(object) && self.fields.matches_object(object)
    }
}

/// The objects of `resource` matching `filter`, and their list version.
pub(super) fn select<E: Extension>(
    context: &Context<E>,
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
        if let Some(reason) = context.extension.views_unavailable() {
            return Err(ApiError::Unavailable(reason));
        }
        (context.extension.objects(resource), String::new())
    };
    let objects = objects
        .into_iter()
        .filter(|object| filter.matches(object))
        .collect();
    Ok((with_type_meta(resource, objects), version))
}

/// Sets `apiVersion` and `kind`, which stored objects of read-only sources
/// and old writes may lack.
pub(super) fn with_type_meta(resource: &Resource, mut objects: Vec<Value>) -> Vec<Value> {
    for object in &mut objects {
        if object.is_object() {
            object["apiVersion"] = json!(resource.api_version());
            object["kind"] = json!(resource.kind);
        }
    }
    objects
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
        // No quorum, or the backend out of reach: 503, never a stale
        // answer; the client retries.
        ObjectError::Storage(BackendError::Unavailable(message)) => {
            ApiError::Unavailable(format!("storage unavailable: {message}"))
        }
        ObjectError::Storage(BackendError::Compacted { .. }) => ApiError::Gone(error.to_string()),
        ObjectError::NotAnObject => ApiError::BadRequest(error.to_string()),
        ObjectError::TooDeep(too_deep) => too_deep_error(too_deep),
        other => ApiError::Internal(other.to_string()),
    }
}

/// The 422 of a body, patch result or object nested too deep, naming the
/// path where the limit was hit.
pub(super) fn too_deep_error(error: crate::depth::TooDeep) -> ApiError {
    ApiError::Invalid {
        field: error.path.clone(),
        message: error.to_string(),
    }
}

/// An object's `metadata.name`, or `""`.
pub(super) fn object_name(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
