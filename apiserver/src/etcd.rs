//! etcd as a replicated backend: a connection to an etcd cluster
//! ([`Etcd`]) that keeps every key under one prefix (its namespace), with
//! blocking calls for the store's synchronous API, and the object store's
//! [`Replicated`] backend on it.
//!
//! - **Blocking calls.** The store's API is synchronous (sled answers in
//!   microseconds), so each call runs on the connection's own runtime and
//!   the caller waits; on a multi-threaded tokio runtime the wait is
//!   `block_in_place`, so the caller's worker hands its other tasks on.
//! - **Bounded, and retried.** A call retries what etcd refuses for a
//!   moment (a leader election: "leader changed", "no leader") for up to
//!   [`REQUEST_TIMEOUT`], then answers [`BackendError::Unavailable`]: without
//!   a quorum the caller gets a clear error, never a hung request or a stale
//!   answer (reads are linearizable).
//! - **Writes whose outcome is unknown** (the connection broke, the leader
//!   changed while the write waited) are settled by reading the key back:
//!   a conditional write either shows in it or can be tried again.
//!
//! Only the v3 API of etcd 3.4 is used (Debian's `etcd-server`).

use std::future::Future;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, KeyValue, Txn, TxnOp,
    WatchOptions, WatchResponse,
};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::objects::{
    BackendError, Change, Entry, Expect, FeedItem, ObjectBackend, Replicated, Stored, Write,
};

pub use etcd_client::{Certificate, Identity, TlsOptions};

mod guarded;
pub use guarded::GuardedOp;

/// How long one call may take, retries included, before the caller is
/// told etcd is unavailable. Longer than an etcd leader election (1 s by
/// default), so losing one member does not fail requests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a call waits before trying again after etcd refused it.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// How long a feed waits before watching again after its watch broke.
const FEED_RETRY: Duration = Duration::from_millis(200);

/// The key [`Replicated::fence`] writes, within the namespace; outside the
/// objects (`o/`) and the root's own state.
const FENCE_KEY: &[u8] = b"fence";

/// A key within the namespace, its value and the revision that wrote it.
pub type Ranged = (Bytes, Bytes, u64);

/// Where an etcd cluster is and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct EtcdConfig {
    /// Client URLs (`http://127.0.0.1:2379`, or `https://…` with `tls`).
    pub endpoints: Vec<String>,
    /// TLS to the cluster: its CA and, for client-certificate auth, an
    /// identity.
    pub tls: Option<TlsOptions>,
    /// The prefix every key goes under (`/relaymesh/`), so that one etcd
    /// cluster can hold more than one root.
    pub prefix: String,
}

/// A connection to an etcd cluster, every key under one prefix. Cheap to
/// clone; clones share the connection and its runtime.
#[derive(Clone)]
pub struct Etcd {
    shared: Arc<Shared>,
    prefix: Vec<u8>,
}

