//! The proxy with plain UDP sockets on loopback: a "parent" that echoes what
//! it receives and a "child" that counts what comes back. Waits are on
//! received counts, with generous deadlines, never on time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;

use super::*;

const DEADLINE: Duration = Duration::from_secs(20);

/// A parent that echoes every datagram and counts them.
async fn echo_parent() -> (SocketAddr, Arc<AtomicU64>) {
    let (address, received, _log) = logging_echo_parent().await;
    (address, received)
}

/// [`echo_parent`], also keeping what it received, in order.
async fn logging_echo_parent() -> (SocketAddr, Arc<AtomicU64>, Arc<Mutex<Vec<Vec<u8>>>>) {
    let socket = UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("loopback sockets work");
    let address = socket.local_addr().expect("loopback sockets work");
    let received = Arc::new(AtomicU64::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (counter, sink) = (received.clone(), log.clone());
    tokio::spawn(async move {
        let mut buffer = vec![0u8; MAX_DATAGRAM];
        while let Ok((length, peer)) = socket.recv_from(&mut buffer).await {
            sink.lock()
                .expect("no test thread panicked")
                .push(buffer[..length].to_vec());
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = socket.send_to(&buffer[..length], peer).await;
        }
    });
    (address, received, log)
}

/// A child socket whose replies are collected in order.
async fn child(proxy: &Proxy) -> (Arc<UdpSocket>, Arc<Mutex<Vec<Vec<u8>>>>) {
    let socket = Arc::new(
        UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("loopback sockets work"),
    );
    socket
        .connect(proxy.address())
        .await
        .expect("loopback sockets work");
    let replies = Arc::new(Mutex::new(Vec::new()));
    let (reader, sink) = (socket.clone(), replies.clone());
    tokio::spawn(async move {
        let mut buffer = vec![0u8; MAX_DATAGRAM];
        while let Ok(length) = reader.recv(&mut buffer).await {
            sink.lock()
                .expect("no test thread panicked")
                .push(buffer[..length].to_vec());
        }
    });
    (socket, replies)
}

/// Polls until `condition` holds; panics with `what` at the deadline.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn count(replies: &Mutex<Vec<Vec<u8>>>) -> usize {
    replies.lock().expect("no test thread panicked").len()
}

#[tokio::test]
async fn forwards_both_ways_per_child() {
    let (parent, received) = echo_parent().await;
    let proxy = Proxy::start(parent, 1)
        .await
        .expect("loopback sockets work");
    let (first, first_replies) = child(&proxy).await;
    let (second, second_replies) = child(&proxy).await;
    first
        .send(b"from the first")
        .await
        .expect("loopback sockets work");
    second
        .send(b"from the second")
        .await
        .expect("loopback sockets work");
    wait_until("both echoes", || {
        count(&first_replies) == 1 && count(&second_replies) == 1
    })
    .await;
    assert_eq!(
        first_replies.lock().expect("no test thread panicked")[0],
        b"from the first"
    );
    assert_eq!(
        second_replies.lock().expect("no test thread panicked")[0],
        b"from the second"
    );
    assert_eq!(received.load(Ordering::SeqCst), 2);
    assert_eq!(proxy.handle().counts(), (4, 0));
}

#[tokio::test]
async fn a_partition_drops_everything_until_healed() {
    let (parent, received) = echo_parent().await;
    let proxy = Proxy::start(parent, 2)
        .await
        .expect("loopback sockets work");
    let (socket, replies) = child(&proxy).await;
    socket.send(b"before").await.expect("loopback sockets work");
    wait_until("the first echo", || count(&replies) == 1).await;

    proxy.handle().partition();
    for _ in 0..20 {
        socket.send(b"during").await.expect("loopback sockets work");
    }
    let handle = proxy.handle();
    wait_until("the proxy to drop all 20", || handle.counts().1 == 20).await;
    assert_eq!(
        received.load(Ordering::SeqCst),
        1,
        "nothing reached the parent"
    );

    proxy.handle().heal();
    socket.send(b"after").await.expect("loopback sockets work");
    wait_until("the echo after healing", || count(&replies) == 2).await;
    assert_eq!(
        replies.lock().expect("no test thread panicked")[1],
        b"after"
    );
}

#[tokio::test]
async fn total_loss_drops_everything() {
    let (parent, received) = echo_parent().await;
    let proxy = Proxy::start(parent, 3)
        .await
        .expect("loopback sockets work");
    proxy.handle().set(Faults {
        loss: 1.0,
        ..Faults::default()
    });
    let (socket, replies) = child(&proxy).await;
    for _ in 0..50 {
        socket.send(b"lost").await.expect("loopback sockets work");
    }
    let handle = proxy.handle();
    wait_until("the proxy to drop all 50", || handle.counts().1 == 50).await;
    assert_eq!(received.load(Ordering::SeqCst), 0);
    assert_eq!(count(&replies), 0);
}

