//! Log setup shared by the daemons (`relay`, `edge-agent`): structured logs
//! on stderr, filtered by `RUST_LOG`, as text or one JSON object per line.

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colored on a terminal).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the global subscriber. `RUST_LOG` overrides `default_filter`.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
