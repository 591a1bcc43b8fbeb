//! What the daemons' `main` functions share: a multi-threaded runtime, and
//! a failure turned into one line on stderr and a failing exit code.

use std::future::Future;
use std::process::ExitCode;

/// Runs `main` to completion; an error is printed as `error: …` (with its
/// causes, for `anyhow` errors) and makes the exit code non-zero.
pub fn block_on_main<E: std::fmt::Display>(main: impl Future<Output = Result<(), E>>) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
