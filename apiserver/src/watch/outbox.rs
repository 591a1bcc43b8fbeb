//! A watch's queue of encoded events, between the task that makes them and
//! the response body that writes them: bounded in events and in bytes, so a
//! client that does not read costs at most that much.
//!
//! The watch waits for room while its client reads. A client that leaves a
//! full queue unread for [`Outbox::push`]'s grace loses the watch: the queue
//! is dropped at once (its memory freed, whether or not the connection
//! stays open) and the response ends, as kube-apiserver closes a watcher
//! that cannot keep up; the client lists or watches again from its last
//! resourceVersion.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

/// How much one queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Capacity {
    /// Events queued at once.
    pub(super) events: usize,
    /// Bytes queued at once; an event larger than this is still taken
    /// when the queue is empty.
    pub(super) bytes: usize,
}

/// Why an event was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PushError {
    /// The client went away.
    Gone,
    /// The queue stayed full for the whole grace: it was dropped, and the
    /// response ends.
    TooSlow,
}

/// The watch's end of the queue.
#[derive(Debug)]
pub(super) struct Outbox {
    shared: Arc<Shared>,
}

/// The response body's end of the queue.
#[derive(Debug)]
pub(super) struct Inbox {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    capacity: Capacity,
    state: Mutex<State>,
    /// Wakes the inbox: an event arrived, or the outbox is done.
    arrived: Notify,
    /// Wakes the outbox: room was made, or the inbox is gone.
    room: Notify,
    /// Wakes whoever waits for the inbox to go.
    gone: Notify,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Bytes>,
    bytes: usize,
    /// The outbox was dropped or gave up: no more events come.
    done: bool,
    /// The inbox was dropped: the client went away.
    inbox_gone: bool,
}

impl State {
    fn has_room(&self, capacity: Capacity, len: usize) -> bool {
        self.queue.is_empty()
            || (self.queue.len() < capacity.events
                && self.bytes.saturating_add(len) <= capacity.bytes)
    }
}

/// A queue of `capacity`.
pub(super) fn outbox(capacity: Capacity) -> (Outbox, Inbox) {
    let shared = Arc::new(Shared {
        capacity,
        state: Mutex::new(State::default()),
        arrived: Notify::new(),
        room: Notify::new(),
        gone: Notify::new(),
    });
    (
        Outbox {
            shared: shared.clone(),
        },
        Inbox { shared },
    )
}

impl Outbox {
    /// Queues `bytes`, waiting at most `grace` for room. If the queue
    /// stays full that long, it is dropped and the inbox ends after what
    /// it already took.
    pub(super) async fn push(&self, bytes: Bytes, grace: Duration) -> Result<(), PushError> {
        match tokio::time::timeout(grace, self.send(bytes)).await {
            Ok(sent) => sent,
            Err(_) => {
                let mut state = lock(&self.shared.state);
                state.queue.clear();
                state.bytes = 0;
                state.done = true;
                drop(state);
                self.shared.arrived.notify_one();
                Err(PushError::TooSlow)
            }
        }
    }

    /// Queues `bytes` once there is room.
    async fn send(&self, bytes: Bytes) -> Result<(), PushError> {
        loop {
            {
                let mut state = lock(&self.shared.state);
                if state.inbox_gone {
                    return Err(PushError::Gone);
                }
                if state.has_room(self.shared.capacity, bytes.len()) {
                    state.bytes += bytes.len();
                    state.queue.push_back(bytes);
                    drop(state);
                    self.shared.arrived.notify_one();
                    return Ok(());
                }
            }
            // A notification sent since the check is kept, not lost.
            self.shared.room.notified().await;
        }
    }

    /// Completes when the client has gone away (the response body was
    /// dropped).
    pub(super) async fn closed(&self) {
        loop {
            if lock(&self.shared.state).inbox_gone {
                return;
            }
            self.shared.gone.notified().await;
        }
    }

    /// The events and bytes queued now.
    #[cfg(test)]
    fn queued(&self) -> (usize, usize) {
        let state = lock(&self.shared.state);
        (state.queue.len(), state.bytes)
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        lock(&self.shared.state).done = true;
        self.shared.arrived.notify_one();
    }
}

impl Inbox {
    /// The next event, or `None` once the watch has ended and everything
    /// queued was taken.
    pub(super) async fn recv(&mut self) -> Option<Bytes> {
        loop {
            {
                let mut state = lock(&self.shared.state);
                if let Some(bytes) = state.queue.pop_front() {
                    state.bytes -= bytes.len();
                    drop(state);
                    self.shared.room.notify_one();
                    return Some(bytes);
                }
                if state.done {
                    return None;
                }
            }
            self.shared.arrived.notified().await;
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.inbox_gone = true;
        state.queue.clear();
        state.bytes = 0;
        drop(state);
        self.shared.room.notify_one();
        self.shared.gone.notify_one();
    }
}

/// A poisoned lock still holds a consistent queue: every change is made
/// under it without code that can panic in between.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPACITY: Capacity = Capacity {
        events: 3,
        bytes: 10,
    };

    fn bytes(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_gets_everything_in_order() {
        let (outbox, mut inbox) = outbox(CAPACITY);
        let writer = tokio::spawn(async move {
            for len in 1..=8 {
                outbox
                    .push(bytes(len), Duration::from_secs(5))
                    .await
                    .expect("the reader keeps up");
            }
        });
        let mut lens = Vec::new();
        while let Some(event) = inbox.recv().await {
            lens.push(event.len());
        }
        assert_eq!(lens, (1..=8).collect::<Vec<_>>());
        writer.await.expect("the writer ends");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unread_queue_is_bounded_then_dropped() {
        let (outbox, mut inbox) = outbox(CAPACITY);
        let grace = Duration::from_secs(5);
        // One event larger than the byte bound goes into an empty queue.
        outbox.push(bytes(20), grace).await.expect("room");
        assert_eq!(inbox.recv().await.map(|b| b.len()), Some(20));
        for _ in 0..3 {
            outbox.push(bytes(3), grace).await.expect("room");
        }
        assert_eq!(outbox.queued(), (3, 9), "at most 3 events");
        let started = tokio::time::Instant::now();
        assert_eq!(outbox.push(bytes(3), grace).await, Err(PushError::TooSlow));
        assert_eq!(started.elapsed(), grace, "after the grace, not before");
        assert_eq!(outbox.queued(), (0, 0), "the queue is freed at once");
        assert_eq!(inbox.recv().await, None, "and the response ends");
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_are_bounded_as_well_as_events() {
        let (outbox, _inbox) = outbox(CAPACITY);
        let grace = Duration::from_secs(1);
        outbox.push(bytes(6), grace).await.expect("room");
        assert_eq!(outbox.push(bytes(6), grace).await, Err(PushError::TooSlow));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_goes_away_is_noticed() {
        let (outbox, inbox) = outbox(CAPACITY);
        for _ in 0..3 {
            outbox.push(bytes(1), Duration::ZERO).await.expect("room");
        }
        let waiting = tokio::spawn(async move {
            let pushed = outbox.push(bytes(1), Duration::from_secs(3600)).await;
            outbox.closed().await;
            (pushed, outbox.queued())
        });
        tokio::task::yield_now().await;
        drop(inbox);
        let (pushed, queued) = waiting.await.expect("the writer ends");
        assert_eq!(pushed, Err(PushError::Gone));
        assert_eq!(queued, (0, 0));
    }
}
