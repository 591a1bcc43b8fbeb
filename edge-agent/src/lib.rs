//! The relaymesh edge agent: the leaf of the tree, in front of one Kubernetes
//! cluster.
//!
//! Today the agent joins below a relay with a token, registers its cluster
//! (name and labels) in the tree's inventory, and keeps the slice of desired
//! state its relay assigns it in its own sled store, through any outage of
//! its uplink. It runs the relay's own core and link code in agent role: one
//! implementation of a link for relays and agents alike. Applying the
//! assigned workloads to the cluster with the `kube` crate arrives with the
//! edge-agent issue; see `docs/roadmap.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod labels;