struct Shared {
    client: Client,
    /// The connection's runtime; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A runtime cannot be dropped where blocking is not allowed (a
        // store dropped inside a task): let its threads end on their own.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Etcd {
    /// Connects to the cluster `config` names.
    pub fn connect(config: &EtcdConfig) -> Result<Self, BackendError> {
        if config.endpoints.is_empty() {
            return Err(BackendError::Failed("no etcd endpoint given".into()));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("etcd")
            .enable_all()
            .build()
            .map_err(|error| BackendError::Failed(format!("etcd runtime: {error}")))?;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls.clone());
        }
        let endpoints = config.endpoints.clone();
        let client = wait(
            &runtime,
            bounded(async move { Client::connect(endpoints, Some(options)).await }),
        )??
        .map_err(|error| unavailable(&error))?;
        info!(endpoints = ?config.endpoints, prefix = %config.prefix, "connected to etcd");
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                runtime: Some(runtime),
            }),
            prefix: config.prefix.as_bytes().to_vec(),
        })
    }

    /// The same connection, with keys under `prefix` within this one's.
    pub fn within(&self, prefix: &str) -> Self {
        let mut nested = self.prefix.clone();
        nested.extend_from_slice(prefix.as_bytes());
        Self {
            shared: self.shared.clone(),
            prefix: nested,
        }
    }

    /// The value at `key` and the revision that wrote it.
    pub fn get_value(&self, key: &[u8]) -> Result<Option<(Bytes, u64)>, BackendError> {
        let full = self.full(key);
        let response = self.call(move |mut client| {
            let full = full.clone();
            async move { client.get(full, None).await }
        })?;
        Ok(response.kvs().first().map(|kv| {
            (
                Bytes::copy_from_slice(kv.value()),
                revision(kv.mod_revision()),
            )
        }))
    }

    /// Puts `value` at `key`, whatever it held; the write's revision. A
    /// put is idempotent, so one whose outcome is unknown is made again.
    pub fn put(&self, key: &[u8], value: Vec<u8>) -> Result<u64, BackendError> {
        let full = self.full(key);
        let response = self.call(move |mut client| {
            let (full, value) = (full.clone(), value.clone());
            async move { client.put(full, value, None).await }
        })?;
        Ok(response
            .header()
            .map_or(0, |header| revision(header.revision())))
    }

    /// Applies `writes` in one transaction: all or none. Like
    /// [`put`](Self::put), made again when its outcome is unknown.
    pub fn apply_all(&self, writes: Vec<Write>) -> Result<u64, BackendError> {
        let operations: Vec<TxnOp> = writes
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => TxnOp::put(self.full(&key), value, None),
                None => TxnOp::delete(self.full(&key), None),
            })
            .collect();
        let response = self.call(move |mut client| {
            let operations = operations.clone();
            async move { client.txn(Txn::new().and_then(operations)).await }
        })?;
        Ok(response
            .header()
            .map_or(0, |header| revision(header.revision())))
    }

    /// Every key under `prefix` (within the namespace) and its value, at
    /// `at` (or the latest revision), in key order; and the revision read.
    pub fn range(
        &self,
        prefix: &[u8],
        at: Option<u64>,
    ) -> Result<(Vec<Ranged>, u64), BackendError> {
        let full = self.full(prefix);
        let mut options = GetOptions::new().with_prefix();
        if let Some(at) = at {
            options = options.with_revision(signed(at));
        }
        let response = self
            .call(move |mut client| {
                let (full, options) = (full.clone(), options.clone());
                async move { client.get(full, Some(options)).await }
            })
            .map_err(|error| compacted_or(error, at.unwrap_or(0)))?;
        let read = response
            .header()
            .map_or(0, |header| revision(header.revision()));
        let entries = response
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = kv.key().strip_prefix(self.prefix.as_slice())?;
                Some((
                    Bytes::copy_from_slice(key),
                    Bytes::copy_from_slice(kv.value()),
                    revision(kv.mod_revision()),
                ))
            })
            .collect();
        Ok((entries, read))
    }

    /// Whether etcd answers a linearizable read now; the cluster's
    /// revision if it does.
    pub fn check(&self) -> Result<u64, BackendError> {
        Replicated::revision(self)
    }

    /// The underlying client, for what this module does not wrap (leases,
    /// elections, compaction), with the namespace prefix to put before
    /// keys.
    pub fn client(&self) -> (Client, &[u8]) {
        (self.shared.client.clone(), &self.prefix)
    }

    /// Runs `future` on the connection's runtime and waits for it, at most
    /// [`REQUEST_TIMEOUT`].
    pub fn run<F>(&self, future: F) -> Result<F::Output, BackendError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self
            .shared
            .runtime
            .as_ref()
            .ok_or_else(|| BackendError::Unavailable("the etcd connection is closed".into()))?;
        wait(runtime, bounded(future))?
    }

    /// Spawns `future` on the connection's runtime.
    pub fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Some(runtime) = &self.shared.runtime {
            runtime.spawn(future);
        }
    }

    /// Makes the request `attempt` builds until etcd answers it, at most
    /// [`REQUEST_TIMEOUT`]: for reads and for writes that may be made twice.
    fn call<T, F, Fut>(&self, attempt: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: Fn(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send,
    {
        let client = self.shared.client.clone();
        self.run(async move {
            // Inside `run`'s own bound, so that the answer names etcd's
            // last refusal rather than only the time.
            let deadline = Instant::now() + REQUEST_TIMEOUT - RETRY_EVERY;
            let mut last = None;
            loop {
                match tokio::time::timeout_at(deadline, attempt(client.clone())).await {
                    Ok(Ok(answer)) => return Ok(answer),
                    Ok(Err(error)) if !retryable(&error) => return Err(unavailable(&error)),
                    Ok(Err(error)) => {
                        debug!(%error, "etcd refused a request; trying again");
                        last = Some(error);
                    }
                    Err(_) => return Err(timed_out(last.as_ref())),
                }
                if Instant::now() + RETRY_EVERY >= deadline {
                    return Err(timed_out(last.as_ref()));
                }
                tokio::time::sleep(RETRY_EVERY).await;
            }
        })
        .and_then(|answer| answer)
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut full = self.prefix.clone();
        full.extend_from_slice(key);
        full
    }

    fn stored(&self, kv: &KeyValue) -> Stored {
        Stored {
            value: Bytes::copy_from_slice(kv.value()),
            revision: Some(revision(kv.mod_revision())),
        }
    }

    /// The changes a watch response carries, in order.
    fn changes_of(&self, response: &WatchResponse) -> Vec<Change> {
        let mut changes = Vec::new();
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let Some(key) = kv.key().strip_prefix(self.prefix.as_slice()) else {
                continue;
            };
            changes.push(Change {
                key: Bytes::copy_from_slice(key),
                revision: revision(kv.mod_revision()),
                created: event.event_type() == EventType::Put
                    && kv.create_revision() == kv.mod_revision(),
                value: match event.event_type() {
                    EventType::Put => Some(Bytes::copy_from_slice(kv.value())),
                    EventType::Delete => None,
                },
                previous: event.prev_kv().map(|previous| self.stored(previous)),
            });
        }
        changes
    }

    /// Watches the namespace from revision `after + 1`.
    async fn watch_from(&self, after: u64) -> Result<etcd_client::WatchStream, etcd_client::Error> {
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(signed(after + 1));
        let mut client = self.shared.client.clone();
        client.watch(self.prefix.clone(), Some(options)).await
    }

    /// Watches from `after` until the watch breaks; the last revision
    /// handed over, and why it broke.
    async fn feed_once(
        &self,
        mut after: u64,
        sink: &mut Box<dyn FnMut(FeedItem) + Send>,
    ) -> (u64, BackendError) {
        let mut stream = match self.watch_from(after).await {
            Ok(stream) => stream,
            Err(error) => return (after, unavailable(&error)),
        };
        loop {
            let response = match stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => {
                    return (
                        after,
                        BackendError::Unavailable("the etcd watch ended".into()),
                    )
                }
                Err(error) => return (after, unavailable(&error)),
            };
            if let Some(error) = broken(&response, after) {
                return (after, error);
            }
            for change in self.changes_of(&response) {
                after = after.max(change.revision);
                sink(FeedItem::Change(change));
            }
        }
    }
}

