//! Each Placement's spec, read once: the API's admission reads and checks
//! a Placement (`topology::spec`) into this cache, and the placement
//! controller, its status writer, the store's generation dependents and
//! `relayctl explain` take it from here. Specs are keyed by what they are
//! read from (the Placement's namespace, name and spec), so the object the
//! API stored finds the spec its admission read; only a Placement stored
//! before the root started (or one whose spec the API changed after
//! admission) is read again, once, by the same code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use relaymesh_protocol::BundleId;
use serde_json::Value;

use super::{PlacementError, PlacementSpec};

/// The content address (BLAKE3) of a Placement's namespace, name and spec:
/// all its spec is read from.
pub type SpecId = BundleId;

type Parsed = Result<Arc<PlacementSpec>, PlacementError>;

/// The specs of the Placements seen lately; cheap to clone (one cache).
#[derive(Debug, Clone, Default)]
pub struct Specs {
    by_id: Arc<Mutex<BTreeMap<SpecId, Parsed>>>,
}

impl Specs {
    /// What `object`'s spec is read from, addressed.
    pub fn id(object: &Value) -> SpecId {
        let metadata = &object["metadata"];
        // serde_json writes maps in key order: one spec, one text.
        let text = format!(
            "{}\0{}\0{}",
            metadata["namespace"], metadata["name"], object["spec"]
        );
        BundleId::of(text.as_bytes())
    }

    /// Admission: reads and checks `object` (its namespace set), keeping
    /// the result for everyone who reads the stored object.
    pub fn admit(&self, object: &Value) -> Parsed {
        let parsed = PlacementSpec::from_object(object).map(Arc::new);
        self.lock().insert(Self::id(object), parsed.clone());
        parsed
    }

    /// `object`'s spec, or why it is not valid: as admission read it, or
    /// read now if the root has not seen this spec since it started.
    pub fn read(&self, object: &Value) -> Parsed {
        if let Some(parsed) = self.lock().get(&Self::id(object)) {
            return parsed.clone();
        }
        // Read outside the lock: compiling CEL rules takes a while, and
        // two readers of one new spec only read it twice.
        self.admit(object)
    }

    /// `object`'s spec, `None` if it is not valid.
    pub fn of(&self, object: &Value) -> Option<Arc<PlacementSpec>> {
        self.read(object).ok()
    }

    /// Forgets every spec but those of `kept`.
    pub fn retain(&self, kept: &BTreeSet<SpecId>) {
        self.lock().retain(|id, _| kept.contains(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SpecId, Parsed>> {
        // A panic elsewhere cannot leave the map half-written: every
        // change is one insert or one retain.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn placement(rules: bool) -> Value {
        let mut spec = json!({
            "workloads": [{"kind": "ConfigMap", "names": ["config"]}],
            "clusters": {"labelSelector": {"matchLabels": {"region": "eu"}}},
        });
        if rules {
            spec["statusRules"] = json!([{"name": "replicas", "select": "object.status.replicas", "aggregate": "sum"}]);
        }
        json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "generation": 1},
            "spec": spec,
        })
    }

    #[test]
    fn a_spec_is_read_once_at_admission() {
        let specs = Specs::default();
        let admitted = specs.admit(&placement(false)).expect("valid");
        // The stored object has the metadata the API adds.
        let mut stored = placement(false);
        stored["metadata"]["resourceVersion"] = json!("7");
        stored["status"] = json!({"clusters": {"selected": 1}});
        let read = specs.clone().of(&stored).expect("valid");
        assert!(
            Arc::ptr_eq(&admitted, &read),
            "the admission's read, from a clone too"
        );
        let next = specs.of(&placement(true)).expect("valid");
        assert_eq!(next.status_rules.len(), 1, "a new spec is read");
        specs.retain(&[Specs::id(&placement(true))].into());
        assert_eq!(specs.lock().len(), 1);
        let invalid =
            json!({"metadata": {"name": "x", "namespace": "shop", "uid": "u-2", "generation": 1}});
        let error = specs.read(&invalid).expect_err("no spec");
        assert!(error.to_string().contains("spec"), "{error}");
        let mut renamed = placement(false);
        renamed["metadata"]["name"] = json!("api");
        assert_eq!(specs.of(&renamed).expect("valid").name, "api");
    }
}
