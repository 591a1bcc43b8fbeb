//! Which object has which uid, and which objects name which owner in their
//! `ownerReferences`: an index the store keeps in step with every write, so
//! that deleting an object finds its owners and dependents without reading
//! the whole store (kube-apiserver's garbage collector keeps the same graph
//! in memory). Rebuilt from the store when it opens. No IO.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::key::ObjectKey;

/// The uid and owner graph of the stored objects.
#[derive(Debug, Default)]
pub(super) struct OwnerIndex {
    /// The object of each uid.
    keys: HashMap<String, ObjectKey>,
    /// The objects naming each owner uid.
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
}

impl OwnerIndex {
    /// Records `object`, stored at `key`.
    pub(super) fn insert(&mut self, key: &ObjectKey, object: &Value) {
        let uid = uid(object);
        if !uid.is_empty() {
            self.keys.insert(uid.to_string(), key.clone());
        }
        for owner in references(object) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(key.clone());
        }
    }

    /// Forgets `object`, which was stored at `key`.
    pub(super) fn remove(&mut self, key: &ObjectKey, object: &Value) {
        let uid = uid(object);
        if self.keys.get(uid) == Some(key) {
            self.keys.remove(uid);
        }
        for owner in references(object) {
            if let Some(keys) = self.dependents.get_mut(&owner) {
                keys.remove(key);
                if keys.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    /// Where the object with `uid` is stored.
    pub(super) fn key_of(&self, uid: &str) -> Option<ObjectKey> {
        self.keys.get(uid).cloned()
    }

    /// The objects whose `ownerReferences` name `uid`.
    pub(super) fn dependents_of(&self, uid: &str) -> Vec<ObjectKey> {
        self.dependents
            .get(uid)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// `metadata.uid`, or empty.
pub(crate) fn uid(object: &Value) -> &str {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The uids `object`'s `ownerReferences` name.
pub(crate) fn references(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|reference| reference.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(uid: &str, owners: &[&str]) -> Value {
        let references: Vec<Value> = owners.iter().map(|uid| json!({"uid": uid})).collect();
        json!({"metadata": {"uid": uid, "ownerReferences": references}})
    }

    #[test]
    fn follows_writes_and_deletes() {
        let mut index = OwnerIndex::default();
        let deployment = ObjectKey::new("apps", "deployments", Some("shop"), "web");
        let replicas = ObjectKey::new("apps", "replicasets", Some("shop"), "web-1");
        index.insert(&deployment, &object("d", &[]));
        index.insert(&replicas, &object("r", &["d"]));
        assert_eq!(index.key_of("d"), Some(deployment.clone()));
        assert_eq!(index.dependents_of("d"), std::slice::from_ref(&replicas));

        // An update that orphans the ReplicaSet: the old state goes, the
        // new one comes, as the store's writes do it.
        index.remove(&replicas, &object("r", &["d"]));
        index.insert(&replicas, &object("r", &[]));
        assert!(index.dependents_of("d").is_empty());
        assert_eq!(index.key_of("r"), Some(replicas.clone()));

        index.remove(&deployment, &object("d", &[]));
        assert_eq!(index.key_of("d"), None);
        assert!(index.dependents.is_empty() && index.keys.len() == 1);
    }

    #[test]
    fn a_recreated_name_keeps_its_new_uid() {
        let mut index = OwnerIndex::default();
        let key = ObjectKey::new("", "configmaps", Some("a"), "c");
        index.insert(&key, &object("new", &[]));
        // A stale removal of an older object with another uid at the same
        // key must not drop the new one.
        index.remove(&key, &object("old", &[]));
        assert_eq!(index.key_of("new"), Some(key));
    }
}
