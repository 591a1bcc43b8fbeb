//! Moving a bundle's bytes over a stream of its own, so a large bundle never
//! holds up the control stream, and checking its hash before anyone keeps it.

use std::time::Duration;

use relaymesh_protocol::limits::MAX_BUNDLE_LEN;
use relaymesh_protocol::message::{BundleReply, BundleRequest, Open};
use relaymesh_protocol::{BundleId, ErrorCode, Refusal};

use super::{expect_frame, write_frame, LinkError};

/// How long one bundle fetch may take before it is retried.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// Fetches bundle `id` from the parent at the other end of `connection` and
/// checks its hash. Returns the verified bytes.
pub async fn fetch(connection: &quinn::Connection, id: BundleId) -> Result<Vec<u8>, LinkError> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_inner(connection, id))
        .await
        .map_err(|_| LinkError::Timeout(FETCH_TIMEOUT))?
}

async fn fetch_inner(connection: &quinn::Connection, id: BundleId) -> Result<Vec<u8>, LinkError> {
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
    // The length is bounded above, but allocate as bytes arrive rather than
    // trusting it all at once.
    let mut bytes = Vec::with_capacity((len as usize).min(1 << 20));
    let mut hasher = BundleId::hasher();
    while (bytes.len() as u64) < len {
        let want = ((len - bytes.len() as u64) as usize).min(64 * 1024);
        let Some(chunk) = recv.read_chunk(want, true).await? else {
            return Err(LinkError::Truncated);
        };
        hasher.update(&chunk.bytes);
        bytes.extend_from_slice(&chunk.bytes);
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
    Ok(bytes)
}

/// Answers a bundle request with `bytes` (or "missing") and ends the stream.
/// Returns the payload bytes the child acknowledged, once it acknowledged
/// every one of them: `Some(len)` for a completed transfer, `None` for a
/// "missing" answer. A child that stops reading early is an error.
pub async fn serve(
    send: &mut quinn::SendStream,
    id: BundleId,
    bytes: Option<&[u8]>,
) -> Result<Option<u64>, LinkError> {
    let served = match bytes {
        Some(bytes) => {
            let len = bytes.len() as u64;
            write_frame(send, &BundleReply::Found { id, len }).await?;
            send.write_all(bytes).await?;
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
