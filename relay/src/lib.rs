//! The relaymesh relay: the daemon every node of the tree runs, and the
//! library the edge agent and the testbed reuse for links, PKI and storage.
//!
//! Where to start reading:
//! * [`core`] decides everything (what to send to which child, what to
//!   persist, what to fetch) as a sans-IO state machine: events in, actions out.
//! * [`daemon`] drives the core with tokio, QUIC ([`transport`]) and sled
//!   ([`store`]).
//! * [`pki`], [`token`] and [`admission`] make and check identities: the
//!   mesh CA, join tokens, and who may join where.
//! * [`api`] is the root's HTTPS API (the `relaymesh-apiserver` crate with
//!   relaymesh's kinds mounted on it), and [`client`] is what `relayctl`
//!   uses to reach it.
//!
//! Deliberately not here: wire types (they live in `relaymesh-protocol`) and
//! tree logic without IO (`relaymesh-topology`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod api;
pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod deny_list;
pub mod identity;
pub mod inspect;
pub mod kubeconfig;
pub mod limits;
pub mod logging;
pub mod pki;
pub mod placement;
pub mod process;
pub mod seal;
pub mod store;
pub mod token;
pub mod transport;
