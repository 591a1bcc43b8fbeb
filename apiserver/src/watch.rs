//! Watches (`?watch=1`): a streamed response of newline-delimited
//! `{"type": ..., "object": ...}` events, as kube-apiserver writes them.
//!
//! A watch from resourceVersion `""` or `"0"` first sends every matching
//! object as `ADDED` (with `sendInitialEvents=true`, from any version, and
//! then a bookmark annotated `k8s.io/initial-events-end`; with
//! `sendInitialEvents=false`, none); from a later version it replays the
//! store's history,
//! or sends one `ERROR` event with a `410 Expired` Status when the history no
//! longer reaches back that far. Bookmarks are sent when asked for; the
//! stream ends after `timeoutSeconds`, on server shutdown, or when the client
//! goes away. Read-only resources an extension makes (relaymesh's Clusters
//! and Relays, from the tree's inventory) send their current objects, then
//! every change the watch sees when it looks again, once a second
//! ([`view_changes`]).
//!
//! What watches may cost:
//! * each takes a slot of the server's [`crate::WatchLimits`] (per user and
//!   in all, as the extension sets them) before it sends anything; one over
//!   gets `429 TooManyRequests` with `Retry-After`, and the slot comes
//!   back when the watch ends, however it ends ([`crate::watch_gate`]);
//! * each queues at most [`BUFFER`] for its client; a client that leaves
//!   it full for [`SLOW_CLIENT_GRACE`] loses the watch, its queue freed at
//!   once, and the refusal is counted ([`ApiLimit::WatchBuffer`]; [`outbox`]).

mod outbox;
mod view_changes;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tracing::{debug, info};

use super::collection::{select, store_error, Filter};
use super::context::Context;
use super::http::ApiBody;
use super::query::Query;
use super::resources::{Resource, Source};
use super::status::Status;
use super::table::{self, IncludeObject};
use super::{field_validation, list_options, protobuf};
use super::{ApiError, Extension};
use crate::limits::ApiLimit;
use crate::objects::{ObjectError, ObjectEvent, WatchEventType};
use crate::watch_gate::WatchSlot;
use outbox::{Capacity, Outbox, PushError};

/// How long a watch lasts when the client does not say (kube-apiserver picks
/// 30 to 60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How often bookmarks are sent, when asked for.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// How often a watch on a read-only view looks whether it changed
/// ([`Extension::objects_version`]) and, if so, compares it with what it
/// sent: relaymesh's inventory changes reach the root coalesced, about
/// once a second, so looking more often would find nothing more.
const VIEW_POLL: Duration = Duration::from_secs(1);

/// What one watch queues for its client at most: 256 events or 4 MiB,
/// whichever comes first (one larger event is still sent alone). Beyond
/// that the events wait in the object store's broadcast, shared by every
/// watch, not copied per watch.
const BUFFER: Capacity = Capacity {
    events: 256,
    bytes: 4 * 1024 * 1024,
};

/// How long a watch waits for its client to make room in a full queue
/// before it ends the watch (kube-apiserver closes a watcher that cannot
/// keep up, and the client watches again from its last resourceVersion).
const SLOW_CLIENT_GRACE: Duration = Duration::from_secs(5);

/// What a refused watch's `Retry-After` says, in seconds (kube-apiserver's
/// max-in-flight filter says 1).
const RETRY_AFTER_SECONDS: u32 = 1;

/// Where a watch's events come from after its first ones.
enum Live<E> {
    /// The object store's events.
    Store(broadcast::Receiver<ObjectEvent>),
    /// A read-only view an extension makes, compared with what was sent.
    View {
        extension: Arc<E>,
        sent: view_changes::Sent,
        ticker: tokio::time::Interval,
        /// The [`Extension::objects_version`] of what was sent.
        rendered: Option<u64>,
    },
}

/// How the events of one watch are written.
struct Encoder {
    resource: Resource,
    as_table: bool,
    include: IncludeObject,
    /// Frames of `application/vnd.kubernetes.protobuf;stream=watch`
    /// rather than JSON lines; chosen once per stream.
    protobuf: bool,
}

impl Encoder {
    fn event(&self, event_type: &str, object: &Value, resource_version: &str) -> Bytes {
        let mut object = object.clone();
        if object.is_object() {
            object["apiVersion"] = json!(self.resource.api_version());
            object["kind"] = json!(self.resource.kind);
        }
        let object = if self.as_table {
            table::render(
                &self.resource,
                &[object],
                self.include,
                resource_version,
                SystemTime::now(),
            )
        } else {
            object
        };
        self.frame(event_type, &object)
    }

