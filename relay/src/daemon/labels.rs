//! At the root: cluster labels changed without a re-join (`relayctl label
//! cluster`, see [`relaymesh_protocol::cluster_labels`]).

use relaymesh_core::Now;

use super::Daemon;
use crate::api::ApiError;

impl Daemon {
    /// At the root: adds `change` to what the root changed of a cluster's
    /// labels and annotations before, signs it and sends it down to the
    /// cluster.
    pub(super) fn label_cluster(
        &mut self,
        now: Now,
        change: crate::api::LabelChange,
    ) -> Result<relaymesh_protocol::ClusterLabels, ApiError> {
        let key = relaymesh_protocol::ClusterLabels::key_for(&change.labels.node);
        let held = self
            .core
            .entries()
            .find(|entry| entry.key == key)
            .and_then(relaymesh_protocol::ClusterLabels::from_entry)
            .and_then(Result::ok);
        let merged = crate::api::merge_cluster_labels(held, change)?;
        let entry = merged
            .to_entry()
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| ApiError::Internal("the root cannot sign the labels".into()))?;
        tracing::info!(cluster = %merged.node, set = ?merged.set, remove = ?merged.remove, annotations = merged.annotations.len(), "changed a cluster's labels");
        self.core.upsert_local(now, entry);
        Ok(merged)
    }
}
