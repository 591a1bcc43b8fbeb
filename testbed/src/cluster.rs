//! Simulated clusters: the root's own Kubernetes-compatible API server, run
//! in-process on loopback with its own sled store and CA, plus a KWOK-like
//! status simulator, so that an edge agent has a cluster to apply to when no
//! real one is at hand.
//!
//! What a simulated cluster is: an API that stores objects (any kind the
//! relay's API serves, CRDs included), serves watches and tables to `kubectl`
//! and kube-rs, and writes believable `.status` on Deployments, StatefulSets,
//! DaemonSets, ReplicaSets and Jobs (see [`status`] for the rules). What it is
//! not: it runs no pods, schedules nothing, and serves no Node objects (the
//! API has no `nodes` resource; DaemonSets count [`SimulatorOptions::nodes`]
//! instead).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use relaymesh_apiserver::objects::{ObjectError, ObjectKey, ObjectStore};
use relaymesh_apiserver::{ApiError, ApiTls, Plain, RbacEnforced};
use relaymesh_node::pki::{self, PkiError};
use relaymesh_root::kubeconfig::{admin_kubeconfig, write_private};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

mod simulator;
pub mod status;

pub use status::FailureRule;

/// How long [`SimulatedCluster::shutdown`] waits for the API server.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

/// Namespaces a simulated cluster has from the start (the object store adds
/// `default`, `kube-system` and `kube-public` itself).
const EXTRA_NAMESPACES: [&str; 1] = ["kube-node-lease"];

/// How a simulated cluster's workloads behave.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatorOptions {
    /// How long after a workload appears or changes its status is written.
    pub delay: Duration,
    /// How many nodes the cluster pretends to have (DaemonSets run on each).
    pub nodes: u32,
    /// Workloads that fail on a chosen share of clusters (besides those whose
    /// image contains `fail`, which fail everywhere).
    pub failures: Vec<FailureRule>,
}

impl Default for SimulatorOptions {
    fn default() -> Self {
        Self {
            delay: Duration::from_secs(2),
            nodes: 3,
            failures: Vec::new(),
        }
    }
}

