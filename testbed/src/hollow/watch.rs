//! Lists and watches on a hollow cluster. A watch is newline-delimited JSON
//! events (`ADDED`, `MODIFIED`, `DELETED`, and a `BOOKMARK` before the
//! stream ends), as kube-runtime's watcher and `await_condition` read them.
//!
//! A watch from resourceVersion N first gets the events after N from the
//! cluster's short history (or, if they are gone, an `ERROR` event with a
//! `410 Expired` status, upon which the watcher relists); a watch without one
//! (or from `0`) first gets every matching object as `ADDED`. Then it gets
//! each write as it happens: the writer hands the event to every matching
//! watcher under the cluster's lock, so none is missed or sent twice between
//! the replay and the live events. At `timeoutSeconds` the stream ends with
//! a bookmark of the cluster's resourceVersion, so the watcher resumes from
//! there instead of relisting.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_apiserver::query::Query;
use relaymesh_apiserver::status::Status;
use relaymesh_apiserver::{api_version, ApiError, Resource};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Sleep;

use super::encoding::to_bytes;
use super::events::{event_line, EventType, Watcher};
use super::filter::Filter;
use super::state::Inner;

/// How long a watch lasts when the client names no `timeoutSeconds`
/// (kube-apiserver picks 30 to 60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A `List` of `resource` in `namespace` (all if `None`) with what the
/// query's selectors select, at the cluster's resourceVersion. Nodes are
/// made up: [`SimulatorOptions::nodes`](crate::cluster::SimulatorOptions)
/// of them, stored nowhere. `limit` is not honoured: every item comes in
/// one page, which clients accept.
pub(super) fn list(
    cluster: &Inner,
    resource: &Resource,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Bytes, ApiError> {
    let filter = Filter::new(resource, namespace, query)?;
    let api_version = api_version(resource.group(), resource.version());
    let mut items: Vec<Bytes> = Vec::new();
    let version = {
        let state = cluster.lock();
        items.extend(
            state
                .objects
                .iter()
                .filter(|(key, bytes)| filter.selects(key, None, bytes))
                .map(|(_, bytes)| bytes.clone()),
        );
        state.resource_version
    };
    if resource.group().is_empty() && resource.plural() == "nodes" {
        items.extend((0..cluster.options.nodes).filter_map(|index| {
            let name = format!("{}-node-{index}", cluster.name);
            let node = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
            let key = ObjectKey::new("", "nodes", None, &name);
            let bytes = to_bytes(&node);
            filter.selects(&key, Some(&node), &bytes).then_some(bytes)
        }));
    }
    let head = to_bytes(&json!({
        "apiVersion": api_version,
        "kind": format!("{}List", resource.kind()),
        "metadata": {"resourceVersion": version.to_string()},
    }));
    // `{...}` without its closing brace, then `,"items":[...]}`.
    let mut list = BytesMut::with_capacity(
        head.len() + items.iter().map(|item| item.len() + 1).sum::<usize>() + 16,
    );
    list.extend_from_slice(&head[..head.len().saturating_sub(1)]);
    list.extend_from_slice(b",\"items\":[");
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            list.extend_from_slice(b",");
        }
        list.extend_from_slice(item);
    }
    list.extend_from_slice(b"]}");
    Ok(list.freeze())
}

