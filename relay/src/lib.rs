//! The relaymesh relay: the daemon every node of the tree runs, and the
//! library the edge agent and the testbed reuse for links, PKI and storage.
//!
//! Where to start reading:
//! * [`daemon`] drives the relay's core (the `relaymesh-core` crate, which
//!   decides everything as a sans-IO state machine: events in, actions out)
//!   with tokio, QUIC ([`transport`]) and sled ([`store`]).
//! * [`pki`], [`token`] and [`admission`] make and check identities: the
//!   mesh CA, join tokens, and who may join where.
//! * [`api`] is the root's HTTPS API (the `relaymesh-apiserver` crate with
//!   relaymesh's kinds mounted on it), and [`client`] is what `relayctl`
//!   uses to reach it.
//!
//! Deliberately not here: wire types (they live in `relaymesh-protocol`),
//! tree logic without IO (`relaymesh-topology`) and the relay's decisions
//! (`relaymesh-core`, with the signature check of slice entries).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod api;
pub mod client;
pub mod config;
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
pub mod store;
pub mod token;
pub mod transport;
