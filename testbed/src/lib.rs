//! The relaymesh testbed library: what the `testbed` binary uses to bring up
//! local trees and to benchmark the tree logic at scale.
//!
//! Start with [`cluster::SimulatedCluster`], the in-process stand-in for an
//! edge cluster, [`hollow::HollowCluster`], its lightweight sibling for
//! thousands of agents in one process, or [`bench::simulation`], which
//! carries a placement, its bundle and every status through a tree of up to
//! a million real relay cores in memory (`relaymesh_core::simulation`), the
//! code the relays run.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod chaos;
pub mod cluster;
pub mod demo;
pub mod etcd;
pub mod faults;
pub mod hollow;
pub mod ports;
pub mod up;
