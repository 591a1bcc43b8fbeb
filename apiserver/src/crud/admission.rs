//! What an object must pass before it is written: the generic and
//! schema checks, the extension's validator and admission, RBAC's
//! escalation check, and its namespace existing; and the `Warning`s the
//! checks leave for the reply.

use hyper::Response;
use serde_json::Value;

use crate::context::Context;
use crate::field_validation::{self, FieldValidation};
use crate::http::ApiBody;
use crate::objects::ObjectStore;
use crate::query::Query;
use crate::resources::Resource;
use crate::{validation, ApiError, Extension};

/// The checks of an object about to be written, in kube-apiserver's order
/// (decoding, where `Strict` refuses unknown fields, before validation):
/// the generic checks, unknown fields and JSON types, then the
/// extension's validator. Returns the `Warning`s to send: unknown fields
/// under `Warn`, and the extension's advice on a write to the main
/// resource (`status` is the server's to write, and a write to the main
/// resource keeps the stored one, so its status is not checked).
pub(super) fn admit(
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

fn field_validation(query: &Query) -> Result<FieldValidation, ApiError> {
    FieldValidation::parse(query.get("fieldValidation"))
}

/// What a write must pass beyond its verb, with `object` as it will be
/// stored: a role or binding may grant only what its writer holds
/// ([`crate::rbac::Rbac::check_escalation`], when the extension authorizes
/// with RBAC), and the extension's own check
/// ([`Extension::admit_write`]).
pub(super) fn admit_write<E: Extension>(
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

pub(super) fn require_namespace(
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

/// `reply` with one `Warning` header per message, as kube-apiserver sends
/// them (`299 - "message"`); kubectl prints each as `Warning: message`.
pub(super) fn with_warnings(
    mut reply: Response<ApiBody>,
    warnings: &[String],
) -> Response<ApiBody> {
    for warning in warnings {
        let text = format!("299 - {:?}", warning.replace(['\r', '\n'], " "));
        if let Ok(value) = hyper::header::HeaderValue::from_str(&text) {
            reply.headers_mut().append(hyper::header::WARNING, value);
        }
    }
    reply
}