/// Starts a watch of `resource` in `namespace` (all if `None`) as the
/// query asks: `resourceVersion`, `labelSelector`, `fieldSelector`,
/// `timeoutSeconds`.
pub(super) fn start(
    cluster: &Arc<Inner>,
    resource: &Resource,
    namespace: Option<&str>,
    query: &Query,
) -> Result<WatchStream, ApiError> {
    let filter = Filter::new(resource, namespace, query)?;
    let since = match query.get("resourceVersion").unwrap_or_default() {
        "" | "0" => None,
        text => Some(
            text.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {text:?}")))?,
        ),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(text) => Duration::from_secs(
            text.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds {text:?}")))?,
        ),
        None => DEFAULT_TIMEOUT,
    };
    let (lines, receiver) = mpsc::unbounded_channel();
    let mut state = cluster.lock();
    match since {
        None => {
            for (key, bytes) in state.objects.iter() {
                if filter.selects(key, None, bytes) {
                    let _ = lines.send(event_line(EventType::Added, bytes));
                }
            }
        }
        Some(since) if since < state.compacted => {
            let status = Status::from_error(&ApiError::Gone(format!(
                "too old resource version: {since} ({})",
                state.compacted
            )));
            let object = serde_json::to_value(&status).unwrap_or_default();
            let line = to_line(&json!({"type": "ERROR", "object": object}));
            return Ok(WatchStream::finished(line));
        }
        Some(since) => {
            for event in state
                .history
                .iter()
                .filter(|event| event.resource_version > since)
            {
                if filter.selects(&event.key, None, &event.object) {
                    let _ = lines.send(event_line(event.event_type, &event.object));
                }
            }
        }
    }
    let id = state.next_watcher;
    state.next_watcher += 1;
    state.watchers.push(Watcher { id, filter, lines });
    drop(state);
    Ok(WatchStream {
        lines: Some(receiver),
        deadline: Box::pin(tokio::time::sleep(timeout)),
        cluster: Arc::downgrade(cluster),
        id,
        bookmark_type: (
            api_version(resource.group(), resource.version()),
            resource.kind().to_string(),
        ),
        tail: None,
    })
}

/// The response body of a watch.
pub struct WatchStream {
    /// `None` once the stream is over.
    lines: Option<mpsc::UnboundedReceiver<Bytes>>,
    deadline: Pin<Box<Sleep>>,
    cluster: Weak<Inner>,
    id: u64,
    /// The `apiVersion` and `kind` of its bookmark.
    bookmark_type: (String, String),
    /// What is left to send once the stream ends.
    tail: Option<Bytes>,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl WatchStream {
    /// A stream of one line, then the end.
    fn finished(line: Bytes) -> Self {
        Self {
            lines: None,
            deadline: Box::pin(tokio::time::sleep(Duration::ZERO)),
            cluster: Weak::new(),
            id: u64::MAX,
            bookmark_type: Default::default(),
            tail: Some(line),
        }
    }

    /// The next chunk of the body; `None` at its end.
    pub(super) fn poll_next(&mut self, context: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let Some(lines) = self.lines.as_mut() else {
            return Poll::Ready(self.tail.take());
        };
        match lines.poll_recv(context) {
            Poll::Ready(Some(line)) => return Poll::Ready(Some(line)),
            // The cluster is gone.
            Poll::Ready(None) => {
                self.lines = None;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if self.deadline.as_mut().poll(context).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(Some(self.finish()))
    }

    /// Ends the stream at its timeout: what is still queued, then a
    /// bookmark of the cluster's resourceVersion. The watcher is removed
    /// and the version read under one lock, so every event up to that
    /// version is already queued.
    fn finish(&mut self) -> Bytes {
        let mut tail = BytesMut::new();
        let version = self.cluster.upgrade().map(|inner| {
            let mut state = inner.lock();
            state.watchers.retain(|watcher| watcher.id != self.id);
            state.resource_version
        });
        if let Some(mut lines) = self.lines.take() {
            lines.close();
            while let Ok(line) = lines.try_recv() {
                tail.extend_from_slice(&line);
            }
        }
        if let Some(version) = version {
            let (api_version, kind) = &self.bookmark_type;
            tail.extend_from_slice(&to_line(&json!({
                "type": "BOOKMARK",
                "object": {"apiVersion": api_version, "kind": kind,
                           "metadata": {"resourceVersion": version.to_string()}},
            })));
        }
        tail.freeze()
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        if self.lines.is_some() {
            if let Some(inner) = self.cluster.upgrade() {
                inner
                    .lock()
                    .watchers
                    .retain(|watcher| watcher.id != self.id);
            }
        }
    }
}

fn to_line(value: &Value) -> Bytes {
    let mut line = BytesMut::from(&to_bytes(value)[..]);
    line.extend_from_slice(b"\n");
    line.freeze()
}