    /// One event of the stream, in its format. A protobuf frame carries
    /// the object as kube-apiserver would have stored it (without fields
    /// its message lacks); one that still cannot be encoded becomes an
    /// `ERROR` event, which makes the client list again.
    fn frame(&self, event_type: &str, object: &Value) -> Bytes {
        if !self.protobuf {
            return line(&json!({"type": event_type, "object": object}));
        }
        let object = field_validation::pruned(&self.resource, object);
        match protobuf::encode_watch_event(event_type, &object) {
            Ok(frame) => Bytes::from(frame),
            Err(error) => {
                let status = Status::from_error(&ApiError::Internal(format!(
                    "cannot encode a watch event as protobuf: {error}"
                )));
                let fallback = serde_json::to_value(&status).unwrap_or_default();
                protobuf::encode_watch_event("ERROR", &fallback)
                    .map(Bytes::from)
                    .unwrap_or_default()
            }
        }
    }

    /// An `ERROR` event carrying `status`.
    fn error(&self, status: &Status) -> Bytes {
        let object = serde_json::to_value(status).unwrap_or_default();
        self.frame("ERROR", &object)
    }

    fn bookmark(&self, resource_version: u64) -> Bytes {
        self.frame("BOOKMARK", &self.bookmark_object(resource_version))
    }

    /// The bookmark that ends a watch's initial events
    /// (`sendInitialEvents=true`), as client-go's watch-list waits for it.
    fn end_of_initial_events(&self, resource_version: u64) -> Bytes {
        let mut object = self.bookmark_object(resource_version);
        object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        self.frame("BOOKMARK", &object)
    }

    fn bookmark_object(&self, resource_version: u64) -> Value {
        json!({
            "kind": self.resource.kind,
            "apiVersion": self.resource.api_version(),
            "metadata": {"resourceVersion": resource_version.to_string()},
        })
    }
}

