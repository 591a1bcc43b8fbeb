//! Replays every committed input of `fuzz/corpus/<target>/` through the
//! target's body, as `scripts/fuzz --replay` does with the libFuzzer build:
//! a crash once fixed (its input is in the corpus) fails here if it comes
//! back. Every input runs even when one fails; the failure names them all.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use relaymesh_fuzz_harness::{seeds, write_seeds, TARGETS, WRITE_SEEDS_VARIABLE};

fn body(target: &str) -> fn(&[u8]) {
    TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, run)| *run)
        .unwrap_or_else(|| panic!("no target {target}"))
}

fn replay(target: &str) {
    let run = body(target);
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", directory.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no input", directory.display());
    let mut failed = Vec::new();
    for input in &inputs {
        let data = std::fs::read(input).expect("a corpus file reads");
        if panic::catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failed.push(input.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} inputs of {target} failed: {failed:#?}",
        failed.len(),
        inputs.len()
    );
}

#[test]
fn frame_decoder_corpus() {
    replay("frame_decoder");
}

#[test]
fn messages_corpus() {
    replay("messages");
}

#[test]
fn join_token_corpus() {
    replay("join_token");
}

#[test]
fn bundle_corpus() {
    replay("bundle");
}

#[test]
fn api_body_corpus() {
    replay("api_body");
}

#[test]
fn api_patch_corpus() {
    replay("api_patch");
}

#[test]
fn api_selector_corpus() {
    replay("api_selector");
}

#[test]
fn slice_entry_corpus() {
    replay("slice_entry");
}

/// Every seed of `seeds::all()` passes its target, committed or not (some
/// seeds are signed with a key made on the spot, so the corpus holds one
/// draw of them); with `RELAYMESH_FUZZ_WRITE_SEEDS=DIR` the seeds are also
/// written under DIR (`scripts/fuzz --seeds`).
#[test]
fn every_seed_passes_its_target() {
    let seeds = seeds::all();
    assert!(
        seeds.len() > TARGETS.len(),
        "too few seeds: {}",
        seeds.len()
    );
    for seed in &seeds {
        let run = body(seed.target);
        if panic::catch_unwind(AssertUnwindSafe(|| run(&seed.bytes))).is_err() {
            panic!("seed {}/{} fails its target", seed.target, seed.name);
        }
    }
    if let Some(root) = std::env::var_os(WRITE_SEEDS_VARIABLE) {
        let root = PathBuf::from(root);
        let written = write_seeds(&root).expect("the seeds can be written");
        println!("wrote {written} seeds under {}", root.display());
    }
}

#[test]
fn every_target_has_a_test_here_and_a_binary_in_the_fuzz_crate() {
    let manifest = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"),
    )
    .expect("fuzz/Cargo.toml reads");
    let this = include_str!("corpus.rs");
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no binary {name}"
        );
        assert!(
            this.contains(&format!("fn {name}_corpus()")),
            "no replay test for {name}"
        );
    }
}
