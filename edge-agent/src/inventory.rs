//! The agent's local record of what it applied, in its own sled tree
//! (`applied`): per placement, the ApplySet id and every object applied
//! under it; the namespaces the agent had to create itself; and the objects
//! it adopted (they existed before it, so it never deletes them).
//!
//! Pruning trusts this record together with the labels in the cluster: an
//! object is deleted only if it is recorded here *and* carries the
//! placement's `applyset.kubernetes.io/part-of` label. Writes are flushed
//! before the cluster is changed, so a crash never leaves an object the
//! agent created without a record of it.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_node::store::flush_off_runtime;
use serde::{Deserialize, Serialize};

use crate::manifest::ObjectRef;

/// The sled tree the inventory lives in.
pub const TREE: &str = "applied";

const PLACEMENT_PREFIX: &str = "placement-record/";
const CREATED_NAMESPACES: &str = "created-namespaces";
const ADOPTED: &str = "adopted-objects";

/// Why the inventory could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryError {
    /// sled failed.
    #[error("inventory store: {0}")]
    Store(#[from] sled::Error),
    /// A record could not be decoded (or encoded).
    #[error("inventory record {key:?}: {source}")]
    Codec {
        /// The record's key.
        key: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// What was applied for one placement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementRecord {
    /// The placement's ApplySet id (the value of its objects' part-of label).
    pub applyset_id: String,
    /// Every object applied under it and not pruned since.
    pub objects: BTreeSet<ObjectRef>,
}

/// The inventory on its sled tree.
#[derive(Debug, Clone)]
pub struct Inventory {
    tree: sled::Tree,
}

impl Inventory {
    /// The inventory in `tree` (normally `store.open_tree(TREE)`).
    pub fn new(tree: sled::Tree) -> Self {
        Self { tree }
    }

    /// Every placement with a record, by slice key.
    pub fn placements(&self) -> Result<BTreeMap<String, PlacementRecord>, InventoryError> {
        let mut records = BTreeMap::new();
        for item in self.tree.scan_prefix(PLACEMENT_PREFIX) {
            let (key, value) = item?;
            let key = String::from_utf8_lossy(&key).to_string();
            let record = decode(&key, &value)?;
            let placement = key.trim_start_matches(PLACEMENT_PREFIX).to_string();
            records.insert(placement, record);
        }
        Ok(records)
    }

    /// The record of placement `key`.
    pub fn placement(&self, key: &str) -> Result<Option<PlacementRecord>, InventoryError> {
        let record_key = format!("{PLACEMENT_PREFIX}{key}");
        self.tree
            .get(&record_key)?
            .map(|value| decode(&record_key, &value))
            .transpose()
    }

    /// Replaces the record of placement `key`, durably.
    pub async fn set_placement(
        &self,
        key: &str,
        record: &PlacementRecord,
    ) -> Result<(), InventoryError> {
        let record_key = format!("{PLACEMENT_PREFIX}{key}");
        let bytes = encode(&record_key, record)?;
        self.tree.insert(record_key, bytes)?;
        flush_off_runtime(&self.tree).await?;
        Ok(())
    }

    /// Forgets placement `key`, durably.
    pub async fn remove_placement(&self, key: &str) -> Result<(), InventoryError> {
        self.tree.remove(format!("{PLACEMENT_PREFIX}{key}"))?;
        flush_off_runtime(&self.tree).await?;
        Ok(())
    }

    /// The namespaces the agent created itself.
    pub fn created_namespaces(&self) -> Result<BTreeSet<String>, InventoryError> {
        self.tree
            .get(CREATED_NAMESPACES)?
            .map(|value| decode(CREATED_NAMESPACES, &value))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// Records the namespaces the agent created itself, durably.
    pub async fn set_created_namespaces(
        &self,
        namespaces: &BTreeSet<String>,
    ) -> Result<(), InventoryError> {
        let bytes = encode(CREATED_NAMESPACES, namespaces)?;
        self.tree.insert(CREATED_NAMESPACES, bytes)?;
        flush_off_runtime(&self.tree).await?;
        Ok(())
    }

    /// The objects the agent adopted: they existed, without relaymesh's
    /// marks, before a placement with `spec.adopt: true` took them over.
    pub fn adopted(&self) -> Result<BTreeSet<ObjectRef>, InventoryError> {
        self.tree
            .get(ADOPTED)?
            .map(|value| decode(ADOPTED, &value))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// Records the objects the agent adopted, durably.
    pub async fn set_adopted(&self, objects: &BTreeSet<ObjectRef>) -> Result<(), InventoryError> {
        let bytes = encode(ADOPTED, objects)?;
        self.tree.insert(ADOPTED, bytes)?;
        flush_off_runtime(&self.tree).await?;
        Ok(())
    }
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, InventoryError> {
    serde_json::from_slice(bytes).map_err(|source| InventoryError::Codec {
        key: key.to_string(),
        source,
    })
}

fn encode<T: Serialize>(key: &str, value: &T) -> Result<Vec<u8>, InventoryError> {
    serde_json::to_vec(value).map_err(|source| InventoryError::Codec {
        key: key.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_survive_reopen() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let reference = ObjectRef {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        {
            let db = sled::open(dir.path())?;
            let inventory = Inventory::new(db.open_tree(TREE)?);
            let record = PlacementRecord {
                applyset_id: "applyset-x-v1".into(),
                objects: BTreeSet::from([reference.clone()]),
            };
            inventory.set_placement("placement/a/b", &record).await?;
            inventory.set_placement("placement/a/c", &record).await?;
            inventory.remove_placement("placement/a/c").await?;
            inventory
                .set_created_namespaces(&BTreeSet::from(["shop".to_string()]))
                .await?;
            inventory
                .set_adopted(&BTreeSet::from([reference.clone()]))
                .await?;
        }
        let db = sled::open(dir.path())?;
        let inventory = Inventory::new(db.open_tree(TREE)?);
        let placements = inventory.placements()?;
        assert_eq!(placements.len(), 1);
        assert!(placements["placement/a/b"].objects.contains(&reference));
        assert!(inventory.placement("placement/a/c")?.is_none());
        assert_eq!(inventory.created_namespaces()?.len(), 1);
        assert_eq!(inventory.adopted()?, BTreeSet::from([reference]));
        Ok(())
    }
}
