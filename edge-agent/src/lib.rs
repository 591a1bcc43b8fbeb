//! The relaymesh edge agent: the leaf of the tree, in front of one Kubernetes
//! cluster.
//!
//! The agent joins below a relay with a token, registers its cluster (name
//! and labels, some detected from the cluster) in the tree's inventory, and
//! keeps the slice of desired state its relay assigns it in its own sled
//! store, through any outage of its uplink. It runs the relay's own core and
//! link code in agent role, plus a [`reconciler`]: a kube-rs style
//! controller that applies each assigned placement's bundles with
//! server-side apply, prunes what left them, restores drift and reports
//! status per placement.
//!
//! It also answers the questions about its cluster that the root's users
//! send down the tree ([`answers`]): one live object it manages, and the
//! recent events of its namespaces.
//!
//! Where to start reading: [`agent`] (joining and running one agent, as the
//! binary and the testbed's hollow agents do), [`reconciler`] (the loop and its
//! [`reconciler::Action`]s), then `reconciler/pass.rs` (one apply pass),
//! [`applier`], [`prune`] and [`drift`]. Pure logic — dependency order,
//! object health, bundle parsing — is in [`order`], [`status`] and
//! [`manifest`].
//!
//! What it deliberately does not do: it never deletes an object it did not
//! create (the local [`inventory`] *and* the ApplySet label must agree), and
//! never removes a whole placement from a slice it cannot trust yet (before
//! its node first synchronized with its parent). What it writes at all is
//! its own [`policy`]'s decision, not its parent's: by default it refuses
//! what changes how the whole cluster behaves (cluster-scoped RBAC,
//! admission control, the API server's flow control, cluster-wide defaults,
//! Pod Security labels, the `kube-system` namespaces and more: see
//! [`policy::Category`]), and it takes over an object someone else made
//! only when the Placement asks to adopt it and the cluster's owner allowed
//! adoption in its namespace.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent;
pub mod answers;
pub mod applier;
pub mod cluster;
pub mod drift;
pub mod health;
pub mod inventory;
pub mod labels;
pub mod manifest;
pub mod metrics;
pub mod order;
pub mod policy;
pub mod prune;
pub mod reconciler;
pub mod rules;
pub mod status;
