//! Which Placements a write of a root object makes stale: those that select
//! the object before or after the write, when what would travel of it
//! changed. The object store moves their `metadata.generation` on in the
//! same write ([`GenerationDependents`]), so a Placement's `Ready` stops
//! describing the old objects the moment they change: `observedGeneration`
//! falls behind `generation` until the status writer has counted the
//! clusters on the new revision (docs/api.md, "Placement status").

use relaymesh_apiserver::objects::{GenerationDependents, ObjectKey, StoreReader};
use serde_json::Value;

use super::{strip_server_fields, Specs, RELAYMESH_GROUP};

/// The Placements whose workloads an object's write changes, their specs
/// read from `specs`.
#[derive(Debug, Default)]
pub struct PlacementsOfWorkloads {
    /// The root's one cache of Placement specs.
    pub specs: Specs,
}

impl GenerationDependents for PlacementsOfWorkloads {
    fn dependents(
        &self,
        key: &ObjectKey,
        old: Option<&Value>,
        new: Option<&Value>,
        objects: &StoreReader<'_>,
    ) -> Vec<ObjectKey> {
        if !changes_a_bundle(key, old, new) {
            return Vec::new();
        }
        objects
            .list(RELAYMESH_GROUP, "placements")
            .into_iter()
            .filter(|(_, placement)| {
                let Some(spec) = self.specs.of(placement) else {
                    return false;
                };
                [old, new]
                    .into_iter()
                    .flatten()
                    .any(|object| spec.selects_object(object))
            })
            .map(|(key, _)| key)
            .collect()
    }
}

/// Whether a write changes what any bundle carries of the object: not for
/// relaymesh's own kinds (they never travel), nor for a write of status or
/// server-owned metadata only (the status writers' own writes among them).
fn changes_a_bundle(key: &ObjectKey, old: Option<&Value>, new: Option<&Value>) -> bool {
    if key.group == RELAYMESH_GROUP {
        return false;
    }
    match (old, new) {
        (Some(old), Some(new)) => strip_server_fields(old) != strip_server_fields(new),
        (None, None) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(group: &str) -> ObjectKey {
        ObjectKey::new(group, "deployments", Some("shop"), "web")
    }

    #[test]
    fn only_what_travels_makes_placements_stale() {
        let old = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "3"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "v1"}]}}},
            "status": {"readyReplicas": 1}});
        let mut status_only = old.clone();
        status_only["status"]["readyReplicas"] = json!(2);
        status_only["metadata"]["resourceVersion"] = json!("4");
        assert!(!changes_a_bundle(
            &key("apps"),
            Some(&old),
            Some(&status_only)
        ));
        let mut image = old.clone();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("v2");
        assert!(changes_a_bundle(&key("apps"), Some(&old), Some(&image)));
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"tier": "front"});
        assert!(changes_a_bundle(&key("apps"), Some(&old), Some(&labelled)));
        assert!(changes_a_bundle(&key("apps"), None, Some(&old)));
        assert!(changes_a_bundle(&key("apps"), Some(&old), None));
        assert!(!changes_a_bundle(&key(RELAYMESH_GROUP), None, Some(&old)));
    }
}
