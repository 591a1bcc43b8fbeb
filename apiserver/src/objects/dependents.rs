//! The hook by which one write moves on other objects' `generation`
//! ([`GenerationDependents`]), and the reads it may make ([`StoreReader`]).
//! The hook runs inside a write, with the store's lock held, so it reads
//! through the scans directly rather than through the store's own (locking)
//! methods.

use serde_json::Value;

use super::key::{prefix, ObjectKey};
use super::scan::Scan;

/// Which other objects a write changes the desired state of: their
/// `metadata.generation` moves on in the same write, before the writer hears
/// back. The root's Placements use it: a Placement's desired state includes
/// the objects it selects, so editing one makes every status that describes
/// the old objects stale at once (`observedGeneration` behind `generation`),
/// which `kubectl wait` and kstatus already understand.
pub trait GenerationDependents: Send + Sync {
    /// The objects whose generation moves on because the object at `key`
    /// went from `old` to `new` (`None`: created, or deleted). `objects`
    /// reads the store as the write left it. Called with the store's write
    /// lock held: it must be quick, and must not write.
    fn dependents(
        &self,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
        objects: &StoreReader<'_>,
    ) -> Vec<ObjectKey>;
}

/// Reads for a [`GenerationDependents`] while the store's write lock is
/// held.
pub struct StoreReader<'a> {
    scan: Scan<'a>,
}

impl<'a> StoreReader<'a> {
    pub(super) fn new(scan: Scan<'a>) -> Self {
        Self { scan }
    }

    /// The objects of a resource in every namespace, with their keys;
    /// quarantined ones left out.
    pub fn list(&self, group: &str, resource: &str) -> Vec<(ObjectKey, Value)> {
        self.scan.keyed(&prefix(group, resource, None))
    }
}
