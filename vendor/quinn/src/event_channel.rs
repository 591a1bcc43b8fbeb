//! relaymesh: the endpoint's channel of events to one connection.
//!
//! Upstream uses `tokio::sync::mpsc::unbounded_channel`, which allocates its
//! first block of 32 slots when the channel is made. With the size of a
//! `ConnectionEvent` (a received datagram's partial decode) that is about
//! 6.5 KB per connection for its whole life, most of what an idle connection
//! costs a relay beside its transmit buffer. This channel holds a queue that
//! grows with the events waiting and is given back once a burst is drained.
//!
//! One sender (the endpoint's `ConnectionSet`), one receiver (the connection's
//! driver); both only ever take the lock briefly.

use std::{
    collections::VecDeque,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
};

struct State<T> {
    queue: VecDeque<T>,
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Shared<T>(Mutex<State<T>>);

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding the lock leaves the queue whole: every
        // critical section below is a push, a pop or a flag.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared(Mutex::new(State {
        queue: VecDeque::new(),
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    })));
    (Sender(shared.clone()), Receiver(shared))
}

pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The receiver is gone; the event comes back.
pub(crate) struct SendError<T>(pub(crate) T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender(..)")
    }
}

impl<T> Sender<T> {
    pub(crate) fn send(&self, value: T) -> Result<(), SendError<T>> {
        let waker = {
            let mut state = self.0.lock();
            if state.receiver_gone {
                return Err(SendError(value));
            }
            state.queue.push_back(value);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.0.lock();
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

pub(crate) struct Receiver<T>(Arc<Shared<T>>);

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver(..)")
    }
}

impl<T> Receiver<T> {
    /// The next event; `None` once the queue is empty and the sender gone.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.0.lock();
        if let Some(value) = state.queue.pop_front() {
            // Drained, the queue is given back: an idle connection holds no
            // slots (a burst's first event allocates them again, once).
            if state.queue.is_empty() {
                state.queue = VecDeque::new();
            }
            return Poll::Ready(Some(value));
        }
        if state.sender_gone {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let queued = {
            let mut state = self.0.lock();
            state.receiver_gone = true;
            state.waker = None;
            std::mem::take(&mut state.queue)
        };
        // Events dropped outside the lock: an event may own a socket.
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn delivers_in_order_wakes_and_ends() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (tx, mut rx) = channel();
        assert!(rx.poll_recv(&mut cx).is_pending());
        for i in 0..10 {
            tx.send(i).unwrap();
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        for i in 0..10 {
            assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(i)));
        }
        assert_eq!(
            rx.0.lock().queue.capacity(),
            0,
            "a drained burst is given back"
        );
        assert!(rx.poll_recv(&mut cx).is_pending());
        tx.send(10).unwrap();
        drop(tx);
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(10)));
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn send_fails_once_the_receiver_is_gone() {
        let (tx, rx) = channel();
        drop(rx);
        assert_eq!(tx.send(1).map_err(|e| e.0), Err(1));
    }
}
