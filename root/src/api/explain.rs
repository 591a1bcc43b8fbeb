//! `relayctl explain`: a stored Placement beside what each relay says of
//! how it split it. Each relay keeps its own split, so they are asked
//! through the tree when someone asks, not gathered at the root ahead.

use relaymesh_apiserver::objects::{ObjectKey, ObjectStore};
use relaymesh_apiserver::ApiError;
use serde_json::Value;

use super::backend::Backend;
use crate::placement::{PlacementError, Specs};

/// `relayctl explain`: the stored Placement at `key`, with what each
/// relay says of how it split it.
pub(super) async fn explain<B: Backend>(
    backend: &B,
    specs: &Specs,
    objects: &ObjectStore,
    key: &ObjectKey,
) -> Result<Value, ApiError> {
    let placement = objects
        .get(key)
        .map_err(|error| ApiError::Internal(error.to_string()))?
        .ok_or_else(|| {
            ApiError::NotFound(format!("placements.relaymesh.dev {:?} not found", key.name))
        })?;
    let nodes = backend.inventory().records;
    let invalid = |PlacementError::Invalid { field, message }| ApiError::Invalid { field, message };
    let spec = specs.read(&placement).map_err(invalid)?;
    let entry = crate::placement::entry_key(&spec.namespace, &spec.name);
    let splits =
        crate::placement::ask_splits(&nodes, &entry, |relay| backend.split(relay, entry.clone()))
            .await;
    crate::placement::explain(&spec, &nodes, &splits).map_err(invalid)
}
