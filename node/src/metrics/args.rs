//! `--metrics-listen`, as `relay run` and `edge-agent run` take it.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

use super::MetricsError;

/// The metrics endpoint's flag.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics over plain HTTP at
    /// http://ADDR/metrics (docs/metrics.md lists them). Bind it to an
    /// address only the site's Prometheus reaches, e.g. 127.0.0.1:9464.
    /// Default: not served.
    #[arg(long, env = "RELAYMESH_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
}

impl MetricsArgs {
    /// Starts the endpoint if the flag asks for it; whether it did (the
    /// daemon samples its state for it only then).
    pub async fn start(&self) -> Result<bool, MetricsError> {
        let Some(address) = self.metrics_listen else {
            return Ok(false);
        };
        super::serve(address, CancellationToken::new()).await?;
        Ok(true)
    }
}
