//! The `frame_decoder` target: libFuzzer's entry to
//! `relaymesh_fuzz_harness::frame_decoder` (what it feeds and checks is documented
//! there; `cargo test -p relaymesh-fuzz-harness` replays the corpus through
//! the same function).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| { relaymesh_fuzz_harness::frame_decoder::run(data) });
