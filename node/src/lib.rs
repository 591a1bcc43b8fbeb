//! The relaymesh node runtime: the daemon every node of the tree runs (the
//! root, the relays and the edge agents), and the links, PKI and storage
//! it is made of.
//!
//! Where to start reading:
//! * [`daemon`] drives the relay's core (the `relaymesh-core` crate, which
//!   decides everything as a sans-IO state machine: events in, actions out)
//!   with tokio, QUIC ([`transport`]) and sled ([`store`]).
//! * [`pki`], [`token`] and [`admission`] make and check identities: the
//!   mesh CA, join tokens, and who may join where.
//! * [`daemon::root_services`] is what the root's services (the
//!   `relaymesh-root` crate) see of the node they run on.
//!
//! Deliberately not here: wire types (they live in `relaymesh-protocol`),
//! tree logic without IO (`relaymesh-topology`), the relay's decisions
//! (`relaymesh-core`) and the root's API (`relaymesh-root`): an edge agent
//! links this crate and none of the API server.
// `deny`, not `forbid`: `heap` calls glibc's allocator (its module doc).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod config;
pub mod config_file;
pub mod daemon;
pub mod deny_list;
pub mod heap;
pub mod identity;
pub mod inspect;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod pki;
pub mod process;
pub mod store;
pub mod token;
pub mod transport;
