//! A bundle's bytes: its objects' JSON array, as it was, or compressed with
//! zstd (read since protocol version 13).
//!
//! The encoding is the bundle's own: a bundle is content-addressed
//! (`BundleId` hashes the bytes as stored and sent), so relays forward and
//! serve the compressed bytes as they are and only the agent that applies
//! them decompresses. A zstd frame starts with its magic number, which no
//! JSON text starts with, so both encodings are told apart by their first
//! bytes.

use std::borrow::Cow;
use std::io::Read;

use crate::limits::MAX_BUNDLE_LEN;

/// The first four bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// zstd's own default level: about as fast as the canonical JSON it
/// compresses is built, and a bundle is compressed once per change at the
/// root for every delivery below it.
const LEVEL: i32 = 3;

/// At most this many times the compressed bytes are reserved before
/// decompressing; a bundle that grows more than that grows its buffer as
/// it reads.
const MAX_RESERVED_RATIO: u64 = 64;

/// Why a bundle's bytes are not its objects' JSON.
#[derive(Debug, thiserror::Error)]
pub enum BundleEncodingError {
    /// The bytes start as a zstd frame but do not decompress.
    #[error("the bundle's zstd frame is corrupt: {0}")]
    Corrupt(String),
    /// Decompressed, the bundle would be larger than any bundle may be.
    #[error("the bundle decompresses to more than {limit} bytes")]
    TooLarge {
        /// [`MAX_BUNDLE_LEN`].
        limit: u64,
    },
}

/// `json` compressed as one zstd frame that records its length; the same
/// input always gives the same bytes (one thread, a fixed level), so the
/// same objects keep one `BundleId`.
pub fn compress(json: &[u8]) -> Vec<u8> {
    // Compressing from memory into memory fails only for a bad level.
    zstd::bulk::compress(json, LEVEL).unwrap_or_else(|_| json.to_vec())
}

/// Whether `bytes` are a compressed bundle.
pub fn is_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(&ZSTD_MAGIC)
}

/// The objects' JSON of a bundle in either encoding: borrowed if it was not
/// compressed. Refuses a frame that would decompress to more than
/// [`MAX_BUNDLE_LEN`], whatever length it claims, before holding more.
pub fn objects_json(bytes: &[u8]) -> Result<Cow<'_, [u8]>, BundleEncodingError> {
    if !is_compressed(bytes) {
        return Ok(Cow::Borrowed(bytes));
    }
    let decoder = zstd::stream::read::Decoder::with_buffer(bytes)
        .map_err(|error| BundleEncodingError::Corrupt(error.to_string()))?;
    // The frame's own length is a hint only (a frame may lie about it):
    // what is reserved up front is bounded by the bytes at hand too, and
    // the read below stops one byte past the limit whatever it says.
    let hint = zstd::zstd_safe::get_frame_content_size(bytes)
        .ok()
        .flatten()
        .map_or(0, |len| len.min(MAX_RESERVED_RATIO * bytes.len() as u64));
    let mut json = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    decoder
        .take(MAX_BUNDLE_LEN + 1)
        .read_to_end(&mut json)
        .map_err(|error| BundleEncodingError::Corrupt(error.to_string()))?;
    if json.len() as u64 > MAX_BUNDLE_LEN {
        return Err(BundleEncodingError::TooLarge {
            limit: MAX_BUNDLE_LEN,
        });
    }
    Ok(Cow::Owned(json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn compressed_bytes_give_back_the_json(json in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let packed = compress(&json);
            prop_assert!(is_compressed(&packed));
            let read = objects_json(&packed).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(read.as_ref(), &json[..]);
            prop_assert_eq!(compress(&json), packed, "the same input, the same bytes");
        }

        #[test]
        fn any_bytes_are_refused_or_read_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut framed = ZSTD_MAGIC.to_vec();
            framed.extend_from_slice(&bytes);
            let _ = objects_json(&framed);
        }
    }

    #[test]
    fn json_passes_through_unchanged() {
        let json = br#"[{"kind":"ConfigMap"}]"#;
        assert!(!is_compressed(json));
        assert!(matches!(objects_json(json), Ok(Cow::Borrowed(read)) if read == json));
    }

    #[test]
    fn lowercase_text_shrinks() {
        // What the fanout benchmark's payload looks like: letters, no repeats.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let text: Vec<u8> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                b'a' + (state % 26) as u8
            })
            .collect();
        assert!(compress(&text).len() < text.len() * 3 / 4);
    }

    #[test]
    fn a_truncated_frame_is_corrupt() {
        let packed = compress(&[b'x'; 10_000]);
        let cut = &packed[..packed.len() - 3];
        assert!(matches!(
            objects_json(cut),
            Err(BundleEncodingError::Corrupt(_))
        ));
    }

    #[test]
    fn a_bomb_is_refused_at_the_limit() {
        // A frame of zeros that decompresses past MAX_BUNDLE_LEN, written
        // without a length so nothing tells in advance.
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("encoder");
        encoder.include_contentsize(false).expect("option");
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..=(MAX_BUNDLE_LEN >> 20) {
            std::io::Write::write_all(&mut encoder, &zeros).expect("compress");
        }
        let bomb = encoder.finish().expect("finish");
        assert!(bomb.len() < 64 * 1024, "a bomb is small: {}", bomb.len());
        assert!(matches!(
            objects_json(&bomb),
            Err(BundleEncodingError::TooLarge {
                limit: MAX_BUNDLE_LEN
            })
        ));
    }
}
