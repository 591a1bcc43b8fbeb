//! The changes watches are served from: what one change looks like
//! ([`ObjectEvent`]) and the bounded, in-memory run of the latest ones that a
//! watch resumes from and a paged list undoes to reach its snapshot. It lives
//! under the store's write lock; the store broadcasts each event as it
//! records it. Nothing here is persisted: after a restart the history starts
//! empty, at the stored resourceVersion.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::error::ObjectError;
use super::key::ObjectKey;

/// How many past events watches can resume from.
pub const HISTORY_LEN: usize = 10_000;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// It was created.
    Added,
    /// It was changed.
    Modified,
    /// It was deleted.
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectEvent {
    /// What happened.
    pub event_type: WatchEventType,
    /// Which object.
    pub key: ObjectKey,
    /// The object after the change (for deletions: its last state, with the
    /// deletion's resourceVersion).
    pub object: Value,
    /// The resourceVersion the change took.
    pub resource_version: u64,
    /// The object before the change (none for creations): what a paged
    /// list continued at an older version shows.
    pub previous: Option<Arc<Value>>,
}

/// The latest events, at most [`HISTORY_LEN`] of them.
pub(super) struct History {
    /// Watches can start from any version at or after this one.
    oldest_watchable: u64,
    /// The latest events, oldest first.
    events: VecDeque<ObjectEvent>,
}

impl History {
    /// An empty history: watches can start from `resource_version` on.
    pub(super) fn starting_at(resource_version: u64) -> Self {
        Self {
            oldest_watchable: resource_version,
            events: VecDeque::new(),
        }
    }

    /// Keeps `event`, forgetting the oldest one if the history is full.
    pub(super) fn push(&mut self, event: ObjectEvent) {
        if self.events.len() == HISTORY_LEN {
            if let Some(dropped) = self.events.pop_front() {
                self.oldest_watchable = dropped.resource_version;
            }
        }
        self.events.push_back(event);
    }

    /// The events after `resource_version`, or [`ObjectError::Gone`] if the
    /// history no longer reaches back that far.
    pub(super) fn since(&self, resource_version: u64) -> Result<Vec<ObjectEvent>, ObjectError> {
        if resource_version < self.oldest_watchable {
            return Err(self.gone(resource_version));
        }
        Ok(self.after(resource_version).cloned().collect())
    }

    /// Whether a list can be taken as it was at `resource_version`, given
    /// that `current` is the last version handed out: the history must
    /// reach back to it, and it must not lie in the future.
    pub(super) fn reaches(&self, resource_version: u64, current: u64) -> Result<(), ObjectError> {
        if resource_version < self.oldest_watchable || resource_version > current {
            return Err(self.gone(resource_version));
        }
        Ok(())
    }

    /// Turns `objects`, the current objects under the key prefix `wanted`
    /// by encoded key, into those at `resource_version`, which
    /// [`reaches`](Self::reaches) has checked.
    pub(super) fn undo_after(
        &self,
        resource_version: u64,
        wanted: &str,
        objects: &mut BTreeMap<String, Value>,
    ) {
        // The first change after the version tells what the object was then.
        let mut undone = HashSet::new();
        for event in self.after(resource_version) {
            let encoded = event.key.encode();
            if !encoded.starts_with(wanted) || !undone.insert(encoded.clone()) {
                continue;
            }
            match &event.previous {
                Some(previous) => objects.insert(encoded, previous.as_ref().clone()),
                None => objects.remove(&encoded),
            };
        }
    }

    fn after(&self, resource_version: u64) -> impl Iterator<Item = &ObjectEvent> {
        self.events
            .iter()
            .filter(move |event| event.resource_version > resource_version)
    }

    fn gone(&self, requested: u64) -> ObjectError {
        ObjectError::Gone {
            requested,
            oldest: self.oldest_watchable,
        }
    }
}
