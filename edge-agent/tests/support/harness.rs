//! A real Kubernetes-compatible API server (relaymesh's own, on 127.0.0.1
//! with a throwaway PKI), a kube client for it from a kubeconfig file, and
//! an agent's reconciler driven directly: the test feeds slices and bundles
//! the way the daemon would, and reads the statuses it reports.

// Each test uses a different part of this module.
#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use kube::api::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use relaymesh_apiserver::objects::ObjectStore;
use relaymesh_apiserver::{ApiError, ApiTls, AuditLog, Plain};
use relaymesh_edge_agent::cluster::ClusterAccess;
use relaymesh_edge_agent::policy::Policy;
use relaymesh_edge_agent::reconciler::{ReconcileError, Reconciler};
use relaymesh_node::daemon::AgentSlice;
use relaymesh_node::store::{Mutation, Store};
use relaymesh_protocol::message::Resume;
use relaymesh_protocol::{BundleId, PlacementStatus, SliceEntry, Target};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for the agent to get something done.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The API server standing in for the cluster.
pub struct Cluster {
    /// A kube client for it, built from `kubeconfig` as the agent does.
    pub client: Client,
    /// The admin kubeconfig file.
    pub kubeconfig: PathBuf,
    /// What it serves again after [`Cluster::stop_api`].
    tls: ApiTls,
    address: std::net::SocketAddr,
    objects: ObjectStore,
    /// Where `objects` keeps them, for a restarted API server's store.
    tree: sled::Tree,
    /// The API server's audit log: a line per request that asks to change
    /// something.
    audit: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ApiError>>>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Self> {
        let mesh = relaymesh_node::pki::create_mesh("root", &["127.0.0.1".into()])?;
        let tls = ApiTls {
            client_ca_der: mesh.api_authority.cert_der.clone(),
            chain_der: mesh.api_cert.chain_der.clone(),
            key_der: mesh.api_cert.key_der.clone(),
            serving: None,
            clients: None,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let dir = tempfile::tempdir()?;
        let db = sled::open(dir.path().join("objects"))?;
        let tree = db.open_tree("objects")?;
        let objects = ObjectStore::open(tree.clone())?;
        let audit = dir.path().join("audit.log");
        let (stop, task) = serve(listener, &tls, &objects, &audit)?;
        let kubeconfig = dir.path().join("kubeconfig");
        let text = relaymesh_root::kubeconfig::admin_kubeconfig(
            "test",
            &format!("https://127.0.0.1:{}", address.port()),
            &mesh.admin.ca_pem,
            &mesh.admin.cert_pem,
            &mesh.admin.key_pem,
        );
        std::fs::write(&kubeconfig, text)?;
        let client = ClusterAccess::Kubeconfig(kubeconfig.clone())
            .client()
            .await?;
        Ok(Self {
            client,
            kubeconfig,
            tls,
            address,
            objects,
            tree,
            audit,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        })
    }

    /// Stops the API server, as a cluster whose API goes down; its objects
    /// stay for [`Cluster::restart_api`].
    pub async fn stop_api(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    /// Serves the same objects at the same address again, from a store
    /// opened again: its watch history starts over, as kube-apiserver's
    /// watch cache does after a restart, so a watch resuming from before
    /// gets 410 Gone and lists again.
    pub async fn restart_api(&mut self) -> anyhow::Result<()> {
        self.objects = ObjectStore::open(self.tree.clone())?;
        let listener = TcpListener::bind(self.address).await?;
        let (stop, task) = serve(listener, &self.tls, &self.objects, &self.audit)?;
        self.stop = Some(stop);
        self.task = Some(task);
        Ok(())
    }

    /// An `Api` for objects of `api_version`/`kind` (namespaced if
    /// `namespace` is given).
    pub async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _): (ApiResource, _) =
            kube::discovery::pinned_kind(&self.client, &gvk).await?;
        Ok(match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        })
    }

    /// The live object, as JSON, if it exists.
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> anyhow::Result<Option<Value>> {
        let api = self.api(api_version, kind, namespace).await?;
        Ok(api
            .get_opt(name)
            .await?
            .map(|object| serde_json::to_value(object).unwrap_or(Value::Null)))
    }

    pub async fn stop(mut self) {
        self.stop_api().await;
    }

    /// How many requests that change something (any method but GET) the
    /// API server answered for `path` (without its query), as its audit
    /// log says.
    pub fn writes_to(&self, path: &str) -> anyhow::Result<usize> {
        let text = std::fs::read_to_string(&self.audit)?;
        let mut count = 0;
        for line in text.lines() {
            let line: Value = serde_json::from_str(line)?;
            if line["path"] == path {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Deletes an object from the cluster's store directly, as happens
    /// unseen while the API is down (see [`Cluster::stop_api`]).
    pub fn delete_unseen(
        &self,
        key: &relaymesh_apiserver::objects::ObjectKey,
    ) -> anyhow::Result<()> {
        self.objects.delete(key)?;
        Ok(())
    }
}

/// A running API server: what stops it, and its task.
type Serving = (oneshot::Sender<()>, JoinHandle<Result<(), ApiError>>);

/// Serves `objects` on `listener` until the returned sender fires.
fn serve(
    listener: TcpListener,
    tls: &ApiTls,
    objects: &ObjectStore,
    audit: &std::path::Path,
) -> anyhow::Result<Serving> {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(relaymesh_apiserver::serve(
        listener,
        tls.clone(),
        Arc::new(Plain),
        objects.clone(),
        Some(AuditLog::open(audit)?),
        async move {
            let _ = stopped.await;
        },
    ));
    Ok((stop, task))
}

/// One agent's node: its sled store and a running reconciler on it.
pub struct Agent {
    pub store: Store,
    pub slice: watch::Sender<AgentSlice>,
    pub status: mpsc::Receiver<(String, Option<PlacementStatus>)>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ReconcileError>>,
    bundles_stored: u64,
}

impl Agent {
    /// Starts a reconciler for cluster `edge-1` on the store in `dir`.
    pub fn start(cluster: &Cluster, dir: &std::path::Path) -> anyhow::Result<Self> {
        Self::start_on(cluster, Store::open(dir)?)
    }

    /// Marks the node as synchronized with its parent once (a slice it
    /// publishes may then remove placements).
    pub fn synced(&self) -> anyhow::Result<()> {
        self.store.apply(&[Mutation::SetParentPosition(Resume {
            epoch: 1,
            revision: 1,
        })])?;
        Ok(())
    }

    /// Publishes a slice: one placement per `(key, objects)`, each object
    /// list packed into a bundle stored first.
    pub fn assign(&mut self, placements: &[(&str, Vec<Value>)]) -> anyhow::Result<Vec<SliceEntry>> {
        self.assign_with_spec(placements, &serde_json::json!({}))
    }

    /// [`Agent::assign`] with `spec` as every placement's spec, read by the
    /// root's admission code and carried in its entry's typed body as the
    /// root writes it.
    pub fn assign_with_spec(
        &mut self,
        placements: &[(&str, Vec<Value>)],
        spec: &Value,
    ) -> anyhow::Result<Vec<SliceEntry>> {
        let bodies = placements
            .iter()
            .map(|(key, _)| body_for(key, spec))
            .collect::<anyhow::Result<Vec<_>>>()?;
        self.assign_with_bodies(placements, bodies)
    }

    /// [`Agent::assign`] with each placement's entry body given, byte for
    /// byte.
    pub fn assign_with_bodies(
        &mut self,
        placements: &[(&str, Vec<Value>)],
        bodies: Vec<Vec<u8>>,
    ) -> anyhow::Result<Vec<SliceEntry>> {
        let mut entries = Vec::new();
        for ((key, objects), body) in placements.iter().zip(bodies) {
            let refs: Vec<&Value> = objects.iter().collect();
            let bytes = relaymesh_root::placement::pack(&refs);
            let id = BundleId::of(&bytes);
            self.store.put_bundle(&id, &bytes)?;
            self.bundles_stored += 1;
            entries.push(SliceEntry {
                key: (*key).to_string(),
                target: Target::Everywhere,
                bundles: vec![id],
                body,
                // The reconciler takes entries the agent's core has checked.
                serial: 0,
                signature: Vec::new(),
            });
        }
        self.publish(entries.clone());
        Ok(entries)
    }

    /// Waits for a status of `key` that `accept` takes; returns it.
    pub async fn status_of(
        &mut self,
        key: &str,
        accept: impl Fn(&PlacementStatus) -> bool,
    ) -> anyhow::Result<PlacementStatus> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let next = tokio::time::timeout_at(deadline, self.status.recv())
                .await
                .context("no such status in time")?;
            match next {
                Some((reported, Some(status))) if reported == key && accept(&status) => {
                    return Ok(status)
                }
                Some(_) => {}
                None => bail!("the reconciler stopped"),
            }
        }
    }

    pub async fn stop(self) -> anyhow::Result<Store> {
        self.shutdown.cancel();
        self.task.await??;
        Ok(self.store)
    }
}

