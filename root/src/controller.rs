//! The root's placement controller: watches the objects the API stores and
//! keeps one slice entry per Placement, whose bundle holds exactly the root
//! objects the Placement selects. Editing a workload makes a new bundle and a
//! new revision; deleting a Placement removes its entry everywhere.

use std::time::Duration;

use relaymesh_core::rollouts::RolloutInput;
use relaymesh_protocol::{BundleId, SliceEntry};
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

use crate::placement::{self, Specs};
use relaymesh_apiserver::objects::{ObjectEvent, ObjectKey, ObjectStore, WatchEventType};
use relaymesh_core::PlacementReport;
use relaymesh_node::daemon::root_services::{RootHandle, RootRequest};

mod rollout;

/// The longest object changes are gathered before placements are rebuilt,
/// counted from the first: a `kubectl apply` of many objects rebuilds once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Gathering ends sooner once no object changed for this long: kubectl
/// sends a file's objects about a millisecond apart, and a fixed
/// [`DEBOUNCE`] was a tenth of the time from `kubectl apply` to 100
/// clusters applied (docs/performance.md).
const QUIET: Duration = Duration::from_millis(25);

/// A status report asks the node's loop for every placement's status
/// (O(children) each). After a report that took the loop `t` to answer
/// (waiting in its queue included), the next status-only round waits
/// `REPORT_PACE × t`, so reports keep at most a tenth of a busy loop; a
/// report every 100 ms was two fifths of the root's loop in a star of
/// 5,000 (docs/performance.md). Object changes still rebuild after
/// [`DEBOUNCE`].
const REPORT_PACE: u32 = 9;

/// The longest a status change waits for the next report, however slow
/// the last one was.
const MAX_STATUS_PAUSE: Duration = Duration::from_secs(2);

/// How often placement status is refreshed when no object changes (clusters
/// joining or leaving change what a placement selects).
const STATUS_INTERVAL: Duration = Duration::from_secs(5);

/// Runs until `shutdown`.
pub(super) async fn run(
    objects: ObjectStore,
    node: RootHandle,
    specs: Specs,
    encoding: placement::BundleEncoding,
    shutdown: CancellationToken,
) {
    let mut events = objects.subscribe();
    // Changes lost under the store (etcd compacted them while its feed
    // was cut off): only a rebuild from everything is right then.
    let mut restarts = objects.restarts();
    let mut status = node.placement_status();
    let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
    let mut built = Built::new();
    let mut encoder = placement::Encoder::new(encoding);
    let mut metrics = crate::metrics::PlacementMetrics::default();
    let mut rebuild = true;
    let mut report_took = Duration::ZERO;
    loop {
        if rebuild {
            match reconcile(&objects, &node, &specs, &mut encoder).await {
                Ok(generations) => built = generations,
                Err(error) => tracing::warn!(%error, "cannot rebuild placements"),
            }
        }
        match write_status(&objects, &node, &specs, &built, &mut metrics).await {
            Ok(took) => report_took = took,
            Err(error) => tracing::warn!(%error, "cannot update placement status"),
        }
        // Objects changing rebuild the placements; a status from below
        // (written within a debounce, not at the next tick: status latency
        // is a goal, docs/benchmarks.md) or the tick only writes status.
        rebuild = tokio::select! {
            event = events.recv() => match event {
                Ok(event) => !is_placement_status(&event),
                Err(broadcast::error::RecvError::Lagged(_)) => true,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            Ok(()) = status.changed() => false,
            Ok(()) = restarts.changed() => true,
            _ = status_tick.tick() => false,
            () = shutdown.cancelled() => return,
        };
        if rebuild {
            if gather(&mut events, |event| !is_placement_status(event))
                .await
                .is_none()
            {
                return;
            }
        } else {
            tokio::time::sleep(status_pause(report_took)).await;
        }
        // The status write itself changes objects: only other changes
        // call for a rebuild.
        loop {
            match events.try_recv() {
                Ok(event) => rebuild |= !is_placement_status(&event),
                Err(broadcast::error::TryRecvError::Lagged(_)) => rebuild = true,
                Err(_) => break,
            }
        }
    }
}

/// Waits while object changes keep coming: until none that `changes`
/// calls a change came for [`QUIET`], or [`DEBOUNCE`] passed. What it
/// read needs no other handling (the rebuild reads the store); `None` when
/// the store's feed closed.
async fn gather<T: Clone>(
    events: &mut broadcast::Receiver<T>,
    changes: impl Fn(&T) -> bool,
) -> Option<()> {
    let last_call = tokio::time::Instant::now() + DEBOUNCE;
    let mut quiet_from = tokio::time::Instant::now() + QUIET;
    loop {
        match tokio::time::timeout_at(quiet_from.min(last_call), events.recv()).await {
            Err(_) => return Some(()),
            Ok(Ok(event)) if changes(&event) => {
                quiet_from = tokio::time::Instant::now() + QUIET;
            }
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) => return None,
        }
    }
}