impl ObjectBackend for Etcd {
    fn get(&self, key: &[u8]) -> Result<Option<Stored>, BackendError> {
        Ok(self.get_value(key)?.map(|(value, revision)| Stored {
            value,
            revision: Some(revision),
        }))
    }

    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a> {
        match self.range(prefix, None) {
            Ok((entries, _)) => Box::new(entries.into_iter().map(|raw| Ok(entry(raw)))),
            Err(error) => Box::new(std::iter::once(Err(error))),
        }
    }

    fn apply(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.apply_all(writes).map(|_| ())
    }

    fn replicated(&self) -> Option<&dyn Replicated> {
        Some(self)
    }
}

impl Replicated for Etcd {
    fn commit(
        &self,
        key: &[u8],
        value: Option<Vec<u8>>,
        expect: Expect,
    ) -> Result<Option<u64>, BackendError> {
        let full = self.full(key);
        let client = self.shared.client.clone();
        self.run(async move {
            loop {
                let condition = match expect {
                    Expect::Absent => Compare::version(full.clone(), CompareOp::Equal, 0),
                    Expect::Revision(at) => {
                        Compare::mod_revision(full.clone(), CompareOp::Equal, signed(at))
                    }
                };
                let operation = match &value {
                    Some(value) => TxnOp::put(full.clone(), value.clone(), None),
                    None => TxnOp::delete(full.clone(), None),
                };
                let error = match client
                    .clone()
                    .txn(Txn::new().when([condition]).and_then([operation]))
                    .await
                {
                    Ok(response) if response.succeeded() => {
                        return Ok(Some(
                            response
                                .header()
                                .map_or(0, |header| revision(header.revision())),
                        ))
                    }
                    Ok(_) => return Ok(None),
                    Err(error) => error,
                };
                // Made or not? The key says: the write shows in it, or the
                // condition still holds and it can be made again.
                debug!(%error, "an etcd write's outcome is unknown; reading the key back");
                tokio::time::sleep(RETRY_EVERY).await;
                let Ok(read) = client.clone().get(full.clone(), None).await else {
                    continue;
                };
                let now = read.kvs().first();
                let at = read
                    .header()
                    .map_or(0, |header| revision(header.revision()));
                match (now, &value, expect) {
                    // The value written is there (values carry uids and
                    // times, so another writer's would differ).
                    (Some(kv), Some(value), _) if kv.value() == value.as_slice() => {
                        return Ok(Some(revision(kv.mod_revision())))
                    }
                    // Still as expected: not made; make it.
                    (None, _, Expect::Absent) => {}
                    (Some(kv), _, Expect::Revision(expected))
                        if revision(kv.mod_revision()) == expected => {}
                    // The key is gone that was to be deleted: by this write
                    // or another delete, at or before the read.
                    (None, None, Expect::Revision(_)) => return Ok(Some(at)),
                    _ => return Ok(None),
                }
            }
        })?
    }

