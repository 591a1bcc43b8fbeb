//! Bundles being served to children: one copy in memory per bundle, shared
//! by every serve of it running at once, and a bound on how many serves run
//! at once on this relay.
//!
//! When a bundle appears in a slice, every child that needs it asks at
//! about the same moment. Read from the store once per request, a bundle
//! served to 500 children is read 500 times; here the first serve reads it
//! whole into a [`Bytes`], the others wait for that read and share it, and
//! the copy is dropped with the last serve that holds it. The copies held
//! at once are bounded by a byte budget: a bundle that does not fit what is
//! left of it is served from the store chunk by chunk, as before, so memory
//! stays bounded whatever children ask for.
//!
//! The serves themselves are bounded relay-wide by a semaphore
//! (`--max-concurrent-bundle-serves`): a request over the bound waits for a
//! permit rather than being refused, so a child never fails a fetch because
//! its siblings asked first; its fetch timeout bounds the wait.
//!
//! No sled here: the first serve hands in how to read the bundle, so the
//! cache is tested without a store.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use relaymesh_protocol::BundleId;
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};

use crate::transport::bundle_transfer::BundleSource;

/// How many bytes of bundles a relay holds in memory for serving, at most.
pub const BUNDLE_CACHE_BUDGET: u64 = 256 * 1024 * 1024;

/// How many bytes a shared bundle is handed to the stream at a time.
const CHUNK_LEN: usize = 64 * 1024;

/// The bundles being served and the permits to serve.
#[derive(Debug)]
pub(crate) struct Serving {
    budget: u64,
    permits: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    bundles: HashMap<BundleId, Shared>,
    /// The lengths of `bundles`, summed: what the budget counts.
    bytes: u64,
}

#[derive(Debug)]
struct Shared {
    len: u64,
    /// Filled by whichever serve gets there first; the others wait on it.
    bytes: Arc<OnceCell<Bytes>>,
    /// Serves holding it now.
    holders: usize,
}

impl Serving {
    /// At most `max_serves` serves at once, and `budget` bytes of bundles
    /// in memory.
    pub fn new(max_serves: usize, budget: u64) -> Arc<Self> {
        Arc::new(Self {
            budget,
            permits: Arc::new(Semaphore::new(max_serves.max(1))),
            state: Mutex::default(),
        })
    }

    /// Waits for a permit to serve; the serve runs while it is held.
    pub async fn permit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().acquire_owned().await.ok()
    }

    /// The bytes of bundle `id` (`len` bytes long), shared with every other
    /// serve of it running now. `load` reads them; it runs only if no serve
    /// holds them already. `Ok(None)` if they do not fit what is left of the
    /// budget: the caller serves from the store.
    pub async fn share<E>(
        self: &Arc<Self>,
        id: BundleId,
        len: u64,
        load: impl Future<Output = Result<Bytes, E>>,
    ) -> Result<Option<SharedBundle>, E> {
        let cell = {
            let mut state = self.state();
            let fits = state.bytes.saturating_add(len) <= self.budget;
            match state.bundles.get_mut(&id) {
                Some(shared) => {
                    shared.holders += 1;
                    shared.bytes.clone()
                }
                None if fits => {
                    state.bytes += len;
                    let bytes = Arc::new(OnceCell::new());
                    let shared = Shared {
                        len,
                        bytes: bytes.clone(),
                        holders: 1,
                    };
                    state.bundles.insert(id, shared);
                    bytes
                }
                None => return Ok(None),
            }
        };
        // Released on every way out, the failed load and a dropped future
        // included.
        let hold = Hold {
            serving: self.clone(),
            id,
        };
        let bytes = cell.get_or_try_init(|| load).await?.clone();
        Ok(Some(SharedBundle {
            bytes,
            offset: 0,
            _hold: hold,
        }))
    }

    /// Bytes of bundles held in memory now.
    #[cfg(test)]
    fn held_bytes(&self) -> u64 {
        self.state().bytes
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a map and a sum kept together under the lock; a
        // panic elsewhere cannot leave them apart.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn release(&self, id: &BundleId) {
        let mut state = self.state();
        let Some(shared) = state.bundles.get_mut(id) else {
            return;
        };
        shared.holders -= 1;
        if shared.holders == 0 {
            let len = shared.len;
            state.bundles.remove(id);
            state.bytes -= len;
        }
    }
}

/// One serve's hold on a shared bundle.
#[derive(Debug)]
struct Hold {
    serving: Arc<Serving>,
    id: BundleId,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.serving.release(&self.id);
    }
}

