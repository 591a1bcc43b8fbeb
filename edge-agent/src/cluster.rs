//! The cluster the agent stands in front of: how to reach it (a kubeconfig
//! file or the in-cluster service account, kept in the agent's own sled tree
//! `agent`), the labels it reports about itself, and a discovery cache that
//! resolves the kinds of bundled objects to served resources.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::{Api, Client, Config};
use serde::{Deserialize, Serialize};

/// The sled tree that holds the agent's own settings.
pub const AGENT_TREE: &str = "agent";
const CLUSTER_KEY: &str = "cluster";

/// The label with the cluster's Kubernetes minor version (`1.32`).
pub const VERSION_LABEL: &str = "relaymesh.dev/kubernetes-version";
/// The label with the cluster's node count.
pub const NODES_LABEL: &str = "relaymesh.dev/nodes";

/// Why the cluster could not be reached or asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The kubeconfig could not be read.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// In-cluster configuration is not available here.
    #[error("in-cluster configuration: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    /// The client or a request failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The agent's settings could not be read or written.
    #[error("agent settings: {0}")]
    Store(#[from] sled::Error),
    /// The stored settings could not be decoded.
    #[error("agent settings: {0}")]
    Codec(#[from] serde_json::Error),
    /// The agent has no cluster access, and was not told to run without.
    #[error(
        "no cluster access configured: give the agent its cluster with --kubeconfig FILE \
         (that cluster's kubeconfig; KUBECONFIG is not read) or --in-cluster (the pod's \
         service account), or pass --no-cluster to keep the slice and apply nothing"
    )]
    NotConfigured,
}

/// How the agent reaches its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterAccess {
    /// A kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// The pod's service account.
    InCluster,
}

impl ClusterAccess {
    /// The access stored in the agent's tree.
    pub fn load(tree: &sled::Tree) -> Result<Self, ClusterError> {
        match tree.get(CLUSTER_KEY)? {
            Some(bytes) => Ok(serde_json::from_slice(&bytes)?),
            None => Err(ClusterError::NotConfigured),
        }
    }

    /// Stores the access in the agent's tree.
    pub fn save(&self, tree: &sled::Tree) -> Result<(), ClusterError> {
        tree.insert(CLUSTER_KEY, serde_json::to_vec(self)?)?;
        tree.flush()?;
        Ok(())
    }

    /// The access as the flag that gives it (`--kubeconfig FILE`,
    /// `--in-cluster`).
    pub fn describe(&self) -> String {
        match self {
            Self::Kubeconfig(path) => format!("--kubeconfig {}", path.display()),
            Self::InCluster => "--in-cluster".to_string(),
        }
    }

    /// A client for the cluster.
    pub async fn client(&self) -> Result<Client, ClusterError> {
        let config = match self {
            Self::Kubeconfig(path) => {
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(|source| ClusterError::Kubeconfig {
                        path: path.display().to_string(),
                        source,
                    })?;
                Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|source| ClusterError::Kubeconfig {
                        path: path.display().to_string(),
                        source,
                    })?
            }
            Self::InCluster => Config::incluster()?,
        };
        Ok(Client::try_from(config)?)
    }
}

/// The labels the agent detects about its cluster: the Kubernetes minor
/// version (from `/version`) and the number of nodes (0 if they cannot be
/// listed).
pub async fn detect_labels(client: &Client) -> Result<BTreeMap<String, String>, ClusterError> {
    let info = client.apiserver_version().await?;
    let mut labels = BTreeMap::new();
    labels.insert(
        VERSION_LABEL.to_string(),
        minor_version(&info.major, &info.minor, &info.git_version),
    );
    let nodes = match Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
    {
        Ok(list) => list.items.len(),
        Err(error) => {
            tracing::debug!(%error, "cannot list nodes; reporting 0");
            0
        }
    };
    labels.insert(NODES_LABEL.to_string(), nodes.to_string());
    Ok(labels)
}

/// `1.32` from `/version`: `major` and `minor` without the `+` some
/// distributions append, or `gitVersion` (`v1.32.0-eks`) when they are empty.
pub fn minor_version(major: &str, minor: &str, git_version: &str) -> String {
    let digits = |text: &str| -> String { text.chars().take_while(char::is_ascii_digit).collect() };
    let (major, minor) = (digits(major), digits(minor));
    if !major.is_empty() && !minor.is_empty() {
        return format!("{major}.{minor}");
    }
    let mut parts = git_version.trim_start_matches('v').split('.');
    let major = parts.next().map(digits).unwrap_or_default();
    let minor = parts.next().map(digits).unwrap_or_default();
    format!("{major}.{minor}")
}

/// A served kind: its resource and scope.
#[derive(Debug, Clone)]
pub struct Kind {
    /// The resource, for `Api::<DynamicObject>`.
    pub resource: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// Resolves kinds through discovery, remembering what it found; a kind not
/// served (yet) is asked again next time, so a CRD applied since is found.
#[derive(Clone)]
pub struct Kinds {
    client: Client,
    known: HashMap<GroupVersionKind, Kind>,
}

impl Kinds {
    /// An empty cache on `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            known: HashMap::new(),
        }
    }

    /// The served kind `gvk`.
    pub async fn resolve(&mut self, gvk: &GroupVersionKind) -> Result<Kind, kube::Error> {
        if let Some(kind) = self.known.get(gvk) {
            return Ok(kind.clone());
        }
        let (resource, capabilities): (ApiResource, ApiCapabilities) =
            kube::discovery::pinned_kind(&self.client, gvk).await?;
        let kind = Kind {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.known.insert(gvk.clone(), kind.clone());
        Ok(kind)
    }

    /// Forgets a kind (its CRD changed or went away).
    pub fn forget(&mut self, gvk: &GroupVersionKind) {
        self.known.remove(gvk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minor_versions() {
        assert_eq!(minor_version("1", "32", "v1.32.0"), "1.32");
        assert_eq!(minor_version("1", "31+", "v1.31.4-eks-1"), "1.31");
        assert_eq!(minor_version("", "", "v1.30.2+k3s1"), "1.30");
    }
}
