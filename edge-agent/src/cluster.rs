//! The cluster the agent stands in front of: how to reach it (a kubeconfig
//! file or the in-cluster service account, kept in the agent's own sled tree
//! `agent`), the labels it reports about itself, and a discovery cache that
//! resolves the kinds of bundled objects to served resources.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{GroupVersion, GroupVersionKind};
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

/// Resolves kinds through discovery, remembering what each group version
/// serves: one request per group version, not per kind (a bundle's
/// ConfigMaps, Services and Namespaces share `/api/v1`). A kind its group
/// version did not serve when asked is asked again, so a CRD applied since
/// is found.
#[derive(Clone)]
pub struct Kinds {
    client: Client,
    served: HashMap<GroupVersion, Vec<(ApiResource, ApiCapabilities)>>,
}

impl Kinds {
    /// An empty cache on `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            served: HashMap::new(),
        }
    }

    /// The served kind `gvk`.
    pub async fn resolve(&mut self, gvk: &GroupVersionKind) -> Result<Kind, kube::Error> {
        let version = GroupVersion::gv(&gvk.group, &gvk.version);
        if let Some(kind) = self
            .served
            .get(&version)
            .and_then(|served| find_kind(served, &gvk.kind))
        {
            return Ok(kind);
        }
        let group = kube::discovery::pinned_group(&self.client, &version).await?;
        let served = group.versioned_resources(&gvk.version);
        let kind = find_kind(&served, &gvk.kind);
        self.served.insert(version, served);
        kind.ok_or_else(|| {
            kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(format!("{gvk:?}")))
        })
    }

    /// Forgets what `gvk`'s group version serves (a CRD of it changed or
    /// went away).
    pub fn forget(&mut self, gvk: &GroupVersionKind) {
        self.served
            .remove(&GroupVersion::gv(&gvk.group, &gvk.version));
    }
}

/// Kind `kind` among a group version's resources.
fn find_kind(served: &[(ApiResource, ApiCapabilities)], kind: &str) -> Option<Kind> {
    served
        .iter()
        .find(|(resource, _)| resource.kind == kind)
        .map(|(resource, capabilities)| Kind {
            resource: resource.clone(),
            namespaced: capabilities.scope == Scope::Namespaced,
        })
}

#[cfg(test)]
mod tests;
