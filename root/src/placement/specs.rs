//! Each Placement's spec, read once: the API's admission reads and checks
//! a Placement (`topology::spec`) into this cache, and the placement
//! controller, its status writer, the store's generation dependents and
//! `relayctl explain` take it from here.
//!
//! Readers look a spec up by the Placement's uid and generation, which is
//! cheap (the generation dependents look on every store write, under the
//! store's lock). Admission runs before the object has either, so it files
//! what it read by the content address of what a spec is read from
//! (namespace, name, spec); the first reader of a generation takes it from
//! there. Only a Placement stored before the root started (or one whose
//! spec the API changed after admission) is read again, once, by the same
//! code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use relaymesh_protocol::BundleId;
use serde_json::Value;

use super::{PlacementError, PlacementSpec};

/// A Placement object by uid and generation: its spec changes only with
/// them.
pub type SpecId = (String, i64);

type Parsed = Result<Arc<PlacementSpec>, PlacementError>;

/// The specs of the Placements seen lately; cheap to clone (one cache).
#[derive(Debug, Clone, Default)]
pub struct Specs {
    cache: Arc<Mutex<Cache>>,
}

#[derive(Debug, Default)]
struct Cache {
    by_id: BTreeMap<SpecId, Parsed>,
    /// What admission read, by content address, until a reader takes it;
    /// `true` once a [`Specs::retain`] passed it untaken (a dry run, a
    /// refused or failed write): the next one drops it.
    admitted: BTreeMap<BundleId, (Parsed, bool)>,
}

impl Specs {
    /// Which generation of which Placement `object` is.
    pub fn id(object: &Value) -> SpecId {
        let metadata = &object["metadata"];
        (
            metadata["uid"].as_str().unwrap_or_default().to_string(),
            metadata["generation"].as_i64().unwrap_or_default(),
        )
    }

    /// The content address of what `object`'s spec is read from.
    fn content(object: &Value) -> BundleId {
        let metadata = &object["metadata"];
        // serde_json writes maps in key order: one spec, one text.
        let text = format!(
            "{}\0{}\0{}",
            metadata["namespace"], metadata["name"], object["spec"]
        );
        BundleId::of(text.as_bytes())
    }

    /// Admission: reads and checks `object` (its namespace set), keeping
    /// the result for the first reader of the stored object.
    pub fn admit(&self, object: &Value) -> Parsed {
        let parsed = PlacementSpec::from_object(object).map(Arc::new);
        self.lock()
            .admitted
            .insert(Self::content(object), (parsed.clone(), false));
        parsed
    }

    /// `object`'s spec, or why it is not valid: as admission read it, or
    /// read now if the root has not seen this spec since it started.
    pub fn read(&self, object: &Value) -> Parsed {
        let id = Self::id(object);
        if let Some(parsed) = self.lock().by_id.get(&id) {
            return parsed.clone();
        }
        let content = Self::content(object);
        let admitted = self.lock().admitted.remove(&content);
        // Read outside the lock: compiling CEL rules takes a while, and
        // two readers of one new spec only read it twice.
        let parsed = match admitted {
            Some((parsed, _)) => parsed,
            None => PlacementSpec::from_object(object).map(Arc::new),
        };
        self.lock().by_id.insert(id, parsed.clone());
        parsed
    }

    /// `object`'s spec, `None` if it is not valid.
    pub fn of(&self, object: &Value) -> Option<Arc<PlacementSpec>> {
        self.read(object).ok()
    }

    /// Forgets every spec but those of `kept`, and admissions no reader
    /// took since the last call.
    pub fn retain(&self, kept: &BTreeSet<SpecId>) {
        let mut cache = self.lock();
        cache.by_id.retain(|id, _| kept.contains(id));
        cache
            .admitted
            .retain(|_, (_, passed)| !std::mem::replace(passed, true));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic elsewhere cannot leave the maps half-written: every
        // change is one insert, one remove or one retain.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn placement(generation: i64, rules: bool) -> Value {
        let mut spec = json!({
            "workloads": [{"kind": "ConfigMap", "names": ["config"]}],
            "clusters": {"labelSelector": {"matchLabels": {"region": "eu"}}},
        });
        if rules {
            spec["statusRules"] = json!([{"name": "replicas", "select": "object.status.replicas", "aggregate": "sum"}]);
        }
        json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "generation": generation},
            "spec": spec,
        })
    }

    #[test]
    fn a_spec_is_read_once_at_admission_and_found_by_generation() {
        let specs = Specs::default();
        // Admission sees the object before it has a uid and a generation.
        let mut submitted = placement(1, false);
        submitted["metadata"] = json!({"name": "web", "namespace": "shop"});
        let admitted = specs.admit(&submitted).expect("valid");
        // The stored object has the metadata the API adds.
        let mut stored = placement(1, false);
        stored["metadata"]["resourceVersion"] = json!("7");
        stored["status"] = json!({"clusters": {"selected": 1}});
        let read = specs.clone().of(&stored).expect("valid");
        assert!(
            Arc::ptr_eq(&admitted, &read),
            "the admission's read, from a clone too"
        );
        assert!(specs.lock().admitted.is_empty(), "taken by its reader");
        let again = specs.of(&stored).expect("valid");
        assert!(Arc::ptr_eq(&read, &again), "then found by generation");
        let next = specs.of(&placement(2, true)).expect("valid");
        assert_eq!(next.status_rules.len(), 1, "a new generation is read");
        specs.retain(&[Specs::id(&placement(2, true))].into());
        assert_eq!(specs.lock().by_id.len(), 1);
        let invalid =
            json!({"metadata": {"name": "x", "namespace": "shop", "uid": "u-2", "generation": 1}});
        let error = specs.read(&invalid).expect_err("no spec");
        assert!(error.to_string().contains("spec"), "{error}");
    }

    #[test]
    fn admissions_no_reader_takes_are_dropped_after_a_round() {
        let specs = Specs::default();
        specs.admit(&placement(1, true)).expect("valid");
        specs.retain(&BTreeSet::new());
        assert_eq!(specs.lock().admitted.len(), 1, "kept for one round");
        specs.retain(&BTreeSet::new());
        assert!(specs.lock().admitted.is_empty(), "then dropped");
    }
}
