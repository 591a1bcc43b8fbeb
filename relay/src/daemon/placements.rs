//! The root's placement controller: watches the objects the API stores and
//! keeps one slice entry per Placement, whose bundle holds exactly the root
//! objects the Placement selects. Editing a workload makes a new bundle and a
//! new revision; deleting a Placement removes its entry everywhere.

use std::time::Duration;

use relaymesh_protocol::SliceEntry;
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Event, Shared};
use crate::objects::ObjectStore;
use crate::placement;

/// How long object changes are gathered before placements are rebuilt, so a
/// `kubectl apply` of many objects rebuilds once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Runs until `shutdown`.
pub(super) async fn run(objects: ObjectStore, shared: Shared, shutdown: CancellationToken) {
    let mut events = objects.subscribe();
    loop {
        if let Err(error) = reconcile(&objects, &shared).await {
            tracing::warn!(%error, "cannot rebuild placements");
        }
        tokio::select! {
            event = events.recv() => match event {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = shutdown.cancelled() => return,
        }
        tokio::time::sleep(DEBOUNCE).await;
        while !matches!(
            events.try_recv(),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed)
        ) {}
    }
}

/// Rebuilds every placement's entry and hands the set to the core.
async fn reconcile(objects: &ObjectStore, shared: &Shared) -> Result<(), ControllerError> {
    let all = objects.list_all()?;
    let (placements, workloads): (Vec<_>, Vec<_>) = all.into_iter().partition(|(key, _)| {
        key.group == placement::RELAYMESH_GROUP && key.resource == "placements"
    });
    let workloads: Vec<serde_json::Value> =
        workloads.into_iter().map(|(_, object)| object).collect();
    let mut entries: Vec<SliceEntry> = Vec::new();
    for (key, object) in placements {
        match placement::build(&object, &workloads) {
            Ok(packed) => {
                for id in &packed.entry.bundles {
                    if !shared.store.has_bundle(id)? {
                        shared.store.put_bundle(id, &packed.bundle)?;
                    }
                }
                tracing::debug!(placement = %key.name, objects = packed.objects, "placement built");
                entries.push(packed.entry);
            }
            Err(error) => {
                tracing::warn!(placement = %key.name, %error, "invalid placement skipped")
            }
        }
    }
    let (reply, done) = oneshot::channel();
    shared
        .events
        .send(Event::SetPlacements { entries, reply })
        .await
        .map_err(|_| ControllerError::Stopping)?;
    let _ = done.await;
    Ok(())
}

/// Why placements could not be rebuilt (logged; the next change retries).
#[derive(Debug, thiserror::Error)]
enum ControllerError {
    #[error(transparent)]
    Objects(#[from] crate::objects::ObjectError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("the relay is stopping")]
    Stopping,
}