/// A bundle in memory, shared with the other serves of it; read as a
/// [`BundleSource`] in chunks that are slices of the one copy.
#[derive(Debug)]
pub(crate) struct SharedBundle {
    bytes: Bytes,
    offset: usize,
    _hold: Hold,
}

impl BundleSource for SharedBundle {
    type Chunk = Bytes;

    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn next_chunk(&mut self) -> Result<Option<Bytes>, String> {
        if self.offset >= self.bytes.len() {
            return Ok(None);
        }
        let end = self.bytes.len().min(self.offset + CHUNK_LEN);
        let chunk = self.bytes.slice(self.offset..end);
        self.offset = end;
        Ok(Some(chunk))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn read_all(mut source: impl BundleSource) -> Vec<u8> {
        let mut bytes = Vec::new();
        while let Some(chunk) = source.next_chunk().expect("a chunk") {
            bytes.extend_from_slice(chunk.as_ref());
        }
        bytes
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_serves_read_the_store_once() {
        let serving = Serving::new(64, 1024 * 1024);
        let bundle = Bytes::from(vec![7u8; 200 * 1024]);
        let id = BundleId::of(&bundle);
        let reads = Arc::new(AtomicUsize::new(0));
        let mut serves = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let (serving, reads, bundle) = (serving.clone(), reads.clone(), bundle.clone());
            serves.spawn(async move {
                let load = async {
                    reads.fetch_add(1, Ordering::SeqCst);
                    // A slow read, so every serve arrives while it runs.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, String>(bundle.clone())
                };
                let shared = serving.share(id, bundle.len() as u64, load).await;
                let shared = shared.expect("loaded").expect("fits the budget");
                // Every serve holds it while it streams.
                tokio::time::sleep(Duration::from_millis(10)).await;
                read_all(shared)
            });
        }
        while let Some(served) = serves.join_next().await {
            assert_eq!(served.expect("served"), bundle);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1, "one read for 50 serves");
        assert_eq!(serving.held_bytes(), 0, "dropped with the last serve");

        // Nothing serves it any more: the next serve reads it again.
        let load = async {
            reads.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(bundle.clone())
        };
        let again = serving.share(id, bundle.len() as u64, load).await;
        assert!(again.expect("loaded").is_some());
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn what_does_not_fit_the_budget_is_not_held() {
        let serving = Serving::new(4, 100);
        let small = BundleId::of(b"small");
        let held = serving
            .share(small, 60, async {
                Ok::<_, String>(Bytes::from(vec![1; 60]))
            })
            .await
            .expect("loaded")
            .expect("fits");
        assert_eq!(serving.held_bytes(), 60);
        let large = BundleId::of(b"large");
        let over = serving
            .share(large, 50, async {
                Ok::<_, String>(Bytes::from(vec![2; 50]))
            })
            .await
            .expect("no error");
        assert!(over.is_none(), "60 + 50 bytes are over a budget of 100");
        // Sharing what is held costs nothing more.
        let also = serving
            .share(small, 60, async { Err("not read again".to_string()) })
            .await
            .expect("shared, not read")
            .expect("held");
        assert_eq!(serving.held_bytes(), 60);
        drop((held, also));
        assert_eq!(serving.held_bytes(), 0);
    }

    #[tokio::test]
    async fn a_failed_read_holds_nothing_and_the_next_serve_reads_again() {
        let serving = Serving::new(4, 100);
        let id = BundleId::of(b"flaky");
        let failed = serving
            .share(id, 5, async { Err::<Bytes, _>("store error") })
            .await;
        assert!(failed.is_err());
        assert_eq!(serving.held_bytes(), 0);
        let shared = serving
            .share(id, 5, async { Ok::<_, &str>(Bytes::from_static(b"flaky")) })
            .await
            .expect("read")
            .expect("fits");
        assert_eq!(read_all(shared), b"flaky");
    }

    #[tokio::test(start_paused = true)]
    async fn serves_over_the_bound_wait_their_turn() {
        let serving = Serving::new(2, 0);
        let first = serving.permit().await.expect("a permit");
        let _second = serving.permit().await.expect("a permit");
        let waiting = tokio::spawn({
            let serving = serving.clone();
            async move { serving.permit().await.is_some() }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "a third serve waits");
        drop(first);
        assert!(waiting.await.expect("joined"), "and runs once one ended");
    }
}