    fn revision(&self) -> Result<u64, BackendError> {
        // A linearizable read of one key: its header holds the cluster's
        // revision.
        let probe = self.full(FENCE_KEY);
        let response = self.call(move |mut client| {
            let probe = probe.clone();
            async move { client.get(probe, None).await }
        })?;
        Ok(response
            .header()
            .map_or(0, |header| revision(header.revision())))
    }

    fn scan_latest(&self, prefix: &[u8]) -> Result<(Vec<Entry>, u64), BackendError> {
        let (entries, read) = self.range(prefix, None)?;
        Ok((entries.into_iter().map(entry).collect(), read))
    }

    fn scan_at(&self, prefix: &[u8], at: u64) -> Result<Vec<Entry>, BackendError> {
        let (entries, _) = self.range(prefix, Some(at))?;
        Ok(entries.into_iter().map(entry).collect())
    }

    fn changes(&self, after: u64, until: u64) -> Result<Vec<Change>, BackendError> {
        if until <= after {
            return Ok(Vec::new());
        }
        let this = self.clone();
        self.run(async move {
            let mut stream = this
                .watch_from(after)
                .await
                .map_err(|error| unavailable(&error))?;
            let mut changes: Vec<Change> = Vec::new();
            // A watch from the past replays history in revision order, then
            // goes on live; `until` is a change's revision, so it comes.
            while changes.last().is_none_or(|change| change.revision < until) {
                let Some(response) = stream
                    .message()
                    .await
                    .map_err(|error| unavailable(&error))?
                else {
                    return Err(BackendError::Unavailable("the etcd watch ended".into()));
                };
                if let Some(error) = broken(&response, after) {
                    return Err(error);
                }
                changes.extend(this.changes_of(&response));
            }
            changes.retain(|change| change.revision <= until);
            Ok(changes)
        })?
    }

    fn follow(
        &self,
        after: u64,
        mut sink: Box<dyn FnMut(FeedItem) + Send>,
    ) -> Result<(), BackendError> {
        let this = self.clone();
        self.spawn(async move {
            let mut after = after;
            loop {
                let (reached, error) = this.feed_once(after, &mut sink).await;
                after = reached;
                if let BackendError::Compacted { .. } = error {
                    // Start again at the present: the store must rebuild
                    // what it derived from the lost changes.
                    match this.revision_now().await {
                        Ok(now) => {
                            warn!(%error, now, "etcd feed: changes lost to compaction; starting again at the present");
                            after = now;
                            sink(FeedItem::Restarted(now));
                        }
                        Err(error) => warn!(%error, "etcd feed: no revision to start again at"),
                    }
                } else {
                    debug!(%error, after, "etcd feed broke; watching again");
                }
                tokio::time::sleep(FEED_RETRY).await;
            }
        });
        Ok(())
    }

