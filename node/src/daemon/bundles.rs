//! Bundle transfers to and from the store, chunk by chunk: the parent
//! serves a bundle straight from its stored chunks, and a child writes the
//! chunks of a bundle it fetches as they arrive, keeping it only once its
//! hash matched (see `store::bundles` and `transport::bundle_transfer`).

use relaymesh_protocol::BundleId;

use crate::store::{BundleChunks, BundleWriter, Store, StoreError};
use crate::transport::bundle_transfer::{self, BundleSink, BundleSource};
use crate::transport::LinkError;

/// Why a fetch did not end with the bundle stored.
#[derive(Debug)]
pub(crate) enum FetchFailure {
    /// The transfer failed: retried later.
    Link(LinkError),
    /// The store failed: the daemon stops, as for any store failure.
    Store(StoreError),
}

impl BundleSource for BundleChunks {
    type Chunk = sled::IVec;

    fn size(&self) -> u64 {
        self.len()
    }

    fn next_chunk(&mut self) -> Result<Option<sled::IVec>, String> {
        BundleChunks::next_chunk(self).map_err(|error| error.to_string())
    }
}

/// A bundle writer that keeps the store's error for the daemon.
struct StoreSink {
    writer: BundleWriter,
    failure: Option<StoreError>,
}

impl BundleSink for StoreSink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer.write(bytes).map_err(|error| {
            let message = error.to_string();
            self.failure = Some(error);
            message
        })
    }
}

/// Fetches bundle `id` over `connection` into `store`. On success the
/// bundle is held, whole and verified; on failure nothing of it is.
pub(crate) async fn fetch_into_store(
    connection: &quinn::Connection,
    store: &Store,
    id: BundleId,
) -> Result<(), FetchFailure> {
    let mut sink = StoreSink {
        writer: store.bundle_writer(&id),
        failure: None,
    };
    let fetched = bundle_transfer::fetch(connection, id, &mut sink).await;
    if let Some(error) = sink.failure.take() {
        let _ = sink.writer.abort();
        return Err(FetchFailure::Store(error));
    }
    match fetched {
        Ok(_) => sink.writer.commit().map_err(FetchFailure::Store),
        Err(error) => {
            sink.writer.abort().map_err(FetchFailure::Store)?;
            Err(FetchFailure::Link(error))
        }
    }
}
