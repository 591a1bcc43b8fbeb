//! Entry points for the fuzz targets in `fuzz/` (docs/testing.md,
//! "Fuzzing"): the API's request handling that a client's bytes reach, as
//! pure functions, without a server, a store or a clock to set up.
//!
//! Not an API: hidden from the docs, and changed together with the fuzz
//! targets. Each function calls the same code the handlers call, in the same
//! order, so what the fuzzer finds here is what a client could trigger.

use serde_json::Value;

use super::field_validation::{self, FieldValidation};
use super::query::Query;
use super::resources::{from_definition, Registry};
use super::{crd, crud, validation, ApiError};

pub use super::selector::{FieldSelector, LabelSelector, SelectorError};

/// The `Kind`s a create or update body can be written as: the built-in
/// kinds, as served before any CRD is stored.
pub fn kinds() -> Vec<String> {
    Registry::without_definitions(&[])
        .all()
        .iter()
        .map(|resource| resource.kind.clone())
        .collect()
}

/// What a create (`name` is `None`) or update of the `kind_index`-th of
/// [`kinds`] (modulo their number) does with a request body before it
/// stores it: decode it by its `Content-Type` (JSON, YAML or protobuf),
/// validate it against the URL, and complete special objects (CRD status,
/// Secret `stringData`). Returns the object that would be stored.
pub fn prepare_write(
    kind_index: usize,
    body: &[u8],
    content_type: &str,
    namespace: Option<&str>,
    name: Option<&str>,
    strict: bool,
) -> Result<Value, ApiError> {
    let registry = Registry::without_definitions(&[]);
    let resources = registry.all();
    let resource = &resources[kind_index % resources.len()];
    let mut object = crud::decode(body, content_type)?;
    validation::default_type_meta(resource, &mut object)?;
    validation::validate(resource, namespace, name, &object)?;
    let mode = if strict {
        FieldValidation::Strict
    } else {
        FieldValidation::Warn
    };
    field_validation::check(mode, resource, &object)?;
    crd::prepare(resource, &mut object, &[])?;
    Ok(object)
}

/// The resources a stored CustomResourceDefinition adds to discovery, as
/// `(group, version, plural)`.
pub fn served_by_definition(definition: &Value) -> Vec<(String, String, String)> {
    from_definition(definition)
        .into_iter()
        .map(|resource| (resource.group, resource.version, resource.plural))
        .collect()
}

/// The value of `key` in a query string (the part after `?`), decoded as
/// every handler reads its parameters.
pub fn query_parameter(query: &str, key: &str) -> Result<Option<String>, ApiError> {
    Query::parse(Some(query)).map(|query| query.get(key).map(str::to_string))
}
