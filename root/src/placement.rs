//! Placements at the root: reading a `Placement` object, choosing the root
//! objects it carries, and packing them into a content-addressed bundle and a
//! slice entry for the tree.
//!
//! Selection semantics (documented in `docs/api.md`):
//! * `spec.workloads` is a list of terms, OR-ed; each term ANDs its fields,
//!   and an absent field matches anything. A term without `namespaces`
//!   matches objects in the Placement's own namespace and cluster-scoped
//!   objects.
//! * relaymesh's own kinds (group `relaymesh.dev`) and the API's bookkeeping
//!   kinds never travel.
//! * `spec.clusters` selects clusters by `labelSelector` and/or `names`;
//!   `maxClusters` bounds the label-selected part and `spreadBy` spreads
//!   that bound over a label's values. Named clusters are always included.

mod bundle;
mod dependents;
mod encoder;
mod explain;
pub mod singleton;
mod specs;
pub mod status;

pub use bundle::{canonical_json, pack, strip_server_fields, BundleEncoding};
pub use dependents::PlacementsOfWorkloads;
pub use encoder::{Encoded, Encoder};
pub use explain::{ask_splits, explain, RelaySplit, Splits, MAX_RELAYS_ASKED};
pub use relaymesh_topology::spec::{
    customization, label_selector, rollout, selects, PlacementError, PlacementSpec, WorkloadTerm,
    MAX_OVERRIDES, RELAYMESH_GROUP,
};
pub use specs::{SpecId, Specs};

use relaymesh_protocol::{SliceEntry, Target};
use serde_json::Value;

pub use relaymesh_protocol::placement::KEY_PREFIX;

/// The slice key of a placement.
pub fn entry_key(namespace: &str, name: &str) -> String {
    format!("{KEY_PREFIX}{namespace}/{name}")
}

/// What a placement becomes in the tree: its slice entry and the bytes of
/// the bundle the entry references.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The entry to upsert at the root.
    pub entry: SliceEntry,
    /// The objects' canonical JSON, which the bundle encodes.
    pub json: Vec<u8>,
    /// The bundle's bytes when this build compressed them ([`Encoded`]):
    /// otherwise the bundle is the JSON, or was stored at an earlier
    /// rebuild.
    pub bundle: Option<Vec<u8>>,
    /// How many objects the bundle holds.
    pub objects: usize,
    /// How its new revisions reach the clusters.
    pub rollout: relaymesh_topology::rollout::RolloutSpec,
}

/// Builds the entry and bundle of the placement whose admitted spec is
/// `spec` (from [`Specs`]), from every object the root holds (`objects`),
/// its bundle encoded by `encoder`.
pub fn build(
    spec: &PlacementSpec,
    objects: &[Value],
    encoder: &mut Encoder,
) -> Result<Packed, PlacementError> {
    let selected: Vec<&Value> = objects
        .iter()
        .filter(|object| spec.selects_object(object))
        .collect();
    let json = pack(&selected);
    let Encoded { id, bytes } = encoder.encode(&json);
    // Too large to travel in one frame: refused like any invalid spec.
    let body = spec
        .body()
        .encode()
        .map_err(|error| PlacementError::Invalid {
            field: "spec".to_string(),
            message: format!("too large for a slice entry: {error}"),
        })?;
    Ok(Packed {
        entry: SliceEntry {
            key: entry_key(&spec.namespace, &spec.name),
            target: Target::Placement(spec.target.clone()),
            bundles: vec![id],
            body,
            // The root's daemon signs the entry when it takes it.
            serial: 0,
            signature: Vec::new(),
        },
        objects: selected.len(),
        json,
        bundle: bytes,
        rollout: spec.rollout.clone(),
    })
}

#[cfg(test)]
mod tests;
