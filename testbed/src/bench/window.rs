//! The timed window of a benchmark, on the clock `perf record -k
//! CLOCK_MONOTONIC` stamps its samples with, so `scripts/profile` can cut a
//! profile to the seconds a benchmark times (`perf script --time`) and
//! leave out the fleet's bring-up and shutdown.

use std::time::Duration;

/// Now on CLOCK_MONOTONIC.
pub fn now() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// Logs the window from `start` (a [`now`] taken when timing began) to now,
/// as `perf script --time` takes it: `window="START,END"` in seconds.
pub fn log(benchmark: &str, start: Duration) {
    let end = now();
    tracing::info!(
        benchmark,
        window = %format!("{:.6},{:.6}", start.as_secs_f64(), end.as_secs_f64()),
        "timed window on CLOCK_MONOTONIC"
    );
}
