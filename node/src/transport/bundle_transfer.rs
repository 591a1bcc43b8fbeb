//! Moving a bundle's bytes over a stream of its own, so a large bundle never
//! holds up the control stream, and checking its hash before anyone keeps it.
//!
//! Neither side holds a whole bundle: the parent sends it chunk by chunk from
//! a [`BundleSource`] (its store), and the child hashes each piece as it
//! arrives and hands it to a [`BundleSink`] (its store), keeping it only
//! once the whole hash matches.

use std::time::Duration;

use relaymesh_protocol::limits::MAX_BUNDLE_LEN;
use relaymesh_protocol::message::{BundleReply, BundleRequest, Open};
use relaymesh_protocol::{BundleId, ErrorCode, Refusal};

use super::{expect_frame, write_frame, LinkError};

/// How long one bundle fetch may take before it is retried.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// How many bytes a fetch asks QUIC for at a time.
const READ_LEN: usize = 64 * 1024;

/// How many received bytes are hashed and handed to the sink at once.
const HASH_BATCH: usize = 16 * 1024;

/// Where a fetched bundle's bytes go as they arrive (the child's store).
pub trait BundleSink {
    /// Takes the next bytes of the bundle. An error stops the transfer.
    fn write(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// Where a served bundle's bytes come from (the parent's store).
pub trait BundleSource {
    /// One chunk of the bundle.
    type Chunk: AsRef<[u8]>;

    /// The bundle's length in bytes.
    fn size(&self) -> u64;

    /// The next chunk, or `None` after the last; their lengths add up to
    /// [`BundleSource::size`].
    fn next_chunk(&mut self) -> Result<Option<Self::Chunk>, String>;
}

/// Fetches bundle `id` from the parent at the other end of `connection`,
/// handing its bytes to `sink` as they arrive, and checks its hash. Returns
/// the bundle's length once every byte arrived and the hash matched; on an
/// error, what `sink` took must be thrown away.
pub async fn fetch(
    connection: &quinn::Connection,
    id: BundleId,
    sink: &mut impl BundleSink,
) -> Result<u64, LinkError> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_inner(connection, id, sink))
        .await
        .map_err(|_| LinkError::Timeout(FETCH_TIMEOUT))?
}

async fn fetch_inner(
    connection: &quinn::Connection,
    id: BundleId,
    sink: &mut impl BundleSink,
) -> Result<u64, LinkError> {
    let (mut send, mut recv) = connection.open_bi().await?;
    write_frame(&mut send, &Open::Bundle(BundleRequest { id })).await?;
    let _ = send.finish();
    let len = match expect_frame::<BundleReply>(&mut recv).await? {
        BundleReply::Found { id: found, len } if found == id => len,
        BundleReply::Found { id: found, .. } => {
            return Err(LinkError::Protocol(format!(
                "asked for bundle {id}, parent sent {found}"
            )))
        }
        BundleReply::Missing { .. } => {
            return Err(LinkError::Refused(Refusal::new(
                ErrorCode::NotFound,
                format!("parent does not hold bundle {id}"),
            )))
        }
        BundleReply::Refused(refusal) => return Err(LinkError::Refused(refusal)),
    };
    if len > MAX_BUNDLE_LEN {
        return Err(LinkError::Protocol(format!(
            "bundle {id} is {len} bytes, more than the limit of {MAX_BUNDLE_LEN}"
        )));
    }
    // Nothing is allocated for the whole length: the pieces are hashed and
    // handed on a batch at a time as they arrive. QUIC hands over a packet's
    // worth (about 1.2 KB) at a time, and BLAKE3 hashes many of its 1 KiB
    // chunks at once only when given them at once: piece by piece, the hash
    // was 4 % of the hollow agents' CPU in the fanout (docs/performance.md).
    let mut received: u64 = 0;
    let mut hasher = BundleId::hasher();
    let mut batch = Vec::with_capacity(HASH_BATCH.min(usize::try_from(len).unwrap_or(HASH_BATCH)));
    while received < len {
        let want = usize::try_from(len - received).map_or(READ_LEN, |left| left.min(READ_LEN));
        let Some(chunk) = recv.read_chunk(want, true).await? else {
            return Err(LinkError::Truncated);
        };
        received += chunk.bytes.len() as u64;
        batch.extend_from_slice(&chunk.bytes);
        if batch.len() >= HASH_BATCH || received >= len {
            hasher.update(&batch);
            sink.write(&batch).map_err(LinkError::Local)?;
            batch.clear();
        }
    }
    // Read to the end, so the parent sees the whole stream acknowledged and
    // counts the transfer as complete (dropping it unread would stop it).
    if recv.read_chunk(1, true).await?.is_some() {
        return Err(LinkError::Protocol(format!(
            "parent sent more than the {len} bytes of bundle {id}"
        )));
    }
    if hasher.finish() != id {
        return Err(LinkError::Protocol(format!(
            "bundle {id} failed its hash check; discarded"
        )));
    }
    Ok(len)
}

/// Answers a bundle request with the bundle `source` reads (or "missing")
/// and ends the stream. Returns the payload bytes the child acknowledged,
/// once it acknowledged every one of them: `Some(len)` for a completed
/// transfer, `None` for a "missing" answer. A child that stops reading
/// early is an error, and so is a source that ends early (the stream is
/// reset, so the child never takes the bundle for whole).
pub async fn serve(
    send: &mut quinn::SendStream,
    id: BundleId,
    source: Option<impl BundleSource>,
) -> Result<Option<u64>, LinkError> {
    let served = match source {
        Some(mut source) => {
            let len = source.size();
            write_frame(send, &BundleReply::Found { id, len }).await?;
            let mut sent: u64 = 0;
            loop {
                let chunk = match source.next_chunk() {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    Err(error) => {
                        let _ = send.reset(0u32.into());
                        return Err(LinkError::Local(error));
                    }
                };
                send.write_all(chunk.as_ref()).await?;
                sent += chunk.as_ref().len() as u64;
            }
            if sent != len {
                let _ = send.reset(0u32.into());
                return Err(LinkError::Local(format!(
                    "bundle {id} has {sent} bytes here, not the {len} announced"
                )));
            }
            Some(len)
        }
        None => {
            write_frame(send, &BundleReply::Missing { id }).await?;
            None
        }
    };
    let _ = send.finish();
    // Finished and acknowledged (`None`), or stopped by the child first.
    match send.stopped().await {
        Ok(None) => Ok(served),
        Ok(Some(code)) => Err(LinkError::Protocol(format!(
            "the child stopped the transfer of bundle {id} (code {code})"
        ))),
        Err(error) => Err(LinkError::Unacknowledged(error)),
    }
}

/// Refuses a bundle request and ends the stream.
pub async fn refuse(send: &mut quinn::SendStream, refusal: Refusal) -> Result<(), LinkError> {
    write_frame(send, &BundleReply::Refused(refusal)).await?;
    let _ = send.finish();
    Ok(())
}
