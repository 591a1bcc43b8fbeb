//! Free loopback ports for the relays and API servers a testbed or a test
//! starts as separate processes.
//!
//! The usual trick, binding port 0 and closing the socket, hands out a port
//! from the kernel's ephemeral range, which every outgoing socket draws from
//! too (each QUIC client endpoint binds one): between the close and the child
//! process's own bind, another socket may take it, and the child fails to
//! start. The ports here come from below the ephemeral range, which the
//! kernel never hands out by itself; they are picked at random (so parallel
//! test processes rarely meet), checked by binding, and never handed out
//! twice by one process.

use std::collections::hash_map::RandomState;
use std::collections::BTreeSet;
use std::hash::BuildHasher as _;
use std::io;
use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;

/// The lowest port handed out: above the well-known and common service ports.
const LOWEST: u16 = 10_000;

/// How many random ports are tried before giving up.
const ATTEMPTS: u32 = 1_000;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A UDP port on 127.0.0.1 that nothing holds now and no other caller in this
/// process was given (for a relay's QUIC listener).
pub fn udp() -> io::Result<u16> {
    pick(|port| UdpSocket::bind(("127.0.0.1", port)).is_ok())
}

/// A TCP port on 127.0.0.1 that nothing holds now and no other caller in this
/// process was given (for an API server).
pub fn tcp() -> io::Result<u16> {
    pick(|port| TcpListener::bind(("127.0.0.1", port)).is_ok())
}

fn pick(bindable: impl Fn(u16) -> bool) -> io::Result<u16> {
    let Some(end) = ephemeral_start().filter(|start| *start > LOWEST + 1_000) else {
        // No room below the ephemeral range: fall back to the kernel's choice.
        return Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port());
    };
    let span = u64::from(end - LOWEST);
    let mut handed_out = HANDED_OUT
        .lock()
        .map_err(|_| io::Error::other("a thread panicked while picking a port"))?;
    for _ in 0..ATTEMPTS {
        let random = RandomState::new().hash_one(std::process::id());
        let port = LOWEST + (random % span) as u16;
        if !handed_out.contains(&port) && bindable(port) {
            handed_out.insert(port);
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no free loopback port between {LOWEST} and {end}"),
    ))
}

/// The first port of the kernel's ephemeral range (Linux), if known.
fn ephemeral_start() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| udp().expect("a free port")).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        if let Some(start) = ephemeral_start().filter(|start| *start > LOWEST + 1_000) {
            assert!(ports.iter().all(|port| (LOWEST..start).contains(port)));
        }
        let port = tcp().expect("a free port");
        assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
    }
}