/// Why a simulated cluster could not start or stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// Its directory or kubeconfig could not be written.
    #[error("cannot write {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listener could not be bound.
    #[error("cannot listen on 127.0.0.1")]
    Listen(#[source] std::io::Error),
    /// Its sled store could not be opened.
    #[error("cannot open the cluster's store")]
    Sled(#[from] sled::Error),
    /// Its object store could not be opened or seeded.
    #[error("cannot use the cluster's object store")]
    Objects(#[from] ObjectError),
    /// Its CA and certificates could not be made.
    #[error("cannot make the cluster's certificates")]
    Pki(#[from] PkiError),
    /// The API server failed.
    #[error("the cluster's API server failed")]
    Api(#[from] ApiError),
    /// The API server did not stop in time, or its task panicked.
    #[error("the cluster's API server did not stop cleanly")]
    Stop,
}

/// A running simulated cluster. Stop it with [`shutdown`](Self::shutdown);
/// dropping it stops its tasks without waiting.
pub struct SimulatedCluster {
    name: String,
    address: SocketAddr,
    /// The CA its API trusts for client certificates, with its key.
    authority: pki::ApiAuthority,
    kubeconfig: PathBuf,
    /// Every request that asked to change something, a JSON line each (see
    /// [`relaymesh_apiserver::AuditLog`]).
    audit_log: PathBuf,
    objects: ObjectStore,
    db: sled::Db,
    stop: watch::Sender<()>,
    server: JoinHandle<Result<(), ApiError>>,
    simulator: JoinHandle<()>,
}

impl std::fmt::Debug for SimulatedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedCluster")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

impl SimulatedCluster {
    /// Starts cluster `name` (a DNS label) on 127.0.0.1 with a free port,
    /// keeping its store in `dir/store` and writing `dir/admin.kubeconfig`.
    /// Must be called within a tokio runtime.
    pub async fn start(
        name: &str,
        dir: &Path,
        options: SimulatorOptions,
    ) -> Result<Self, ClusterError> {
        Self::start_as(name, dir, options, false).await
    }

    /// [`SimulatedCluster::start`], authorizing as a real cluster does: RBAC
    /// from the roles and bindings stored in it, service accounts included.
    /// The admin kubeconfig is bound to a `cluster-admin` ClusterRole (as
    /// kubeadm binds `system:masters`); [`SimulatedCluster::kubeconfig_for`]
    /// makes others.
    pub async fn start_with_rbac(
        name: &str,
        dir: &Path,
        options: SimulatorOptions,
    ) -> Result<Self, ClusterError> {
        Self::start_as(name, dir, options, true).await
    }

    async fn start_as(
        name: &str,
        dir: &Path,
        options: SimulatorOptions,
        rbac: bool,
    ) -> Result<Self, ClusterError> {
        std::fs::create_dir_all(dir).map_err(|source| ClusterError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let db = sled::open(dir.join("store"))?;
        let objects = ObjectStore::open(db.open_tree("objects")?)?;
        for namespace in EXTRA_NAMESPACES {
            let key = ObjectKey::new("", "namespaces", None, namespace);
            if objects.get(&key)?.is_none() {
                objects.create(
                    &key,
                    json!({
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": namespace},
                        "spec": {"finalizers": ["kubernetes"]},
                        "status": {"phase": "Active"},
                    }),
                )?;
            }
        }

        if rbac {
            bind_cluster_admin(&objects)?;
        }
        let mesh = pki::create_mesh(name, &["127.0.0.1".to_string()])?;
        let tls = ApiTls {
            client_ca_der: mesh.api_authority.cert_der.clone(),
            chain_der: mesh.api_cert.chain_der.clone(),
            key_der: mesh.api_cert.key_der.clone(),
            serving: None,
            clients: None,
        };
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(ClusterError::Listen)?;
        let address = listener.local_addr().map_err(ClusterError::Listen)?;
        let kubeconfig = dir.join("admin.kubeconfig");
        let text = admin_kubeconfig(
            name,
            &format!("https://{address}"),
            &mesh.admin.ca_pem,
            &mesh.admin.cert_pem,
            &mesh.admin.key_pem,
        );
        write_private(&kubeconfig, &text).map_err(|source| ClusterError::Io {
            path: kubeconfig.clone(),
            source,
        })?;

        let audit_log = dir.join("audit.log");
        let audit =
            relaymesh_apiserver::AuditLog::open(&audit_log).map_err(|source| ClusterError::Io {
                path: audit_log.clone(),
                source,
            })?;
        let (stop, stopped) = watch::channel(());
        let mut server_stop = stopped.clone();
        // A plain Kubernetes API server: it is no relay, so it has no tree,
        // issues no tokens and takes no bundles.
        let stopped_server = async move {
            // Either a send or the sender's drop ends the server.
            let _ = server_stop.changed().await;
        };
        let server = if rbac {
            let extension = Arc::new(RbacEnforced::new(objects.clone()));
            tokio::spawn(relaymesh_apiserver::serve(
                listener,
                tls,
                extension,
                objects.clone(),
                Some(audit),
                stopped_server,
            ))
        } else {
            tokio::spawn(relaymesh_apiserver::serve(
                listener,
                tls,
                Arc::new(Plain),
                objects.clone(),
                Some(audit),
                stopped_server,
            ))
        };
        let simulator = tokio::spawn(simulator::run(
            objects.clone(),
            name.to_string(),
            options,
            stopped,
        ));
        info!(cluster = name, %address, "simulated cluster started");
        Ok(Self {
            name: name.to_string(),
            address,
            authority: mesh.api_authority,
            kubeconfig,
            audit_log,
            objects,
            db,
            stop,
            server,
            simulator,
        })
    }

    /// The file where the cluster's API server writes a JSON line for
    /// every request that asked to change something (an apply, a delete).
    pub fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its API listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes a kubeconfig for `user` in `groups` next to the admin's (a
    /// client certificate from the cluster's CA, valid for a day): for a
    /// service account, `system:serviceaccount:NAMESPACE:NAME`, as the
    /// cluster's RBAC names it. Returns its path.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> Result<PathBuf, ClusterError> {
        let key = pki::new_user_key(user)?;
        let cert_der = pki::sign_user_cert(
            &self.authority,
            &key.csr_der,
            user,
            groups,
            Duration::from_secs(24 * 3600),
        )?;
        let text = admin_kubeconfig(
            &self.name,
            &format!("https://{}", self.address),
            &pki::authority_pem(&self.authority),
            &pki::der_to_pem(&cert_der, "CERTIFICATE"),
            &pki::der_to_pem(&key.key_der, "PRIVATE KEY"),
        );
        let file: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let dir = self.kubeconfig.parent().unwrap_or(Path::new("."));
        let path = dir.join(format!("{file}.kubeconfig"));
        write_private(&path, &text).map_err(|source| ClusterError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Its object store, for tests that look behind the API.
    pub fn objects(&self) -> &ObjectStore {
        &self.objects
    }

    /// Stops the simulator and the API server, letting open requests finish.
    pub async fn shutdown(self) -> Result<(), ClusterError> {
        let _ = self.stop.send(());
        let _ = self.simulator.await;
        match tokio::time::timeout(SHUTDOWN_TIMEOUT, self.server).await {
            Ok(Ok(result)) => result?,
            Ok(Err(_)) | Err(_) => return Err(ClusterError::Stop),
        }
        if let Err(error) = relaymesh_node::store::flush_off_runtime(&self.db).await {
            warn!(cluster = %self.name, %error, "cannot flush the cluster's store");
        }
        info!(cluster = %self.name, "simulated cluster stopped");
        Ok(())
    }
}

/// What kubeadm gives `system:masters`: everything, here bound to the admin
/// user of the cluster's admin kubeconfig ([`pki::ADMIN_USER`]).
fn bind_cluster_admin(objects: &ObjectStore) -> Result<(), ClusterError> {
    const RBAC: &str = "rbac.authorization.k8s.io";
    let role = ObjectKey::new(RBAC, "clusterroles", None, "cluster-admin");
    if objects.get(&role)?.is_none() {
        objects.create(
            &role,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "cluster-admin"},
                "rules": [
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]},
                ],
            }),
        )?;
    }
    let binding = ObjectKey::new(RBAC, "clusterrolebindings", None, "cluster-admin");
    if objects.get(&binding)?.is_none() {
        objects.create(
            &binding,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "cluster-admin"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": RBAC, "kind": "User", "name": pki::ADMIN_USER}],
            }),
        )?;
    }
    Ok(())
}
