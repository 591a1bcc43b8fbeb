//! At the root: cluster labels changed without a re-join (`relayctl label
//! cluster`, see [`relaymesh_protocol::cluster_labels`]).

use relaymesh_core::Now;

use relaymesh_topology::cluster_labels::{AnnotationsTooLong, LabelChange};

use super::Daemon;

/// Why the root did not change a cluster's labels.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// The change is refused: the annotations would be too long.
    #[error(transparent)]
    TooLong(#[from] AnnotationsTooLong),
    /// The root could not encode or sign the result.
    #[error("{0}")]
    Unsigned(String),
}

impl Daemon {
    /// At the root: adds `change` to what the root changed of a cluster's
    /// labels and annotations before, signs it and sends it down to the
    /// cluster.
    pub(super) fn label_cluster(
        &mut self,
        now: Now,
        change: LabelChange,
    ) -> Result<relaymesh_protocol::ClusterLabels, LabelError> {
        let key = relaymesh_protocol::ClusterLabels::key_for(&change.labels.node);
        let held = self
            .core
            .entries()
            .find(|entry| entry.key == key)
            .and_then(relaymesh_protocol::ClusterLabels::from_entry)
            .and_then(Result::ok);
        let merged = relaymesh_topology::cluster_labels::merge(held, change)?;
        let entry = merged
            .to_entry()
            .map_err(|error| LabelError::Unsigned(error.to_string()))?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| LabelError::Unsigned("the root cannot sign the labels".into()))?;
        tracing::info!(cluster = %merged.node, set = ?merged.set, remove = ?merged.remove, annotations = merged.annotations.len(), "changed a cluster's labels");
        self.core.upsert_local(now, entry);
        Ok(merged)
    }
}
