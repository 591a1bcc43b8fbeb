//! Waiting for the signals that stop a daemon (SIGTERM, Ctrl-C).

use tokio_util::sync::CancellationToken;

/// A token cancelled on SIGTERM or Ctrl-C, for a daemon's clean shutdown.
pub fn cancel_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        cancel.cancel();
    });
    token
}

/// Completes on Ctrl-C or SIGTERM (every binary that runs until stopped
/// waits on it).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
