//! What the daemons' `main` functions share: a multi-threaded runtime, a
//! file-size limit turned into errors the daemon reports, glibc's malloc
//! arenas capped and freed heap returned to the system after bursts, and a
//! failure turned into one line on stderr and a failing exit code.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// How long tasks still running when `main` returns get to finish.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `main` to completion; an error is printed as `error: …` (with its
/// causes, for `anyhow` errors) and makes the exit code non-zero.
pub fn block_on_main<E: std::fmt::Display>(main: impl Future<Output = Result<(), E>>) -> ExitCode {
    // Before the runtime's threads allocate: each would get an arena.
    crate::heap::limit_arenas();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    crate::heap::spawn_trimmer();
    let result = runtime.block_on(async {
        report_file_size_limit();
        main.await
    });
    // A task stuck in a blocking call (a sled flush after a failed write)
    // must not keep a daemon that is done from exiting.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Makes a write past the process's file-size limit (`ulimit -f`,
/// `RLIMIT_FSIZE`) fail with `EFBIG` instead of killing the daemon with
/// `SIGXFSZ`: killed, it would leave no word of why in its log; failing, the
/// store reports the error and the daemon stops saying so (docs/reliability.md).
fn report_file_size_limit() {
    use tokio::signal::unix::{signal, SignalKind};
    let kind = SignalKind::from_raw(rustix::process::Signal::XFSZ.as_raw());
    match signal(kind) {
        Ok(mut signals) => {
            tokio::spawn(async move {
                while signals.recv().await.is_some() {
                    tracing::error!(
                        "a write went past this process's file-size limit (RLIMIT_FSIZE); \
                         it failed with EFBIG"
                    );
                }
            });
        }
        Err(error) => {
            tracing::warn!(%error, "cannot catch SIGXFSZ; a file-size limit will kill this process");
        }
    }
}
