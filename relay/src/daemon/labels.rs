//! At the root: cluster labels changed without a re-join (`relayctl label
//! cluster`, see [`relaymesh_protocol::cluster_labels`]).

use relaymesh_core::Now;

use super::Daemon;

impl Daemon {
    /// At the root: adds `change` to what the root changed of a cluster's
    /// labels before, signs it and sends it down to the cluster.
    pub(super) fn label_cluster(
        &mut self,
        now: Now,
        change: relaymesh_protocol::ClusterLabels,
    ) -> Result<relaymesh_protocol::ClusterLabels, String> {
        let key = relaymesh_protocol::ClusterLabels::key_for(&change.node);
        let held = self
            .core
            .entries()
            .find(|entry| entry.key == key)
            .and_then(relaymesh_protocol::ClusterLabels::from_entry)
            .and_then(Result::ok);
        let merged = crate::api::merge_cluster_labels(held, change);
        let entry = merged.to_entry().map_err(|error| error.to_string())?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| "the root cannot sign the labels".to_string())?;
        tracing::info!(cluster = %merged.node, set = ?merged.set, remove = ?merged.remove, "changed a cluster's labels");
        self.core.upsert_local(now, entry);
        Ok(merged)
    }
}
