//! Watch events on a hollow cluster: a change as the cluster's history keeps
//! it, a running watch as the cluster keeps it, and an event as a watch
//! stream sends it (a line of newline-delimited JSON).
//!
//! The store holds these (its history and its watchers), and a watch stream
//! reads them; keeping them below both is what lets the store announce a
//! write without knowing about streams.

use bytes::{Bytes, BytesMut};
use relaymesh_apiserver::objects::ObjectKey;
use serde_json::Value;
use tokio::sync::mpsc;

use super::filter::Filter;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    fn name(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in a cluster's history.
#[derive(Debug, Clone)]
pub(super) struct Event {
    pub(super) resource_version: u64,
    pub(super) event_type: EventType,
    pub(super) key: ObjectKey,
    /// The object as it was announced (shares the stored bytes).
    pub(super) object: Bytes,
}

impl Event {
    /// Sends the event to every watcher that selects it, and drops the
    /// watchers whose stream is gone. `object` is the announced object,
    /// parsed, so that selectors need not parse it again.
    pub(super) fn announce(&self, watchers: &mut Vec<Watcher>, object: &Value) {
        // Made at most once, however many watchers take it.
        let mut line = None;
        watchers.retain(|watcher| {
            if !watcher
                .filter
                .selects(&self.key, Some(object), &self.object)
            {
                return true;
            }
            let line = line.get_or_insert_with(|| event_line(self.event_type, &self.object));
            // A watcher whose stream is gone is dropped here.
            watcher.lines.send(line.clone()).is_ok()
        });
    }
}

/// A running watch, as its cluster keeps it.
pub(super) struct Watcher {
    pub(super) id: u64,
    pub(super) filter: Filter,
    pub(super) lines: mpsc::UnboundedSender<Bytes>,
}

/// `{"type":TYPE,"object":OBJECT}` and a newline, without parsing the
/// object again.
pub(super) fn event_line(event_type: EventType, object: &Bytes) -> Bytes {
    let prefix = format!("{{\"type\":\"{}\",\"object\":", event_type.name());
    let mut line = BytesMut::with_capacity(prefix.len() + object.len() + 2);
    line.extend_from_slice(prefix.as_bytes());
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    line.freeze()
}
