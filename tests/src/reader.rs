//! Reads objects from an API server (the root's or a simulated cluster's)
//! in process, for the samplers that read over and over while something
//! happens. A `kubectl get` process per read cost about 0.1 s of CPU; the
//! rollout test's samplers alone took 98 CPU-s of a CI run that way
//! (docs/testing.md, "CPU of the tests").

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

/// A client for one kubeconfig, on a runtime of its own so that the
/// synchronous tests and their sampler threads can call it. Clones share
/// the runtime and the client's connections; any thread may read at once
/// (a multi-thread runtime, whose `block_on` any thread may call).
#[derive(Clone)]
pub struct ApiReader {
    runtime: Arc<tokio::runtime::Runtime>,
    client: kube::Client,
}

impl ApiReader {
    /// A reader for the API server and credentials in `kubeconfig`.
    pub fn new(kubeconfig: &Path) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let client = runtime.block_on(relaymesh_testbed::up::kube_client(kubeconfig))?;
        Ok(Self {
            runtime: Arc::new(runtime),
            client,
        })
    }

    /// The object at `path` (`/apis/apps/v1/namespaces/shop/deployments/web`),
    /// or `None` when the server answers 404.
    pub fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        self.runtime.block_on(async {
            let request = http::Request::builder()
                .uri(path)
                .header(http::header::ACCEPT, "application/json")
                .body(kube::client::Body::empty())?;
            let response = self.client.send(request).await?;
            let status = response.status();
            let body = response.into_body().collect_bytes().await?;
            if status == http::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            anyhow::ensure!(
                status.is_success(),
                "GET {path}: {status}: {}",
                String::from_utf8_lossy(&body)
            );
            Ok(Some(serde_json::from_slice(&body)?))
        })
    }

    /// Deployment `namespace/name`, if it exists.
    pub fn deployment(&self, namespace: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!(
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        ))
    }

    /// The image of Deployment `namespace/name`'s first container, if the
    /// Deployment exists.
    pub fn deployment_image(&self, namespace: &str, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.deployment(namespace, name)?.and_then(|deployment| {
            deployment["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .map(str::to_string)
        }))
    }

    /// Whether Deployment `shop/web` exists, and whether all its `replicas`
    /// are ready ([`crate::web_ready`], read in process).
    pub fn web_ready(&self, replicas: u64) -> anyhow::Result<(bool, bool)> {
        Ok(match self.deployment("shop", "web")? {
            Some(deployment) => (
                true,
                deployment["status"]["readyReplicas"].as_u64() == Some(replicas),
            ),
            None => (false, false),
        })
    }

    /// Placement `namespace/name`'s `status.clusters` at the root, or `None`
    /// before the Placement or its first status.
    pub fn placement_clusters(&self, namespace: &str, name: &str) -> anyhow::Result<Option<Value>> {
        let path = format!("/apis/relaymesh.dev/v1alpha1/namespaces/{namespace}/placements/{name}");
        Ok(self
            .get(&path)?
            .map(|placement| placement["status"]["clusters"].clone())
            .filter(|clusters| !clusters.is_null()))
    }
}
