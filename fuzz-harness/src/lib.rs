//! Helpers shared by the fuzz targets in `fuzz_targets/`, and the seed
//! corpus generator ([`seeds`]). See docs/testing.md, "Fuzzing".

use relaymesh_protocol::codec;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub mod seeds;

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

/// The variable that makes a target binary write the seed corpus instead of
/// fuzzing: `scripts/fuzz --seeds` sets it to `fuzz/corpus`.
pub const WRITE_SEEDS_VARIABLE: &str = "RELAYMESH_FUZZ_WRITE_SEEDS";

/// When [`WRITE_SEEDS_VARIABLE`] names a directory, writes every seed to
/// `<directory>/<target>/` (replacing seeds of the same name, leaving the
/// fuzzer's finds alone) and exits. Called from a target's `init`, so the
/// generator needs no build of its own beside the instrumented one.
pub fn write_seeds_if_asked() {
    let Some(root) = std::env::var_os(WRITE_SEEDS_VARIABLE) else {
        return;
    };
    let root = std::path::PathBuf::from(root);
    let seeds = seeds::all();
    for seed in &seeds {
        let directory = root.join(seed.target);
        std::fs::create_dir_all(&directory).expect("the corpus directory can be created");
        std::fs::write(directory.join(&seed.name), &seed.bytes).expect("a seed can be written");
    }
    println!("wrote {} seeds under {}", seeds.len(), root.display());
    std::process::exit(0);
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
