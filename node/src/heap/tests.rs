use super::*;

const MIB: u64 = 1024 * 1024;

fn heap(in_use: u64, free: u64) -> HeapUse {
    HeapUse { in_use, free }
}

#[test]
fn trims_when_more_is_free_than_in_use() {
    let trimmer = Trimmer::default();
    assert!(trimmer.should_trim(heap(10 * MIB, 80 * MIB), 100 * MIB));
    // Little free, or less free than live: a trim would only cost faults.
    assert!(!trimmer.should_trim(heap(10 * MIB, 15 * MIB), 100 * MIB));
    assert!(!trimmer.should_trim(heap(90 * MIB, 80 * MIB), 200 * MIB));
}

#[test]
fn trims_again_only_after_the_process_grew() {
    let mut trimmer = Trimmer::default();
    trimmer.trimmed(50 * MIB);
    // Released pages stay on the free lists: the same free heap after a
    // trim is not a reason for another.
    assert!(!trimmer.should_trim(heap(10 * MIB, 80 * MIB), 50 * MIB));
    assert!(!trimmer.should_trim(heap(10 * MIB, 80 * MIB), 65 * MIB));
    assert!(trimmer.should_trim(heap(10 * MIB, 80 * MIB), 66 * MIB));
}

/// The real allocator: 96 MiB in blocks of 64 KiB (below glibc's mmap
/// threshold, so on the heap), all but every 32nd freed, leave the heap
/// full of free pages between live blocks, which no `free` returns.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_fragmented_heap_is_returned_to_the_system() {
    const BLOCK: usize = 64 * 1024;
    let mut blocks: Vec<Box<[u8]>> = (0..1536)
        .map(|_| vec![1u8; BLOCK].into_boxed_slice())
        .collect();
    let mut kept = Vec::new();
    for (index, block) in blocks.drain(..).enumerate() {
        if index % 32 == 0 {
            kept.push(block);
        }
    }
    std::hint::black_box(&kept);
    let mut trimmer = Trimmer::default();
    let (before, after) = trimmer.look().expect("a heap with 90 MiB free is trimmed");
    assert!(
        after + 48 * MIB <= before,
        "the trim released {} MiB, not the free heap",
        (before.saturating_sub(after)) / MIB
    );
    assert_eq!(trimmer.look(), None, "nothing grew since the trim");
    drop(kept);
}

/// glibc takes the cap unless the environment chose the arenas itself.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_arena_cap_is_taken_unless_the_environment_set_one() {
    assert_eq!(limit_arenas(), !arenas_chosen_by_environment());
    assert!(set_arena_max(ARENAS), "glibc takes M_ARENA_MAX");
}