/// How long a status-only round waits after a report that took the
/// node's loop `report_took` ([`REPORT_PACE`]).
fn status_pause(report_took: Duration) -> Duration {
    report_took
        .saturating_mul(REPORT_PACE)
        .clamp(DEBOUNCE, MAX_STATUS_PAUSE)
}

/// Whether `event` is only a status changing (as this controller writes
/// it onto Placements, and onto singleton placements' objects), which
/// changes no entry: bundles carry no status.
fn is_placement_status(event: &ObjectEvent) -> bool {
    if event.event_type != WatchEventType::Modified {
        return false;
    }
    let Some(previous) = event.previous.as_deref() else {
        return false;
    };
    let placement =
        event.key.group == placement::RELAYMESH_GROUP && event.key.resource == "placements";
    if placement {
        // Annotations carry `relayctl rollout promote|abort`.
        return previous.get("spec") == event.object.get("spec")
            && previous["metadata"].get("labels") == event.object["metadata"].get("labels")
            && previous["metadata"].get("annotations")
                == event.object["metadata"].get("annotations");
    }
    placement::strip_server_fields(previous) == placement::strip_server_fields(&event.object)
}

/// The generation of each Placement (by entry key) that its entry in the
/// core was built from: what its status's `observedGeneration` says it
/// describes. A workload's write moves its Placements' generation on
/// ([`placement::PlacementsOfWorkloads`]) until the next build.
type Built = std::collections::BTreeMap<String, i64>;

/// Rebuilds every placement's entry and hands the set to the core, each
/// with what the API says of its rollout; returns the generation each entry
/// was built from.
async fn reconcile(
    objects: &ObjectStore,
    node: &RootHandle,
    specs: &Specs,
    encoder: &mut placement::Encoder,
) -> Result<Built, ControllerError> {
    // Generations first: a write after this read moves them on, so an
    // entry is never said to describe a later generation than it does.
    let (read_first, _) = objects.list(placement::RELAYMESH_GROUP, "placements", None)?;
    let built: Built = read_first
        .iter()
        .filter_map(|object| {
            let metadata = &object["metadata"];
            Some((
                placement::entry_key(metadata["namespace"].as_str()?, metadata["name"].as_str()?),
                metadata["generation"].as_i64()?,
            ))
        })
        .collect();
    let all = objects.list_all()?;
    let (placements, workloads): (Vec<_>, Vec<_>) = all.into_iter().partition(|(key, _)| {
        key.group == placement::RELAYMESH_GROUP && key.resource == "placements"
    });
    let workloads: Vec<serde_json::Value> =
        workloads.into_iter().map(|(_, object)| object).collect();
    let mut entries: Vec<(SliceEntry, RolloutInput)> = Vec::new();
    for (key, object) in placements {
        let built = specs
            .read(&object)
            .and_then(|spec| placement::build(&spec, &workloads, encoder));
        match built {
            Ok(mut packed) => {
                store_bundle(node, encoder, &mut packed).await?;
                tracing::debug!(placement = %key.name, objects = packed.objects, "placement built");
                let rollout = rollout::input(&object, &packed.rollout);
                entries.push((packed.entry, rollout));
            }
            Err(error) => {
                tracing::warn!(placement = %key.name, %error, "invalid placement skipped")
            }
        }
    }
    encoder.end_rebuild();
    let (reply, done) = oneshot::channel();
    node.send(RootRequest::SetPlacements { entries, reply })
        .await
        .map_err(|_| ControllerError::Stopping)?;
    let _ = done.await;
    Ok(built)
}

