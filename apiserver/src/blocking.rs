//! Waiting from synchronous code that may run on a tokio worker: the object
//! store's API is synchronous, and on a replicated backend its calls wait
//! for the backend's answers and its feed.

/// Runs `wait` (which blocks), first telling tokio when the caller is a
/// worker of a multi-threaded runtime, so that the worker's other tasks move
/// on to another thread meanwhile. On a current-thread runtime, or off any
/// runtime, it just runs.
pub fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}
