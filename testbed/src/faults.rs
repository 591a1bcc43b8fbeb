//! Fault injection for local trees: a loopback UDP proxy put between a child
//! and its parent relay, which can partition the link, lose, delay,
//! duplicate and reorder datagrams, and limit its bandwidth, all changed at
//! runtime through a cloneable [`FaultHandle`].
//!
//! QUIC runs over UDP, so a datagram proxy is all it takes to make a real
//! link between real processes misbehave; the relays and agents are not
//! changed or told. A child is pointed at the proxy with `relay run
//! --parent-address` or `edge-agent run --parent-address`.
//!
//! This is a test tool: it keeps state per downstream peer without bounds
//! and queues delayed datagrams without a limit.

pub mod proxy;

pub use proxy::{FaultHandle, Faults, Proxy, ProxyError};
