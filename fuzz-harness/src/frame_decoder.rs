//! The frame decoder (`relaymesh_protocol::codec`): arbitrary bytes as a
//! stream of frames, fed to `FrameBuffer` in arbitrary pieces, checked
//! against a plain reading of the framing; every header through
//! `payload_len` and `payload_len_within`; every payload decoded as each
//! message a stream can carry, with the transport's opening-frame limit.

use crate::check_round_trip;
use relaymesh_protocol::codec::{self, CodecError, FrameBuffer};
use relaymesh_protocol::limits::{FRAME_HEADER_LEN, MAX_FRAME_LEN, MAX_OPENING_FRAME_LEN};
use relaymesh_protocol::message::{BundleReply, DownMessage, JoinReply, Open, UpMessage};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&piece_seed, stream)) = data.split_first() else {
        return;
    };
    check_headers(stream, piece_seed);
    let (payloads, failed) = frame_buffer(stream, piece_seed);
    let (expected, expected_failure) = plain_framing(stream);
    assert_eq!(payloads, expected, "FrameBuffer disagrees with the framing");
    assert_eq!(failed, expected_failure, "FrameBuffer fails elsewhere");
    for (index, payload) in payloads.iter().enumerate() {
        if index == 0 && payload.len() <= MAX_OPENING_FRAME_LEN {
            check_round_trip::<Open>(payload);
        }
        check_round_trip::<UpMessage>(payload);
        check_round_trip::<DownMessage>(payload);
        check_round_trip::<BundleReply>(payload);
        check_round_trip::<JoinReply>(payload);
    }
}

/// Every 4-byte window of the input as a header, with a limit taken from the
/// seed byte.
fn check_headers(stream: &[u8], seed: u8) {
    let limit = (usize::from(seed) << 12) | usize::from(seed);
    for window in stream.windows(FRAME_HEADER_LEN).take(64) {
        let header: [u8; FRAME_HEADER_LEN] = window.try_into().expect("a window of four");
        let announced = u32::from_be_bytes(header) as usize;
        match codec::payload_len(header) {
            Ok(len) => assert!(len == announced && len <= MAX_FRAME_LEN),
            Err(CodecError::TooLarge { len }) => {
                assert!(len == announced && len > MAX_FRAME_LEN)
            }
            Err(other) => panic!("payload_len failed with {other:?}"),
        }
        match codec::payload_len_within(header, limit) {
            Ok(len) => assert!(len == announced && len <= limit && len <= MAX_FRAME_LEN),
            Err(CodecError::TooLarge { len }) => {
                assert!(len == announced && len > MAX_FRAME_LEN)
            }
            Err(CodecError::TooLargeHere { len, limit: said }) => {
                assert!(len == announced && said == limit && len > limit && len <= MAX_FRAME_LEN)
            }
            Err(other) => panic!("payload_len_within failed with {other:?}"),
        }
    }
}

/// The payloads `FrameBuffer` yields when fed `stream` in pieces whose sizes
/// follow from `seed`, and whether it failed.
fn frame_buffer(stream: &[u8], seed: u8) -> (Vec<Vec<u8>>, bool) {
    let mut buffer = FrameBuffer::new();
    let mut payloads = Vec::new();
    let mut rest = stream;
    let mut step = 0usize;
    loop {
        let size = 1 + (usize::from(seed).wrapping_mul(step + 7) % 97);
        step += 1;
        let (piece, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        buffer.extend(piece);
        loop {
            match buffer.next_payload() {
                Ok(Some(payload)) => payloads.push(payload),
                Ok(None) => break,
                Err(CodecError::TooLarge { .. }) => return (payloads, true),
                Err(other) => panic!("next_payload failed with {other:?}"),
            }
        }
        if rest.is_empty() {
            let consumed: usize = payloads.iter().map(|p| p.len() + FRAME_HEADER_LEN).sum();
            assert_eq!(buffer.buffered(), stream.len() - consumed);
            return (payloads, false);
        }
    }
}

/// The payloads of `stream` read directly: header, then that many bytes.
fn plain_framing(mut stream: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let mut payloads = Vec::new();
    while stream.len() >= FRAME_HEADER_LEN {
        let len = u32::from_be_bytes(stream[..4].try_into().expect("four bytes")) as usize;
        if len > MAX_FRAME_LEN {
            return (payloads, true);
        }
        let Some(payload) = stream.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
            break;
        };
        payloads.push(payload.to_vec());
        stream = &stream[FRAME_HEADER_LEN + len..];
    }
    (payloads, false)
}
