//! The fuzz targets, as plain functions: each module's `run(data)` is one
//! target's body (what it feeds and which properties it checks), with the
//! helpers they share and the seed corpus generator ([`seeds`]).
//!
//! Two callers run the same functions: the libFuzzer binaries in `fuzz/`
//! (`scripts/fuzz`, nightly, a workspace of its own) and this crate's
//! `tests/corpus.rs`, which replays every committed input of
//! `fuzz/corpus/<target>/` with the other tests, so CI needs no libFuzzer
//! build to catch a fixed crash coming back. See docs/testing.md, "Fuzzing".
//! It holds no fuzzing engine and generates no inputs of its own.
#![forbid(unsafe_code)]

use relaymesh_protocol::codec;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub mod api_body;
pub mod api_patch;
pub mod api_selector;
pub mod bundle;
pub mod frame_decoder;
pub mod join_token;
pub mod messages;
pub mod seeds;
pub mod slice_entry;

/// A target's body: runs it on one input, panicking if a property fails.
pub type Body = fn(&[u8]);

/// Every target, by the name of its module, its binary in `fuzz/` and its
/// corpus directory, with its body.
pub const TARGETS: [(&str, Body); 8] = [
    ("frame_decoder", frame_decoder::run),
    ("messages", messages::run),
    ("join_token", join_token::run),
    ("bundle", bundle::run),
    ("api_body", api_body::run),
    ("api_patch", api_patch::run),
    ("api_selector", api_selector::run),
    ("slice_entry", slice_entry::run),
];

/// An Ed25519 key pair for a whole fuzzing run, (PKCS#8, public key): one
/// the fuzzer cannot know, so nothing it writes may verify under it.
pub fn run_key() -> &'static (Vec<u8>, Vec<u8>) {
    use ring::signature::KeyPair as _;
    static KEY: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let pkcs8 =
            ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
                .expect("a key");
        let pair =
            ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("its own key");
        (pkcs8.as_ref().to_vec(), pair.public_key().as_ref().to_vec())
    })
}

/// The variable that makes the seed test (`tests/corpus.rs`,
/// `every_seed_passes_its_target`) also write the seed corpus:
/// `scripts/fuzz --seeds` sets it to `fuzz/corpus`.
pub const WRITE_SEEDS_VARIABLE: &str = "RELAYMESH_FUZZ_WRITE_SEEDS";

/// Writes every seed to `<root>/<target>/<name>`, replacing seeds of the same
/// name and leaving the fuzzer's finds alone; returns how many it wrote.
pub fn write_seeds(root: &std::path::Path) -> std::io::Result<usize> {
    let seeds = seeds::all();
    for seed in &seeds {
        let directory = root.join(seed.target);
        std::fs::create_dir_all(&directory)?;
        std::fs::write(directory.join(&seed.name), &seed.bytes)?;
    }
    Ok(seeds.len())
}

/// Decodes `payload` as a `T`; if that works, checks the wire contract's
/// round trip: the message encodes again, no larger than it arrived (a relay
/// that forwards what it decoded never exceeds the limit it was held to),
/// decodes to an equal message, and encodes to the same bytes the second
/// time (the encoding is a function of the message). Returns the message.
pub fn check_round_trip<T>(payload: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let message: T = codec::decode(payload).ok()?;
    let encoded = codec::encode(&message).expect("a decoded message encodes");
    assert!(
        encoded.len() <= payload.len(),
        "{message:?} encodes to {} bytes but arrived in {}",
        encoded.len(),
        payload.len()
    );
    let again: T = codec::decode(&encoded).expect("an encoded message decodes");
    assert_eq!(again, message, "the round trip changed the message");
    let encoded_again = codec::encode(&again).expect("a decoded message encodes");
    assert_eq!(encoded_again, encoded, "the encoding is not stable");
    let frame = codec::encode_frame(&message).expect("a decoded message frames");
    assert_eq!(frame[codec_header_len()..], encoded[..]);
    Some(message)
}

/// The frame header's length, re-exported for the targets.
pub const fn codec_header_len() -> usize {
    relaymesh_protocol::limits::FRAME_HEADER_LEN
}

/// Splits fuzzer input into `n` parts at the byte 0xff, which never occurs in
/// UTF-8 text, so JSON and YAML parts can be seeded by hand. Missing parts
/// are empty.
pub fn split_parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(n, |byte| *byte == 0xff).collect();
    parts.resize(n, &[]);
    parts
}
