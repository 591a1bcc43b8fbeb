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
//! Where to start reading: `hollow/cluster.rs` (the store and the writes),
//! then `hollow/routes.rs` (requests), `hollow/watch.rs` (lists and
//! watches) and `hollow/simulator.rs` (statuses).

mod cluster;
mod discovery;
mod routes;
mod simulator;
mod watch;

pub use cluster::{AppliedRecord, HollowCluster, Operation};
pub use discovery::Discovery;
pub use routes::{HollowService, ResponseBody};
pub use watch::WatchStream;
