//! A node's configuration, chosen at `relay init` / `relay join` and kept in
//! its store so that `relay run --data-dir DIR` needs nothing else.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a node listens and whom it dials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The QUIC address children dial (`host:port`); agents have none.
    pub listen: Option<String>,
    /// The addresses this node tells others to dial it at; defaults to
    /// `listen`.
    pub advertise: Vec<String>,
    /// The HTTPS address of the root's API (root only).
    pub api_listen: Option<String>,
    /// The parent to dial; `None` for the root.
    pub parent: Option<ParentConfig>,
    /// Labels this node reports (an agent's cluster labels).
    pub labels: BTreeMap<String, String>,
    /// What this node's cluster can run (agents), by resource name.
    pub capacity: BTreeMap<String, String>,
}

/// The parent a child dials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentConfig {
    /// The parent's name, which its certificate must carry.
    pub name: String,
    /// Addresses to try; the child measures each and keeps the nearest.
    pub addresses: Vec<String>,
}

/// Where the root keeps the objects its API serves (`relay init --store`);
/// the node's own state (identity, slice, keys) stays in its sled store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectsStore {
    /// The node's sled store, the embedded default.
    #[default]
    Sled,
    /// An etcd cluster.
    Etcd(EtcdStore),
}

/// An etcd cluster the root's objects live in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdStore {
    /// Client URLs (`http://host:2379`, or `https://…` with TLS).
    pub endpoints: Vec<String>,
    /// The prefix every key goes under, so one etcd cluster can hold more
    /// than one root.
    pub prefix: String,
    /// The CA that signed etcd's serving certificates (PEM), for TLS.
    pub ca_file: Option<std::path::PathBuf>,
    /// A client certificate (PEM) etcd authenticates this root by.
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's key (PEM).
    pub key_file: Option<std::path::PathBuf>,
}
