//! The one place that turns messages into bytes and back.
//!
//! A frame is a 4-byte big-endian payload length followed by the payload, a
//! bincode 2 encoding of one message. Decoding checks the announced length
//! against [`MAX_FRAME_LEN`] before allocating, and bincode's own limit bounds
//! every collection inside the payload, so no input can make a decoder
//! allocate more than one frame's worth. Swapping the encoding means changing
//! this module only.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::limits::{FRAME_HEADER_LEN, MAX_FRAME_LEN};

/// Why bytes could not become a message, or a message bytes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A frame announced, or a message needed, more than [`MAX_FRAME_LEN`].
    #[error("frame of {len} bytes is larger than the limit of {MAX_FRAME_LEN} bytes")]
    TooLarge {
        /// The announced or needed length.
        len: usize,
    },
    /// The payload was not a valid encoding of the expected message.
    #[error("malformed frame: {0}")]
    Malformed(#[source] bincode::error::DecodeError),
    /// The payload decoded, but bytes were left over.
    #[error("malformed frame: {extra} bytes after the message")]
    TrailingBytes {
        /// How many bytes were left.
        extra: usize,
    },
    /// The message could not be encoded.
    #[error("cannot encode message: {0}")]
    Encode(#[source] bincode::error::EncodeError),
    /// A frame announced more than the stricter limit of where it was read
    /// (an opening frame, before the peer is authenticated).
    #[error("frame of {len} bytes is larger than the limit of {limit} bytes here")]
    TooLargeHere {
        /// The announced length.
        len: usize,
        /// The limit that applies.
        limit: usize,
    },
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME_LEN>()
}

/// Encodes `message` as a frame payload (no header).
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, CodecError> {
    let payload = bincode::serde::encode_to_vec(message, config()).map_err(CodecError::Encode)?;
    if payload.len() > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge { len: payload.len() });
    }
    Ok(payload)
}

/// Decodes a whole frame payload (no header) as one `T`.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, CodecError> {
    if payload.len() > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge { len: payload.len() });
    }
    let (message, used) =
        bincode::serde::decode_from_slice(payload, config()).map_err(CodecError::Malformed)?;
    if used != payload.len() {
        return Err(CodecError::TrailingBytes {
            extra: payload.len() - used,
        });
    }
    Ok(message)
}

/// Encodes `message` as a complete frame: header and payload.
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, CodecError> {
    let payload = encode(message)?;
    let mut frame = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
    // encode() bounded the length by MAX_FRAME_LEN, which fits in a u32.
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// The payload length a frame header announces, checked against `limit` as
/// well as [`MAX_FRAME_LEN`]: for streams whose frames are small by nature.
pub fn payload_len_within(
    header: [u8; FRAME_HEADER_LEN],
    limit: usize,
) -> Result<usize, CodecError> {
    let len = payload_len(header)?;
    if len > limit {
        return Err(CodecError::TooLargeHere { len, limit });
    }
    Ok(len)
}

/// The payload length a frame header announces, checked against
/// [`MAX_FRAME_LEN`].
pub fn payload_len(header: [u8; FRAME_HEADER_LEN]) -> Result<usize, CodecError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge { len });
    }
    Ok(len)
}

/// Splits a byte stream into frame payloads, for transports that hand over
/// bytes in arbitrary pieces.
#[derive(Debug, Default)]
pub struct FrameBuffer {
    buffer: Vec<u8>,
}

impl FrameBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Takes the next complete payload, if one has arrived. An oversized
    /// header is an error as soon as the header is complete, before its
    /// payload is buffered.
    pub fn next_payload(&mut self) -> Result<Option<Vec<u8>>, CodecError> {
        let Some(header) = self.buffer.get(..FRAME_HEADER_LEN) else {
            return Ok(None);
        };
        let mut bytes = [0u8; FRAME_HEADER_LEN];
        bytes.copy_from_slice(header);
        let len = payload_len(bytes)?;
        if self.buffer.len() < FRAME_HEADER_LEN + len {
            return Ok(None);
        }
        let payload = self.buffer[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len].to_vec();
        self.buffer.drain(..FRAME_HEADER_LEN + len);
        Ok(Some(payload))
    }

    /// How many bytes are buffered and not yet taken.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests;
