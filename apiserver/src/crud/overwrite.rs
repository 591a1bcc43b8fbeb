//! Writing over a stored object, as updates, patches and scaling do: with
//! `dryRun=All` only checked, otherwise finishing a deletion the write
//! allows; and the answer when a read-modify-write keeps losing races.

use serde_json::Value;

use super::request::is_dry_run;
use crate::context::Context;
use crate::deletion;
use crate::objects::ObjectError;
use crate::query::Query;
use crate::resources::Resource;
use crate::{ApiError, Extension};

/// Writes `object` over the stored one at `key`, or only checks that it
/// would, with `dryRun=All`.
pub(super) fn store_update<E: Extension>(
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
pub(super) fn kept_changing(resource: &Resource, name: &str) -> ApiError {
    ApiError::Conflict(format!(
        "{} {name:?} kept changing; try again",
        resource.qualified()
    ))
}
