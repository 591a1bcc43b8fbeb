//! Reading a placement's bundles from the store and customizing their
//! objects for this cluster, changing nothing: what an apply pass applies
//! and what the room check counts.

use std::collections::BTreeMap;

use super::error::ReconcileError;
use super::state::{Placement, Reconciler};
use crate::manifest::{self, Manifest, ObjectRef};

/// What reading a placement's bundles gave.
pub(super) enum Read {
    /// A bundle is not stored yet.
    Waiting,
    /// A bundle cannot be read: why.
    Unreadable(String),
    /// Its objects, customized for this cluster, why some could not be,
    /// and the bundle each comes from.
    Objects(
        BTreeMap<ObjectRef, Manifest>,
        BTreeMap<ObjectRef, String>,
        BTreeMap<ObjectRef, relaymesh_protocol::BundleId>,
    ),
}

/// Reads the placement's bundles from the store and customizes their
/// objects for this cluster, changing nothing.
pub(super) fn customized(
    reconciler: &Reconciler,
    applyset_id: &str,
    placement: &Placement,
) -> Result<Read, ReconcileError> {
    let mut manifests = BTreeMap::new();
    let mut origins = BTreeMap::new();
    let mut not_customized = BTreeMap::new();
    let customization = &placement.customization;
    for id in &placement.bundles {
        let Some(bytes) = reconciler.store.bundle(id)? else {
            tracing::debug!(bundle = %id, "waiting for a bundle");
            return Ok(Read::Waiting);
        };
        match manifest::parse_bundle(&bytes, applyset_id) {
            Ok(parsed) => {
                for mut manifest in parsed {
                    match customization.apply(&mut manifest.body, reconciler.cluster()) {
                        // A template may have named the object.
                        Ok(()) => {
                            if let Some(reference) = ObjectRef::of(&manifest.body) {
                                manifest.reference = reference;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(object = %manifest.reference, %error, "cannot customize");
                            not_customized.insert(manifest.reference.clone(), error.to_string());
                        }
                    }
                    origins.insert(manifest.reference.clone(), *id);
                    manifests.insert(manifest.reference.clone(), manifest);
                }
            }
            Err(error) => {
                tracing::warn!(bundle = %id, %error, "unreadable bundle");
                return Ok(Read::Unreadable(format!("bundle {id}: {error}")));
            }
        }
    }
    Ok(Read::Objects(manifests, not_customized, origins))
}