    fn fence(&self) -> Result<u64, BackendError> {
        self.put(FENCE_KEY, Vec::new())
    }
}

impl Etcd {
    async fn revision_now(&self) -> Result<u64, BackendError> {
        let mut client = self.shared.client.clone();
        let probe = self.full(FENCE_KEY);
        let response = bounded(async move { client.get(probe, None).await })
            .await?
            .map_err(|error| unavailable(&error))?;
        Ok(response
            .header()
            .map_or(0, |header| revision(header.revision())))
    }
}

/// Why a watch response ends the watch, if it does: etcd compacted what it
/// was to replay, or canceled it.
fn broken(response: &WatchResponse, after: u64) -> Option<BackendError> {
    if response.compact_revision() > 0 {
        return Some(BackendError::Compacted {
            requested: after + 1,
            compacted: revision(response.compact_revision()),
        });
    }
    if response.canceled() {
        return Some(BackendError::Unavailable(format!(
            "etcd canceled the watch: {}",
            response.cancel_reason()
        )));
    }
    None
}

/// `future`, or [`BackendError::Unavailable`] after [`REQUEST_TIMEOUT`].
async fn bounded<F: Future>(future: F) -> Result<F::Output, BackendError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    tokio::time::timeout_at(deadline, future)
        .await
        .map_err(|_| {
            BackendError::Unavailable(format!(
                "etcd did not answer within {}s (no quorum, or out of reach)",
                REQUEST_TIMEOUT.as_secs()
            ))
        })
}

/// Runs `future` on `runtime` and waits for its output from whatever thread
/// calls: a plain one, or a tokio worker (which first hands its other tasks
/// on when its runtime allows).
fn wait<F>(runtime: &tokio::runtime::Runtime, future: F) -> Result<F::Output, BackendError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (sender, receiver) = mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = sender.send(future.await);
    });
    crate::blocking::blocking(move || {
        receiver
            .recv()
            .map_err(|_| BackendError::Unavailable("the etcd connection is closed".into()))
    })
}

/// Whether etcd may answer the same request in a moment: an election, a
/// member out of reach, a broken connection. Not: a request etcd refuses
/// as such (a compacted or future revision, a too-large value).
fn retryable(error: &etcd_client::Error) -> bool {
    use tonic::Code;
    match error {
        etcd_client::Error::GRpcStatus(status) => !matches!(
            status.code(),
            Code::InvalidArgument
                | Code::OutOfRange
                | Code::PermissionDenied
                | Code::Unauthenticated
                | Code::FailedPrecondition
        ),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        _ => false,
    }
}

/// No answer within [`REQUEST_TIMEOUT`], with etcd's last refusal if any.
fn timed_out(last: Option<&etcd_client::Error>) -> BackendError {
    let seconds = REQUEST_TIMEOUT.as_secs();
    BackendError::Unavailable(match last {
        Some(error) => format!("etcd did not answer within {seconds}s; last: {error}"),
        None => format!("etcd did not answer within {seconds}s (no quorum, or out of reach)"),
    })
}

fn unavailable(error: &etcd_client::Error) -> BackendError {
    BackendError::Unavailable(format!("etcd: {error}"))
}

/// etcd says "required revision has been compacted" (or "is a future
/// revision") as an OutOfRange status: both are 410, as the embedded store
/// answers.
fn compacted_or(error: BackendError, requested: u64) -> BackendError {
    match &error {
        BackendError::Unavailable(message)
            if message.contains("compacted") || message.contains("future revision") =>
        {
            BackendError::Compacted {
                requested,
                compacted: 0,
            }
        }
        _ => error,
    }
}

/// A ranged key, its value and the revision that wrote it, as a scan
/// yields them.
fn entry((key, value, revision): Ranged) -> Entry {
    (
        key,
        Stored {
            value,
            revision: Some(revision),
        },
    )
}

/// etcd's revisions are positive `i64`s.
fn revision(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
