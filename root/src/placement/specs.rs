//! Each Placement's spec, read once per generation: the API checks a
//! Placement at admission (`topology::spec`); after that, the placement
//! controller, its status writer, the store's generation dependents and
//! `relayctl explain` all take the spec from this one cache, so no one
//! parses a Placement's JSON or compiles its CEL rules twice for the same
//! generation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{PlacementError, PlacementSpec};

/// A Placement object by uid and generation: its spec changes only with
/// them.
pub type SpecId = (String, i64);

type Parsed = Result<Arc<PlacementSpec>, PlacementError>;

/// The specs of the Placements seen lately; cheap to clone (one cache).
#[derive(Debug, Clone, Default)]
pub struct Specs {
    by_id: Arc<Mutex<BTreeMap<SpecId, Parsed>>>,
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

    /// `object`'s spec, or why it is not valid; read the first time its
    /// generation is seen.
    pub fn read(&self, object: &Value) -> Parsed {
        let id = Self::id(object);
        if let Some(parsed) = self.lock().get(&id) {
            return parsed.clone();
        }
        // Parsed outside the lock: compiling CEL rules takes a while, and
        // two readers of one new generation only parse it twice.
        let parsed = PlacementSpec::from_object(object).map(Arc::new);
        self.lock().insert(id, parsed.clone());
        parsed
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
    fn a_spec_is_parsed_once_per_generation() {
        let specs = Specs::default();
        let first = specs.of(&placement(1, false)).expect("valid");
        let again = specs.clone().of(&placement(1, false)).expect("valid");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same parse, from a clone too"
        );
        let next = specs.of(&placement(2, true)).expect("valid");
        assert_eq!(next.status_rules.len(), 1, "a new generation is parsed");
        specs.retain(&[Specs::id(&placement(2, true))].into());
        assert_eq!(specs.lock().len(), 1);
        let invalid =
            json!({"metadata": {"name": "x", "namespace": "shop", "uid": "u-2", "generation": 1}});
        let error = specs.read(&invalid).expect_err("no spec");
        assert!(error.to_string().contains("spec"), "{error}");
    }
}
