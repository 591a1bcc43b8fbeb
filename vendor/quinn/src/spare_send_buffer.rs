//! relaymesh: one spare transmit buffer per thread, shared by the connections
//! driven on it.
//!
//! Upstream keeps a buffer of up to a GSO batch (`MAX_TRANSMIT_SEGMENTS`
//! datagrams, about 12 KB) in every connection for its whole life. A relay
//! with thousands of idle children held that much per child. A connection now
//! holds the buffer only while it has something to send (or a transmit the
//! socket refused for now); between bursts it parks it here, and the next
//! connection to send on this thread takes it back at its grown size.

use std::cell::Cell;

thread_local! {
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The spare buffer, or an empty one if another connection holds it (or
/// the thread is exiting).
pub(crate) fn take() -> Vec<u8> {
    SPARE.try_with(Cell::take).unwrap_or_default()
}

/// Leaves `buffer` empty; keeps the larger of it and the spare.
pub(crate) fn park(buffer: &mut Vec<u8>) {
    if buffer.capacity() == 0 {
        return;
    }
    let buffer = std::mem::take(buffer);
    // On an exiting thread the buffer is simply dropped.
    let _ = SPARE.try_with(|spare| {
        let held = spare.take();
        spare.set(if held.capacity() >= buffer.capacity() {
            held
        } else {
            buffer
        });
    });
}