/// Starts a watch and returns its streaming response.
pub(super) fn serve<E: Extension>(
    context: &Context<E>,
    resource: &Resource,
    filter: Filter,
    query: &Query,
    as_table: bool,
    accept: &str,
) -> Result<Response<ApiBody>, ApiError> {
    let slot = admit(context, resource)?;
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|seconds| seconds.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = query.get("allowWatchBookmarks") == Some("true");
    let encoder = Encoder {
        resource: resource.clone(),
        as_table,
        include: IncludeObject::parse(query.get("includeObject")),
        protobuf: !as_table && resource.builtin && protobuf::wants_protobuf(accept),
    };
    let (sender, receiver) = outbox::outbox(BUFFER);
    let mut initial = Vec::new();
    let mut live = None;
    let since = query.get("resourceVersion").unwrap_or_default();
    let initial_events = list_options::sends_initial_events(query)?;
    let from_now = since.is_empty() || since == "0";
    if initial_events == Some(false) && from_now && resource.source == Source::Stored {
        // Only what changes from now on.
        let (_, events) = context
            .objects
            .watch(context.objects.resource_version())
            .map_err(|e| store_error(resource, "", e))?;
        live = Some(Live::Store(events));
    } else if resource.source != Source::Stored
        || initial_events == Some(true)
        || (initial_events.is_none() && from_now)
    {
        // Read before the objects, so a change while they are made is
        // rendered again rather than missed.
        let rendered = context.extension.objects_version(resource);
        let (objects, version) = select(context, resource, &filter)?;
        for object in &objects {
            let version = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or(&version);
            initial.push(encoder.event("ADDED", object, version));
        }
        if resource.source != Source::Stored {
            let mut ticker = tokio::time::interval(VIEW_POLL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            live = Some(Live::View {
                extension: context.extension.clone(),
                sent: view_changes::Sent::new(&objects),
                ticker,
                rendered,
            });
        } else {
            let version: u64 = version.parse().unwrap_or(0);
            if initial_events == Some(true) {
                initial.push(encoder.end_of_initial_events(version));
            }
            let (history, events) = context
                .objects
                .watch(version)
                .map_err(|e| store_error(resource, "", e))?;
            initial.extend(
                history
                    .iter()
                    .filter_map(|event| encode(&encoder, &filter, event)),
            );
            live = Some(Live::Store(events));
        }
    } else {
        let version: u64 = since
            .parse()
            .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {since:?}")))?;
        match context.objects.watch(version) {
            Ok((history, events)) => {
                initial.extend(
                    history
                        .iter()
                        .filter_map(|event| encode(&encoder, &filter, event)),
                );
                live = Some(Live::Store(events));
            }
            Err(error @ ObjectError::Gone { .. }) => {
                let status = Status::from_error(&ApiError::Gone(error.to_string()));
                initial.push(encoder.error(&status));
            }
            Err(error) => return Err(store_error(resource, "", error)),
        }
    }
    let resource_version = context.objects.resource_version();
    let protobuf_stream = encoder.protobuf;
    let stop = context.stop.clone();
    let objects = context.objects.clone();
    let extension = context.extension.clone();
    debug!(resource = %resource.qualified(), namespace = ?filter.namespace, since, ?timeout, "watch started");
    tokio::spawn(async move {
        let ended = stream(
            &sender,
            initial,
            live,
            &encoder,
            filter,
            StreamOptions {
                timeout,
                bookmarks,
                resource_version,
            },
            stop,
            objects,
        )
        .await;
        if ended == Some(PushError::TooSlow) {
            info!(
                resource = %encoder.resource.qualified(),
                user = %slot.user(),
                limit = "watch-buffer",
                "ended a watch whose client left its queue full"
            );
            extension.count_limit_refusal(ApiLimit::WatchBuffer);
        }
        // The slot is given back only now, when the watch has ended.
        drop(slot);
    });
    let body = StreamBody::new(futures::stream::unfold(
        receiver,
        |mut receiver| async move {
            receiver
                .recv()
                .await
                .map(|bytes| (Ok(Frame::data(bytes)), receiver))
        },
    ));
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    *response.status_mut() = StatusCode::OK;
    let content_type = if protobuf_stream {
        protobuf::WATCH_MEDIA_TYPE
    } else {
        "application/json"
    };
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

struct StreamOptions {
    timeout: Duration,
    bookmarks: bool,
    resource_version: u64,
}

/// What a watch's live source yields next.
enum Next {
    Event(Result<ObjectEvent, broadcast::error::RecvError>),
    Changes(Vec<Bytes>),
}

/// Sends a watch's events until it ends; `Some` when it ended because an
/// event could not be queued.
#[allow(clippy::too_many_arguments)]
async fn stream<E: Extension>(
    sender: &Outbox,
    initial: Vec<Bytes>,
    live: Option<Live<E>>,
    encoder: &Encoder,
    filter: Filter,
    options: StreamOptions,
    mut stop: tokio::sync::watch::Receiver<()>,
    objects: crate::objects::ObjectStore,
) -> Option<PushError> {
    for bytes in initial {
        if let Err(error) = sender.push(bytes, SLOW_CLIENT_GRACE).await {
            return Some(error);
        }
    }
    let deadline = tokio::time::sleep(options.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
    ticker.tick().await;
    let mut last_version = options.resource_version;
    let mut live = live;
    let mut restarts = objects.restarts();
    let ended = 'watch: loop {
        let next = async {
            match live.as_mut() {
                Some(Live::Store(receiver)) => Next::Event(receiver.recv().await),
                Some(Live::View {
                    extension,
                    sent,
                    ticker,
                    rendered,
                }) => {
                    ticker.tick().await;
                    let version = extension.objects_version(&encoder.resource);
                    if version.is_some() && version == *rendered {
                        return Next::Changes(Vec::new());
                    }
                    *rendered = version;
                    let now: Vec<Value> = extension
                        .objects(&encoder.resource)
                        .into_iter()
                        .filter(|object| filter.matches(object))
                        .collect();
                    Next::Changes(
                        sent.changes(now)
                            .iter()
                            .map(|(event_type, object)| encoder.event(event_type, object, ""))
                            .collect(),
                    )
                }
                None => std::future::pending().await,
            }
        };
        let lines = tokio::select! {
            () = &mut deadline => break None,
            _ = stop.changed() => break None,
            Ok(()) = restarts.changed() => {
                // Changes were lost under this watch: the client must
                // start over from a list.
                let status = Status::from_error(&ApiError::Gone("the store's history started over".into()));
                let _ = sender.push(encoder.error(&status), Duration::ZERO).await;
                break None;
            }
            () = sender.closed() => break None,
            _ = ticker.tick(), if options.bookmarks => {
                last_version = last_version.max(objects.resource_version());
                vec![encoder.bookmark(last_version)]
            }
            next = next => match next {
                Next::Changes(lines) => lines,
                Next::Event(Ok(event)) => {
                    last_version = event.resource_version;
                    encode(encoder, &filter, &event).into_iter().collect()
                }
                Next::Event(Err(broadcast::error::RecvError::Lagged(missed))) => {
                    // The client must start over from a list.
                    debug!(missed, "watch fell behind; ending it");
                    let status = Status::from_error(&ApiError::Gone(format!("the watch fell {missed} events behind")));
                    let _ = sender.push(encoder.error(&status), Duration::ZERO).await;
                    break None;
                }
                Next::Event(Err(broadcast::error::RecvError::Closed)) => break None,
            },
        };
        for bytes in lines {
            if let Err(error) = sender.push(bytes, SLOW_CLIENT_GRACE).await {
                break 'watch Some(error);
            }
        }
    };
    debug!(resource = %encoder.resource.qualified(), "watch ended");
    ended
}

/// A slot for one more watch of the caller, or `429 TooManyRequests`
/// (counted as the limit it would break).
fn admit<E: Extension>(context: &Context<E>, resource: &Resource) -> Result<WatchSlot, ApiError> {
    let user = match &context.peer {
        crate::tls::PeerIdentity::Verified(user) => user.name.as_str(),
        // Routes let no one else this far.
        _ => "system:anonymous",
    };
    context.watches.admit(user).map_err(|refused| {
        let (whose, name) = match refused.limit {
            ApiLimit::WatchesPerUser => (
                format!("user {user:?} has {} open, the most one user may", refused.max),
                "watches-per-user",
            ),
            _ => (
                format!("the server has {} open, the most it keeps", refused.max),
                "watches",
            ),
        };
        info!(resource = %resource.qualified(), user, limit = ?refused.limit, "refused a watch over the limit");
        ApiError::OverLimit {
            limit: refused.limit,
            error: Box::new(ApiError::TooManyRequests {
                message: format!(
                    "too many watches: {whose} (limit {name}); end one, or retry later"
                ),
                retry_after_seconds: RETRY_AFTER_SECONDS,
            }),
        }
    })
}

/// The line of `event`, if the watch wants it.
fn encode(encoder: &Encoder, filter: &Filter, event: &ObjectEvent) -> Option<Bytes> {
    let resource = &encoder.resource;
    let wanted = event.key.group == resource.group
        && event.key.resource == resource.plural
        && (filter.namespace.is_none() || event.key.namespace == filter.namespace)
        && filter.matches(&event.object);
    let event_type = match event.event_type {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
    };
    wanted.then(|| {
        encoder.event(
            event_type,
            &event.object,
            &event.resource_version.to_string(),
        )
    })
}

fn line(value: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::objects::ObjectKey;

    fn encoder() -> Encoder {
        Encoder {
            resource: crate::resources::builtin("", "configmaps"),
            as_table: false,
            include: IncludeObject::Metadata,
            protobuf: false,
        }
    }

    fn event(namespace: &str, resource: &str, labels: Value) -> ObjectEvent {
        ObjectEvent {
            event_type: WatchEventType::Modified,
            key: ObjectKey::new("", resource, Some(namespace), "a"),
            object: json!({"metadata": {"name": "a", "namespace": namespace, "labels": labels}}),
            resource_version: 9,
            previous: None,
        }
    }

    #[test]
    fn events_are_filtered_and_framed() {
        let query = Query::parse(Some("labelSelector=app%3Dweb")).expect("parses");
        let filter = Filter::parse(&encoder().resource, Some("shop".into()), &query)
            .expect("valid selectors");
        let encoder = encoder();
        let line = encode(
            &encoder,
            &filter,
            &event("shop", "configmaps", json!({"app": "web"})),
        )
        .expect("wanted");
        let decoded: Value = serde_json::from_slice(&line).expect("JSON");
        assert!(line.ends_with(b"\n"));
        assert_eq!(decoded["type"], "MODIFIED");
        assert_eq!(decoded["object"]["kind"], "ConfigMap");
        assert!(encode(
            &encoder,
            &filter,
            &event("other", "configmaps", json!({"app": "web"}))
        )
        .is_none());
        assert!(encode(
            &encoder,
            &filter,
            &event("shop", "secrets", json!({"app": "web"}))
        )
        .is_none());
        assert!(encode(
            &encoder,
            &filter,
            &event("shop", "configmaps", json!({"app": "db"}))
        )
        .is_none());
    }

    #[test]
    fn bookmarks_and_tables() {
        let mut encoder = encoder();
        let bookmark: Value = serde_json::from_slice(&encoder.bookmark(42)).expect("JSON");
        assert_eq!(bookmark["type"], "BOOKMARK");
        assert_eq!(bookmark["object"]["metadata"]["resourceVersion"], "42");
        encoder.as_table = true;
        let table: Value = serde_json::from_slice(&encoder.event(
            "ADDED",
            &json!({"metadata": {"name": "a"}}),
            "3",
        ))
        .expect("JSON");
        assert_eq!(table["object"]["kind"], "Table");
        assert_eq!(table["object"]["rows"][0]["cells"][0], "a");
    }
}
