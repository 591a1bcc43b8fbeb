//! The metrics endpoint: plain HTTP on `--metrics-listen`, `GET /metrics`
//! and nothing else. Plain because Prometheus scrapes it from inside the
//! site; it serves counts and this node's peers' names, no secret, and
//! accepts no input but the path (docs/metrics.md says where to bind it).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE as CONTENT_TYPE_HEADER};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The content type of Prometheus's text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A scraper that sends no request within this long is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot serve metrics on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Binds `address` now (so a wrong address fails at start, not later) and
/// serves the process's metrics there until `shutdown`. Returns the bound
/// address (`:0` picks a port).
pub async fn serve(
    address: SocketAddr,
    shutdown: CancellationToken,
) -> Result<SocketAddr, MetricsError> {
    let listen_error = |source| MetricsError::Listen { address, source };
    let listener = TcpListener::bind(address).await.map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    super::instruments::touch();
    tracing::info!(address = %bound, "serving metrics");
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::debug!(%error, "metrics connection not accepted");
                        continue;
                    }
                },
            };
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service_fn(answer));
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "metrics connection ended");
                }
            });
        }
    });
    Ok(bound)
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => (StatusCode::OK, super::encode()),
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD\n".to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "metrics are at /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if status == StatusCode::OK {
        response
            .headers_mut()
            .insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(CONTENT_TYPE));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_address_is_a_clear_error() {
        let taken = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = taken.local_addr().expect("address");
        let error = serve(address, CancellationToken::new())
            .await
            .expect_err("the address is taken");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot serve metrics on {address}")),
            "{error}"
        );
    }

    #[tokio::test]
    async fn metrics_are_at_metrics_only() {
        let shutdown = CancellationToken::new();
        let address = serve("127.0.0.1:0".parse().expect("address"), shutdown.clone())
            .await
            .expect("serves");
        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut stream = tokio::net::TcpStream::connect(address)
                .await
                .expect("connect");
            let request = format!("GET {path} HTTP/1.0\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("write");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("read");
            answer
        };
        let metrics = get("/metrics").await;
        assert!(metrics.starts_with("HTTP/1.0 200"), "{metrics}");
        assert!(
            metrics.contains("relaymesh_store_flush_seconds_count"),
            "{metrics}"
        );
        let elsewhere = get("/").await;
        assert!(elsewhere.starts_with("HTTP/1.0 404"), "{elsewhere}");
        shutdown.cancel();
    }
}