/// Puts the bundle of `packed` in the root's store unless it holds it.
async fn store_bundle(
    node: &RootHandle,
    encoder: &placement::Encoder,
    packed: &mut placement::Packed,
) -> Result<(), ControllerError> {
    let store = node.store();
    if let Some((id, bytes)) = bundle_to_store(|id| store.has_bundle(id), encoder, packed)? {
        store
            .put_bundle_off_runtime(id, bytes::Bytes::from(bytes))
            .await?;
    }
    Ok(())
}

/// The bundle of `packed` that a store without it must take, if `has`
/// says it lacks it: the bytes the encoder gave, or else the JSON encoded
/// (a JSON bundle, or a compressed one stored at an earlier rebuild that
/// has gone since); the entry names what is stored.
fn bundle_to_store<E>(
    has: impl Fn(&BundleId) -> Result<bool, E>,
    encoder: &placement::Encoder,
    packed: &mut placement::Packed,
) -> Result<Option<(BundleId, Vec<u8>)>, E> {
    let Some(id) = packed.entry.bundles.first().copied() else {
        return Ok(None);
    };
    if has(&id)? {
        return Ok(None);
    }
    // The JSON is not needed once the bundle is stored.
    let bytes = match packed.bundle.take() {
        Some(bytes) => bytes,
        None => encoder.again(std::mem::take(&mut packed.json)),
    };
    let stored = BundleId::of(&bytes);
    packed.entry.bundles = vec![stored];
    Ok(Some((stored, bytes)))
}

