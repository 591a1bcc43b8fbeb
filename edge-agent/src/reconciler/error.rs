//! Why the reconciler stops. Its own leaf, so every part of the reconciler
//! can fail the same way without importing the loop that handles it.

use relaymesh_node::store::StoreError;

use crate::inventory::InventoryError;

/// Why the reconciler stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReconcileError {
    /// The node's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The inventory failed; the agent stops rather than change the cluster
    /// without a record.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
}
