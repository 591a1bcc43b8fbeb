//! The KWOK-like status simulator: a task that watches a simulated cluster's
//! object store and, a set delay after a workload appears or its spec
//! changes, writes the status [`status::desired_status`] gives it.
//!
//! It writes only when the stored status differs from the desired one, and
//! the desired status of a settled object is the object's own status, so its
//! own writes (which come back as events) never start another round.

use std::collections::HashMap;
use std::time::SystemTime;

use relaymesh_apiserver::objects::{
    ObjectError, ObjectEvent, ObjectKey, ObjectStore, WatchEventType,
};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tokio::time::{sleep_until, Duration, Instant};
use tracing::{debug, info, warn};

use super::status::{self, WorkloadKind};
use super::SimulatorOptions;

/// How soon a write that lost a race with another writer is tried again.
const RETRY: Duration = Duration::from_millis(200);

/// Runs until `stop` changes or its sender is dropped.
pub(super) async fn run(
    store: ObjectStore,
    cluster: String,
    options: SimulatorOptions,
    mut stop: watch::Receiver<()>,
) {
    let mut simulator = Simulator {
        store,
        cluster,
        options,
        due: HashMap::new(),
    };
    // Subscribe before listing so no change falls between the two.
    let mut events = simulator.store.subscribe();
    simulator.resync();
    loop {
        let next = simulator.due.values().map(|due| due.at).min();
        tokio::select! {
            _ = stop.changed() => break,
            event = events.recv() => match event {
                Ok(event) => simulator.observe(&event),
                Err(RecvError::Lagged(missed)) => {
                    debug!(missed, "status simulator fell behind; relisting");
                    simulator.resync();
                }
                Err(RecvError::Closed) => break,
            },
            () = sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                simulator.write_due();
            }
        }
    }
    debug!(cluster = %simulator.cluster, "status simulator stopped");
}

struct Simulator {
    store: ObjectStore,
    cluster: String,
    options: SimulatorOptions,
    /// The workloads whose status is to be written, and when.
    due: HashMap<ObjectKey, Due>,
}

#[derive(Debug, Clone, Copy)]
struct Due {
    at: Instant,
    /// The generation the delay started for; a newer one restarts it.
    generation: i64,
}

impl Simulator {
    fn resync(&mut self) {
        for (group, resource) in WorkloadKind::ALL {
            match self.store.list(group, resource, None) {
                Ok((objects, _)) => {
                    for object in objects {
                        let Some(key) = key_of(group, resource, &object) else {
                            continue;
                        };
                        self.schedule(key, &object);
                    }
                }
                Err(error) => warn!(%error, resource, "status simulator cannot list"),
            }
        }
    }

    fn observe(&mut self, event: &ObjectEvent) {
        if WorkloadKind::of(&event.key).is_none() {
            return;
        }
        match event.event_type {
            WatchEventType::Deleted => {
                self.due.remove(&event.key);
            }
            WatchEventType::Added | WatchEventType::Modified => {
                self.schedule(event.key.clone(), &event.object);
            }
        }
    }

    /// Starts the delay for `object` if its status is not the desired one.
    fn schedule(&mut self, key: ObjectKey, object: &Value) {
        let Some(kind) = WorkloadKind::of(&key) else {
            return;
        };
        if self.desired(kind, object).is_none() {
            self.due.remove(&key);
            return;
        }
        let generation = generation_of(object);
        match self.due.get(&key) {
            Some(due) if due.generation == generation => {}
            _ => {
                let at = Instant::now() + self.options.delay;
                self.due.insert(key, Due { at, generation });
            }
        }
    }

    /// The status to write, if it differs from the stored one.
    fn desired(&self, kind: WorkloadKind, object: &Value) -> Option<Value> {
        let failure = status::failure(object, &self.cluster, &self.options.failures);
        let desired = status::desired_status(
            kind,
            object,
            failure.as_ref(),
            self.options.nodes,
            SystemTime::now(),
        );
        (object["status"] != desired).then_some(desired)
    }

    fn write_due(&mut self) {
        let now = Instant::now();
        let ready: Vec<ObjectKey> = self
            .due
            .iter()
            .filter(|(_, due)| due.at <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in ready {
            match self.write(&key) {
                Ok(()) => {
                    self.due.remove(&key);
                }
                Err(ObjectError::Conflict { .. }) => {
                    if let Some(due) = self.due.get_mut(&key) {
                        due.at = now + RETRY;
                    }
                }
                Err(error) => {
                    warn!(%key, %error, "status simulator cannot write a status");
                    self.due.remove(&key);
                }
            }
        }
    }

    fn write(&self, key: &ObjectKey) -> Result<(), ObjectError> {
        let Some(kind) = WorkloadKind::of(key) else {
            return Ok(());
        };
        let Some(mut object) = self.store.get(key)? else {
            return Ok(());
        };
        let Some(desired) = self.desired(kind, &object) else {
            return Ok(());
        };
        // The first condition says how it went (Available, or a Job's end).
        let first = &desired["conditions"][0];
        let condition = format!(
            "{}={}",
            first["type"].as_str().unwrap_or_default(),
            first["status"].as_str().unwrap_or_default()
        );
        object["status"] = desired;
        // The read resourceVersion stays on the object: a concurrent write
        // makes this one a Conflict, retried after the newer event.
        self.store.update(key, object)?;
        info!(cluster = %self.cluster, %key, %condition, "simulated status written");
        Ok(())
    }
}

fn generation_of(object: &Value) -> i64 {
    object["metadata"]["generation"].as_i64().unwrap_or(1)
}

fn key_of(group: &str, resource: &str, object: &Value) -> Option<ObjectKey> {
    let name = object["metadata"]["name"].as_str()?;
    let namespace = object["metadata"]["namespace"].as_str();
    Some(ObjectKey::new(group, resource, namespace, name))
}

#[cfg(test)]
mod tests;
