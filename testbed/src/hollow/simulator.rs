//! Workload status for hollow clusters, by the simulated clusters' rules
//! ([`crate::cluster::status`]): a set delay after a workload appears or its
//! generation changes, its desired status is written and watchers see a
//! MODIFIED event.
//!
//! Cheap when idle, for ten thousand clusters in a process: a cluster runs a
//! timer task only while some status is due, and the task ends when nothing
//! is. It holds the cluster weakly, so a dropped cluster's timer ends at its
//! next wake-up. It sleeps on tokio's clock, so tests with a paused clock
//! decide when statuses appear.

use std::sync::{Arc, Weak};
use std::time::SystemTime;

use relaymesh_apiserver::objects::ObjectKey;
use serde_json::Value;
use tokio::time::{sleep_until, Instant};

use super::state::{write_status, Due, Inner, State};
use crate::cluster::status::{self, WorkloadKind};

/// Called on every write of `object` (stored as `key`): starts the delay if
/// it is a workload whose status is not the desired one, and the timer if
/// none runs.
pub(super) fn schedule(cluster: &Arc<Inner>, state: &mut State, key: &ObjectKey, object: &Value) {
    let Some(kind) = WorkloadKind::of(key) else {
        return;
    };
    if desired(cluster, kind, object).is_none() {
        state.due.remove(key);
        return;
    }
    let generation = generation_of(object);
    match state.due.get(key) {
        Some(due) if due.generation == generation => {}
        _ => {
            let at = Instant::now() + cluster.options.delay;
            state.due.insert(key.clone(), Due { at, generation });
        }
    }
    if state.timer_running {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            state.timer_running = true;
            runtime.spawn(run(Arc::downgrade(cluster)));
        }
        Err(_) => {
            tracing::warn!(cluster = %cluster.name, %key, "written outside a tokio runtime: no status will be simulated");
        }
    }
}

/// The timer of one cluster: sleeps until the next status is due, writes
/// what is due, and ends when nothing is.
async fn run(cluster: Weak<Inner>) {
    loop {
        let next = {
            let Some(inner) = cluster.upgrade() else {
                return;
            };
            let mut state = inner.lock();
            match state.due.values().map(|due| due.at).min() {
                Some(at) => at,
                None => {
                    state.timer_running = false;
                    return;
                }
            }
        };
        sleep_until(next).await;
        let Some(inner) = cluster.upgrade() else {
            return;
        };
        write_due(&inner);
    }
}

/// Writes every status that is due.
fn write_due(inner: &Inner) {
    let now = Instant::now();
    let mut state = inner.lock();
    let ready: Vec<ObjectKey> = state
        .due
        .iter()
        .filter(|(_, due)| due.at <= now)
        .map(|(key, _)| key.clone())
        .collect();
    for key in ready {
        state.due.remove(&key);
        let Some(kind) = WorkloadKind::of(&key) else {
            continue;
        };
        let Some(object) = state
            .objects
            .get(&key)
            .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        else {
            continue;
        };
        let Some(desired) = desired(inner, kind, &object) else {
            continue;
        };
        // The first condition says how it went (Available, or a Job's end).
        let first = &desired["conditions"][0];
        tracing::debug!(
            cluster = %inner.name,
            %key,
            condition = %format!("{}={}", first["type"].as_str().unwrap_or_default(), first["status"].as_str().unwrap_or_default()),
            "simulated status written"
        );
        write_status(&mut state, &key, object, desired);
    }
}

/// The status to write, if it differs from the stored one.
fn desired(inner: &Inner, kind: WorkloadKind, object: &Value) -> Option<Value> {
    let failure = status::failure(object, &inner.name, &inner.options.failures);
    let desired = status::desired_status(
        kind,
        object,
        failure.as_ref(),
        inner.options.nodes,
        SystemTime::now(),
    );
    (object["status"] != desired).then_some(desired)
}

fn generation_of(object: &Value) -> i64 {
    object["metadata"]["generation"].as_i64().unwrap_or(1)
}