/// Writes the status of every Placement whose status changed
/// ([`placement::status::render`]): how many clusters it selects (from the
/// root's split), how they are doing (merged up the tree; selected clusters
/// that have not reported yet are pending), which fail and why, and its
/// conditions, and its rollout (whose next wave the core decides as it
/// reports). Returns how long the node's loop took to report.
async fn write_status(
    objects: &ObjectStore,
    node: &RootHandle,
    specs: &Specs,
    built: &Built,
    metrics: &mut crate::metrics::PlacementMetrics,
) -> Result<Duration, ControllerError> {
    let (placements, _) = objects.list(placement::RELAYMESH_GROUP, "placements", None)?;
    let placements: Vec<_> = placements
        .into_iter()
        .map(|object| {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let spec = specs.of(&object);
            (object, namespace, name, spec)
        })
        .collect();
    specs.retain(
        &placements
            .iter()
            .map(|(object, ..)| Specs::id(object))
            .collect(),
    );
    let gates_open = placements
        .iter()
        .filter_map(|(object, namespace, name, spec)| {
            let spec = spec
                .as_ref()
                .filter(|spec| !spec.rollout.gates.is_empty())?;
            Some((
                placement::entry_key(namespace, name),
                rollout::gates_open(&spec.rollout, &object["status"]),
            ))
        })
        .collect();
    let (reply, selected) = oneshot::channel();
    let asked = tokio::time::Instant::now();
    node.send(RootRequest::PlacementStatus { gates_open, reply })
        .await
        .map_err(|_| ControllerError::Stopping)?;
    let selected = selected.await.map_err(|_| ControllerError::Stopping)?;
    let took = asked.elapsed();
    let mut singletons = Vec::new();
    for (mut object, namespace, name, spec) in placements {
        let key = placement::entry_key(&namespace, &name);
        let Some(report) = selected.get(&key) else {
            continue;
        };
        let count = &report.selected;
        let status = &report.status;
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let rollout = spec
            .as_ref()
            .zip(report.rollout.as_ref())
            .and_then(|(spec, rollout)| rollout::render(rollout, &spec.rollout));
        if *count == 1 && !status.objects.is_empty() {
            if let Some(spec) = &spec {
                singletons.push((std::sync::Arc::clone(spec), report));
            }
        }
        // What the core's entry was built from; the object's own while
        // the store has not been read since (a new placement).
        let generation = built
            .get(&key)
            .copied()
            .or_else(|| object["metadata"]["generation"].as_i64());
        // The newest revision, or the previous one while an abort of the
        // newest sends the clusters back to it.
        let revision = report.bundles.first().map(|&newest| match &report.rollout {
            Some(rollout) if rollout.revision == newest => rollout.target(),
            _ => newest,
        });
        let mut written = placement::status::render(
            &object["status"],
            generation,
            *count,
            status,
            revision,
            &now,
        );
        // An invalid spec (refused at admission, so stored before a
        // change of the rules) summarizes nothing and has no bound.
        let rules = spec.as_ref().map_or(&[][..], |spec| &spec.status_rules[..]);
        let group_by = spec
            .as_ref()
            .map_or(&[][..], |spec| &spec.status_group_by[..]);
        placement::status::add_summaries(&mut written, group_by, rules, status);
        placement::status::add_handover(&mut written, &report.leaving);
        placement::status::add_unknown(&mut written, &report.unknown);
        placement::status::add_shortfall(
            &mut written,
            &object["status"],
            spec.as_ref().and_then(|spec| spec.target.max_clusters),
            *count,
            generation,
            &now,
        );
        if let Some(rollout) = rollout {
            placement::status::hold_ready_for_rollout(
                &mut written,
                &object["status"],
                &rollout,
                generation,
                &now,
            );
            if let Some(fields) = written.as_object_mut() {
                fields.insert("rollout".into(), rollout);
            }
        }
        metrics.placement(&namespace, &name, &written["clusters"], revision, status);
        if placement::status::same(&object["status"], &written) {
            continue;
        }
        object["status"] = written;
        let key = ObjectKey::new(
            placement::RELAYMESH_GROUP,
            "placements",
            Some(&namespace),
            &name,
        );
        match objects.update(&key, object) {
            Ok(_) => tracing::debug!(placement = %name, selected = count, "placement status"),
            // Changed meanwhile: the next round writes it.
            Err(error) => {
                tracing::debug!(placement = %name, %error, "placement status not written")
            }
        }
    }
    metrics.finish_round();
    if !singletons.is_empty() {
        copy_singleton_status(objects, &singletons)?;
    }
    Ok(took)
}

/// Copies the one cluster's status of each object of a single-destination
/// placement onto the root's copy ([`placement::singleton`]). Only objects
/// the placement selects are written: what a child reports names objects,
/// and a hostile one must not reach any other root object's status.
fn copy_singleton_status(
    objects: &ObjectStore,
    singletons: &[(std::sync::Arc<placement::PlacementSpec>, &PlacementReport)],
) -> Result<(), ControllerError> {
    for (key, mut object) in objects.list_all()? {
        for (spec, report) in singletons {
            if !spec.selects_object(&object) {
                continue;
            }
            let Some(reported) =
                placement::singleton::reported_for(&object, &report.status.objects)
            else {
                continue;
            };
            let Some(status) =
                placement::singleton::copied_status(&object, reported, &report.bundles)
            else {
                continue;
            };
            if object.get("status") == Some(&status) {
                break;
            }
            object["status"] = status;
            match objects.update(&key, object) {
                Ok(_) => {
                    tracing::debug!(object = %key.name, placement = %spec.name, "singleton status copied")
                }
                // Changed meanwhile: the next round writes it.
                Err(error) => {
                    tracing::debug!(object = %key.name, %error, "singleton status not written")
                }
            }
            break;
        }
    }
    Ok(())
}

/// Why placements could not be rebuilt (logged; the next change retries).
#[derive(Debug, thiserror::Error)]
enum ControllerError {
    #[error(transparent)]
    Objects(#[from] relaymesh_apiserver::objects::ObjectError),
    #[error(transparent)]
    Store(#[from] relaymesh_node::store::StoreError),
    #[error("the relay is stopping")]
    Stopping,
}

#[cfg(test)]
mod tests;
