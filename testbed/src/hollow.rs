//! Hollow clusters: lightweight in-process stand-ins for the Kubernetes
//! cluster in front of an edge agent, so that `testbed up --hollow N` can
//! run thousands of real agents in one process (as kubemark's hollow nodes
//! do for the node side).
//!
//! A [`HollowCluster`] answers the requests the agent's code makes through
//! kube's `Client` — discovery, server-side apply, get, list, watch, delete,
//! patches, CRDs — from an in-memory map, with no socket, TLS or disk. Its
//! workloads get their status by the same rules as the simulated clusters
//! ([`crate::cluster::status`]): ready a set delay after they change, failed
//! when an image says so or a failure rule picks the cluster. It records
//! every write in the order received ([`HollowCluster::applied`]), so tests
//! can check the agent's dependency order.
//!
//! What it is not: a full API server. It does no validation beyond the
//! object's type, name and namespace, no field management (apply replaces
//! the whole object), no finalizers or garbage collection, no admission,
//! no subresources, no protobuf or tables. The simulated clusters
//! ([`crate::cluster::SimulatedCluster`]) are the real API server for that.
//!
//! Sized for ten thousand in a process: the built-in kinds and their
//! discovery documents are built once ([`Discovery`], shared through an
//! `Arc`), objects are kept serialized, and an idle cluster runs no task.
//!
//! Where to start reading: `hollow/state.rs` (what a cluster holds), then
//! `hollow/cluster.rs` (the writes), `hollow/routes.rs` (requests),
//! `hollow/watch.rs` (lists and watches) and `hollow/simulator.rs`
//! (statuses).
//!
//! The modules are layered, each using only those below it, so that none
//! depends back on another: at the bottom `encoding` (JSON bytes and
//! timestamps), `filter` (selectors), `events` (watch events and
//! watchers), `record` (the record of writes) and `discovery`; above them
//! `state` (a cluster's data and what every change does to it); then
//! `object` (the body rules of a write), `simulator` (statuses) and `watch`
//! (lists and watch streams), which take the state alone; then `cluster`
//! (the [`HollowCluster`] handle and its writes); and `routes` (the HTTP
//! service) on top.

mod cluster;
mod discovery;
mod encoding;
mod events;
mod filter;
mod object;
mod record;
mod routes;
mod simulator;
mod state;
mod watch;

pub use cluster::HollowCluster;
pub use discovery::Discovery;
pub use record::{AppliedRecord, Operation};
pub use routes::{HollowService, ResponseBody};
pub use watch::WatchStream;
