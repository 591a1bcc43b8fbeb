//! Gives the system back the heap a burst left free.
//!
//! glibc keeps what a thread frees in that thread's arena and returns to
//! the system only the free memory at an arena's top. A root that served
//! `kubectl get clusters` over 5,000 clusters kept 85 MB it no longer used
//! (136 MB resident, 51 MB after a `malloc_trim`; docs/performance.md,
//! "The heap after a burst"). A thread of each daemon looks at the heap
//! every [`PERIOD`] and, when the allocator holds more free memory than
//! live memory and the process grew since its last trim, asks glibc to
//! release the free pages (`malloc_trim(0)`).
//!
//! It also caps glibc's arenas ([`limit_arenas`]): glibc gives a thread
//! that finds an arena locked another one, up to eight per core, and a
//! relay's links are allocated by whichever runtime worker runs them, so
//! every arena ends up with a share of the links and of the gaps between
//! them.
//!
//! This is the one module of the workspace that calls C: glibc's
//! `mallinfo2`, `malloc_trim` and `mallopt` take no pointers and are
//! thread-safe (docs/dependencies.md, "libc"). Elsewhere than glibc it does
//! nothing. Only those three calls are allowed `unsafe`.

use std::time::Duration;

/// How often the trimmer looks at the heap.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The least free heap worth a trim, and the least growth of the resident
/// set since the last trim before another: below this, the page faults of
/// reusing released pages would cost more than the memory is worth.
pub const MIN_RELEASE_BYTES: u64 = 16 * 1024 * 1024;

/// How many malloc arenas a daemon's threads share ([`limit_arenas`]).
/// Two held the root of a star of 6,000 idle children to 300 MiB against
/// 375 with glibc's default, at the same CPU (docs/performance.md, "Two
/// malloc arenas").
pub const ARENAS: i32 = 2;

/// Whether the operator chose the arenas: glibc reads `MALLOC_ARENA_MAX`
/// and `GLIBC_TUNABLES` itself, and their choice stands.
fn arenas_chosen_by_environment() -> bool {
    std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|tunables| tunables.contains("arena_max"))
}

/// Caps glibc's malloc arenas at [`ARENAS`], unless the environment sets
/// them; call before the runtime's threads start. Returns whether the cap
/// was set.
pub fn limit_arenas() -> bool {
    if arenas_chosen_by_environment() {
        return false;
    }
    set_arena_max(ARENAS)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(arenas: i32) -> bool {
    // SAFETY: mallopt takes two integers, no pointer, and glibc changes the
    // parameter under its own lock (MT-Safe, mallopt(3)).
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: i32) -> bool {
    false
}

/// What the allocator holds, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapUse {
    /// Allocated and not freed (glibc's `uordblks`, plus its own mappings
    /// of large blocks, `hblkhd`).
    pub in_use: u64,
    /// Freed and kept by the allocator (`fordblks`); some of it may have
    /// been released to the system already.
    pub free: u64,
}

/// When a trim is worth it: the allocator keeps at least
/// [`MIN_RELEASE_BYTES`] free and more than it has in use, and the process
/// grew by at least [`MIN_RELEASE_BYTES`] since the last trim (released
/// pages stay on the allocator's free lists, so `free` alone would ask for
/// a trim every period).
#[derive(Debug, Default)]
pub struct Trimmer {
    /// The resident set just after the last trim, in bytes.
    resident_after_trim: u64,
}

impl Trimmer {
    /// Whether to trim now, given the heap and the resident set (bytes).
    pub fn should_trim(&self, heap: HeapUse, resident: u64) -> bool {
        heap.free >= MIN_RELEASE_BYTES
            && heap.free > heap.in_use
            && resident >= self.resident_after_trim.saturating_add(MIN_RELEASE_BYTES)
    }

    /// Records a trim that left `resident` bytes resident.
    pub fn trimmed(&mut self, resident: u64) {
        self.resident_after_trim = resident;
    }

    /// Looks at the heap once and trims if [`Trimmer::should_trim`] says so;
    /// returns the resident set before and after, when it trimmed.
    pub fn look(&mut self) -> Option<(u64, u64)> {
        let heap = usage()?;
        let before = resident_bytes()?;
        if !self.should_trim(heap, before) {
            return None;
        }
        release();
        let after = resident_bytes().unwrap_or(before);
        self.trimmed(after);
        Some((before, after))
    }
}

/// Starts the thread that trims the heap every [`PERIOD`] when it is worth
/// it. A thread, not a task: a trim walks and locks every arena, which
/// must not hold up a runtime worker.
pub fn spawn_trimmer() {
    if usage().is_none() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("heap-trim".into())
        .spawn(|| {
            let mut trimmer = Trimmer::default();
            loop {
                std::thread::sleep(PERIOD);
                if let Some((before, after)) = trimmer.look() {
                    tracing::debug!(
                        resident_before = before,
                        resident_after = after,
                        "returned free heap to the system"
                    );
                }
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the heap trimmer; freed memory stays resident");
    }
}

/// The process's resident set, in bytes (`/proc/self/statm`).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// What glibc's allocator holds; `None` elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn usage() -> Option<HeapUse> {
    // SAFETY: mallinfo2 takes no arguments and only reads the allocator's
    // state under its locks (glibc 2.33 and later).
    let info = unsafe { libc::mallinfo2() };
    Some(HeapUse {
        in_use: (info.uordblks + info.hblkhd) as u64,
        free: info.fordblks as u64,
    })
}

/// What glibc's allocator holds; `None` elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn usage() -> Option<HeapUse> {
    None
}

/// Asks glibc to release every whole free page of every arena; returns
/// whether it released any.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release() -> bool {
    // SAFETY: malloc_trim takes a size, no pointer, and glibc serializes it
    // with every other allocator call (MT-Safe, malloc_trim(3)).
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Asks the allocator to release free pages: nothing to do off glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release() -> bool {
    false
}

#[cfg(test)]
mod tests;
