//! A QUIC client endpoint whose UDP socket counts the bytes it sends: the
//! status fan-in benchmark compares what leaves the hollow agents with what
//! reaches the root, and the agents share endpoints, so the count is kept
//! per socket rather than per connection.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime as _, UdpPoller};

/// Bytes handed to a socket for sending, shared with whoever reads it.
#[derive(Debug, Clone, Default)]
pub struct SentBytes(Arc<AtomicU64>);

impl SentBytes {
    /// The bytes sent so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A client endpoint on 127.0.0.1 whose datagrams are counted in the
/// returned [`SentBytes`].
pub fn counting_endpoint() -> io::Result<(quinn::Endpoint, SentBytes)> {
    let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let runtime = Arc::new(quinn::TokioRuntime);
    let sent = SentBytes::default();
    let counting = Arc::new(CountingSocket {
        inner: runtime.wrap_udp_socket(socket)?,
        sent: sent.clone(),
    });
    let endpoint =
        quinn::Endpoint::new_with_abstract_socket(Default::default(), None, counting, runtime)?;
    Ok((endpoint, sent))
}

struct CountingSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    sent: SentBytes,
}

impl fmt::Debug for CountingSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingSocket")
            .field("sent", &self.sent.get())
            .finish_non_exhaustive()
    }
}

impl AsyncUdpSocket for CountingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.inner.try_send(transmit)?;
        // Only what the kernel took: a WouldBlock is retried and counted then.
        self.sent
            .0
            .fetch_add(transmit.contents.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_count_grows_by_what_a_dial_sends() {
        let (endpoint, sent) = counting_endpoint().expect("endpoint");
        assert_eq!(sent.get(), 0);
        let server = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let target = server.local_addr().expect("address");
        let provider = Arc::new(quinn::rustls::crypto::ring::default_provider());
        let tls = quinn::rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&quinn::rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(quinn::rustls::RootCertStore::empty())
            .with_no_client_auth();
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC TLS");
        // No QUIC server answers: the client's first Initial is sent anyway,
        // which is all this needs.
        let _connecting = endpoint
            .connect_with(
                quinn::ClientConfig::new(Arc::new(crypto)),
                target,
                "localhost",
            )
            .expect("dial");
        let mut buffer = [0u8; 2048];
        let (received, _) = server.recv_from(&mut buffer).await.expect("a datagram");
        assert!(received >= 1200, "an Initial is padded to 1200 bytes");
        assert!(sent.get() >= received as u64);
    }
}