/// Retries `check` until it returns `Some`, for at most [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits a little and proves `check` still holds (for "nothing happens").
pub async fn stays<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    for _ in 0..20 {
        if !check().await? {
            bail!("no longer true: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

impl Agent {
    /// Starts a reconciler on an open store (a restart of the agent).
    pub fn start_on(cluster: &Cluster, store: Store) -> anyhow::Result<Self> {
        Self::start_with_policy(cluster, store, Policy::default())
    }

    /// Starts a reconciler with apply policy `policy` on an open store.
    pub fn start_with_policy(
        cluster: &Cluster,
        store: Store,
        policy: Policy,
    ) -> anyhow::Result<Self> {
        Self::start_with(cluster, store, policy, None)
    }

    /// Starts a reconciler on an open store for a cluster joined with
    /// `--max-replicas limit`; its word on room goes to the receiver.
    #[allow(dead_code)] // Not every test binary of the harness uses it.
    pub fn start_with_replicas(
        cluster: &Cluster,
        store: Store,
        limit: u64,
    ) -> anyhow::Result<(Self, watch::Receiver<bool>)> {
        store.set_config(&relaymesh_node::config::NodeConfig {
            listen: None,
            advertise: Vec::new(),
            api_listen: None,
            parent: None,
            labels: Default::default(),
            capacity: [(
                relaymesh_protocol::inventory::REPLICAS_CAPACITY.to_string(),
                limit.to_string(),
            )]
            .into(),
        })?;
        let (room, said) = watch::channel(false);
        Ok((
            Self::start_with(cluster, store, Policy::default(), Some(room))?,
            said,
        ))
    }

    fn start_with(
        cluster: &Cluster,
        store: Store,
        policy: Policy,
        room: Option<watch::Sender<bool>>,
    ) -> anyhow::Result<Self> {
        let (slice, slice_rx) = watch::channel(AgentSlice::default());
        let (status_tx, status) = mpsc::channel(256);
        let mut reconciler = Reconciler::new(
            cluster.client.clone(),
            store.clone(),
            "edge-1",
            slice_rx,
            status_tx,
        )?
        .with_policy(policy);
        if let Some(room) = room {
            reconciler = reconciler.with_room(room);
        }
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reconciler.run(shutdown.clone()));
        Ok(Self {
            store,
            slice,
            status,
            shutdown,
            task,
            bundles_stored: 0,
        })
    }

    /// Publishes entries as they are (their bundles must be in the store,
    /// or are awaited).
    pub fn publish(&self, entries: Vec<SliceEntry>) {
        self.slice.send_replace(AgentSlice {
            entries: Arc::new(entries),
            bundles_stored: self.bundles_stored,
        });
    }
}

/// The body the root writes for placement `key` (`placement/NS/NAME`)
/// whose spec is `spec`, with one workload term and this cluster named
/// where `spec` has none.
fn body_for(key: &str, spec: &Value) -> anyhow::Result<Vec<u8>> {
    let (namespace, name) = key
        .strip_prefix(relaymesh_protocol::placement::KEY_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .context("a placement key")?;
    let mut spec = spec.clone();
    if spec.get("workloads").is_none() {
        spec["workloads"] = serde_json::json!([{}]);
    }
    if spec.get("clusters").is_none() {
        spec["clusters"] = serde_json::json!({"names": ["edge-1"]});
    }
    let placement = serde_json::json!({
        "metadata": {"namespace": namespace, "name": name},
        "spec": spec,
    });
    let parsed = relaymesh_topology::spec::PlacementSpec::from_object(&placement)?;
    Ok(parsed.body().encode()?)
}