#[tokio::test]
async fn duplication_delivers_two_copies() {
    let (parent, received) = echo_parent().await;
    let proxy = Proxy::start(parent, 4)
        .await
        .expect("loopback sockets work");
    let (socket, replies) = child(&proxy).await;
    // Only the upward direction duplicates: the parent's echoes of both
    // copies come back once each.
    proxy.handle().set(Faults {
        duplicate: 1.0,
        ..Faults::default()
    });
    socket.send(b"twice").await.expect("loopback sockets work");
    wait_until("two copies at the parent", || {
        received.load(Ordering::SeqCst) >= 2
    })
    .await;
    proxy.handle().set(Faults::default());
    wait_until("both echoes", || count(&replies) >= 2).await;
    assert_eq!(received.load(Ordering::SeqCst), 2);
    assert!(replies
        .lock()
        .expect("loopback sockets work")
        .iter()
        .all(|reply| reply == b"twice"));
}

#[tokio::test]
async fn reordering_sends_a_held_datagram_after_the_next() {
    let (parent, _received, log) = logging_echo_parent().await;
    let proxy = Proxy::start(parent, 5)
        .await
        .expect("loopback sockets work");
    let (socket, replies) = child(&proxy).await;
    proxy.handle().set(Faults {
        reorder: 1.0,
        ..Faults::default()
    });
    // Up, "1" is held and follows "2". Down, the echo of "2" is held in
    // turn and follows the echo of "1", so the child sees the first order
    // again and the swap shows at the parent.
    socket.send(b"1").await.expect("loopback sockets work");
    socket.send(b"2").await.expect("loopback sockets work");
    wait_until("both echoes", || count(&replies) == 2).await;
    assert_eq!(
        *log.lock().expect("no test thread panicked"),
        vec![b"2".to_vec(), b"1".to_vec()]
    );
    assert_eq!(
        *replies.lock().expect("no test thread panicked"),
        vec![b"1".to_vec(), b"2".to_vec()]
    );
}

#[tokio::test]
async fn delay_and_jitter_deliver_everything() {
    let (parent, _received) = echo_parent().await;
    let proxy = Proxy::start(parent, 6)
        .await
        .expect("loopback sockets work");
    proxy.handle().set(Faults {
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(20),
        ..Faults::default()
    });
    let (socket, replies) = child(&proxy).await;
    for index in 0..30u8 {
        socket.send(&[index]).await.expect("loopback sockets work");
    }
    wait_until("all 30 echoes", || count(&replies) == 30).await;
    let mut got: Vec<u8> = replies
        .lock()
        .expect("no test thread panicked")
        .iter()
        .map(|r| r[0])
        .collect();
    got.sort_unstable();
    assert_eq!(got, (0..30).collect::<Vec<u8>>());
}

#[tokio::test]
async fn a_bandwidth_limit_paces_but_delivers_everything() {
    let (parent, received) = echo_parent().await;
    let proxy = Proxy::start(parent, 7)
        .await
        .expect("loopback sockets work");
    // 256 KiB a second against 200 KB each way: well past the burst, so the
    // datagrams are paced (the pacing itself is checked in virtual time
    // below). At most 20 are in flight, so no socket buffer overflows: a
    // drop there would be the kernel's, not the proxy's.
    proxy.handle().set(Faults {
        bandwidth: Some(256 * 1024),
        ..Faults::default()
    });
    let (socket, replies) = child(&proxy).await;
    let datagram = vec![7u8; 1000];
    for sent in 0..200 {
        wait_until("room in the window", || sent < count(&replies) + 20).await;
        socket.send(&datagram).await.expect("loopback sockets work");
    }
    wait_until("all 200 echoes", || count(&replies) == 200).await;
    assert_eq!(received.load(Ordering::SeqCst), 200);
    assert!(replies
        .lock()
        .expect("loopback sockets work")
        .iter()
        .all(|reply| reply == &datagram));
}

#[test]
fn the_token_bucket_schedules_past_the_burst() {
    // Without sockets: a direction's bucket, fed more than its burst at one
    // instant, owes the excess, which at the rate is the wait.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("loopback sockets work");
    runtime.block_on(async {
        let (parent, received) = echo_parent().await;
        let proxy = Proxy::start(parent, 8)
            .await
            .expect("loopback sockets work");
        proxy.handle().set(Faults {
            bandwidth: Some(10_000),
            ..Faults::default()
        });
        let (socket, _replies) = child(&proxy).await;
        // 16 KiB of burst plus 10 KB more: about a second of pacing.
        let datagram = vec![0u8; 1024];
        for _ in 0..26 {
            socket.send(&datagram).await.expect("loopback sockets work");
        }
        let handle = proxy.handle();
        wait_until("the proxy to take all 26", || handle.counts().0 >= 26).await;
        assert!(received.load(Ordering::SeqCst) < 26, "not all at once");
    });
}

#[test]
fn the_same_seed_makes_the_same_choices() {
    let mut first = SplitMix64(42);
    let mut second = SplitMix64(42);
    let a: Vec<bool> = (0..100).map(|_| first.chance(0.3)).collect();
    let b: Vec<bool> = (0..100).map(|_| second.chance(0.3)).collect();
    assert_eq!(a, b);
    let dropped = a.iter().filter(|lost| **lost).count();
    assert!((15..=45).contains(&dropped), "{dropped} of 100 at 30 %");
    assert!(!SplitMix64(1).chance(0.0));
    assert!(SplitMix64(1).chance(1.0));
}
