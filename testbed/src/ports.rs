//! Free loopback ports for the relays and API servers a testbed or a test
//! starts as separate processes.
//!
//! The usual trick, binding port 0 and closing the socket, hands out a port
//! from the kernel's ephemeral range, which every outgoing socket draws from
//! too (each QUIC client endpoint binds one): between the close and the child
//! process's own bind, another socket may take it, and the child fails to
//! start. The ports here come from below the ephemeral range, which the
//! kernel never hands out by itself; they are picked at random, checked by
//! binding, and never handed out twice by one process, nor by two processes
//! of this machine within ten minutes: each claims its port with a file
//! made exclusively in a shared directory (`claim`), since two test
//! processes can both find a port free before either's child binds it
//! (seen in CI: "cannot listen on 127.0.0.1:…: Address already in use").

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

/// How long another process's claim on a port holds: long enough for the
/// process it was picked for to have started and bound it (a port bound
/// stays taken by the bind check), short enough that claims left by
/// processes that ended free their ports again.
const CLAIM_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether this process may hand out `port`: no other process claimed it
/// within [`CLAIM_TTL`]. Claims it if so. A directory that cannot be used
/// claims nothing (the bind check alone then decides).
fn claim(port: u16) -> bool {
    let dir = std::env::temp_dir().join("relaymesh-port-claims");
    if std::fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let path = dir.join(port.to_string());
    let stale = std::fs::metadata(&path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > CLAIM_TTL);
    if stale {
        let _ = std::fs::remove_file(&path);
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(_) => true,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => false,
        Err(_) => true,
    }
}

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
        if !handed_out.contains(&port) && bindable(port) && claim(port) {
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

    #[test]
    fn a_port_claimed_by_another_process_is_not_handed_out_again() {
        // Claimed now (as another process would have): refused until the
        // claim is stale.
        let port = udp().expect("a free port");
        assert!(!claim(port), "this process's own claim holds too");
        let path = std::env::temp_dir()
            .join("relaymesh-port-claims")
            .join(port.to_string());
        assert!(path.exists());
        let old = std::time::SystemTime::now() - CLAIM_TTL * 2;
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(old))
            .expect("aged");
        assert!(claim(port), "a stale claim frees the port");
    }
}
