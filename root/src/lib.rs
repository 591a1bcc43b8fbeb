//! The relaymesh root: what only the tree's root runs, on top of its node
//! (the `relaymesh-node` crate).
//!
//! Where to start reading:
//! * [`serve`] starts the root's services when its daemon does: the HTTPS
//!   API ([`api`], the `relaymesh-apiserver` crate with relaymesh's kinds
//!   mounted on it) and the placement [`controller`].
//! * [`placement`] packs a Placement's objects into a bundle and a slice
//!   entry, and explains where it goes; the spec itself is read in
//!   `relaymesh_topology::spec`.
//! * [`client`] and [`kubeconfig`] are what `relayctl` uses to reach the API.
//!
//! The root decides nothing about the tree itself: it asks its node's loop
//! (`relaymesh_node::daemon::root_services`), whose core decides.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod client;
pub mod controller;
pub mod dashboard;
pub mod kubeconfig;
pub mod metrics;
pub mod objects_store;
pub mod placement;
pub mod replicas;
pub mod serve;
pub mod state;
