//! What the benchmarks with real connections do at the root, through its
//! API: payloads that do not compress, Placements, the root's link
//! statistics, and a Placement's status counts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::up::{self, Fleet};

/// `len` lowercase letters from a fixed-seed generator (xorshift), so no
/// link could compress them much (QUIC does not compress, but a reader
/// should not have to know that); a different `seed` gives different text.
pub fn filler(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

/// The Placements API of `namespace` at the root.
pub fn placements_api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("relaymesh.dev", "v1alpha1", "Placement");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "placements");
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Creates namespace `name` at the root.
pub async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await
        .with_context(|| format!("cannot create namespace {name}"))?;
    Ok(())
}

/// A Placement's `status.clusters` counts, by phase (`selected`,
/// `applied`, `ready`, `failed`, `offline`); absent counts are 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterCounts {
    /// Clusters the Placement selects.
    pub selected: u64,
    /// Applied, not every workload ready.
    pub applied: u64,
    /// Applied and ready.
    pub ready: u64,
    /// Failed.
    pub failed: u64,
}

/// The root's counts for Placement `name`.
pub async fn placement_counts(
    placements: &Api<DynamicObject>,
    name: &str,
) -> anyhow::Result<ClusterCounts> {
    let object = placements.get_status(name).await?;
    let clusters = &object.data["status"]["clusters"];
    let count = |phase: &str| clusters[phase].as_u64().unwrap_or(0);
    Ok(ClusterCounts {
        selected: count("selected"),
        applied: count("applied"),
        ready: count("ready"),
        failed: count("failed"),
    })
}

/// What the root reports of one child link (its own measurements: quinn's
/// connection statistics and its bundle transfer counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootLink {
    /// UDP bytes the root sent on the link.
    pub bytes_sent: u64,
    /// UDP bytes the root received on the link.
    pub bytes_received: u64,
    /// Bundle transfers the root completed on the link.
    pub bundles_served: u64,
    /// Bundle payload bytes the root served on the link.
    pub bundle_bytes_served: u64,
}

/// The root's child links, by child, from the Relay and Agent objects.
pub async fn root_links(fleet: &Fleet) -> anyhow::Result<BTreeMap<String, RootLink>> {
    let admin = fleet.root_admin()?;
    let mut links = BTreeMap::new();
    let nodes = admin
        .relays()
        .await?
        .into_iter()
        .chain(admin.agents().await?);
    for node in nodes {
        if node["spec"]["parent"].as_str() != Some(up::plan::ROOT) {
            continue;
        }
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let status = &node["status"];
        links.insert(
            name.to_string(),
            RootLink {
                bytes_sent: status["bytesSent"].as_u64().unwrap_or(0),
                bytes_received: status["bytesReceived"].as_u64().unwrap_or(0),
                bundles_served: status["bundlesServed"].as_u64().unwrap_or(0),
                bundle_bytes_served: status["bundleBytesServed"].as_u64().unwrap_or(0),
            },
        );
    }
    Ok(links)
}

/// The root's link statistics are sampled once a second: waits (at most
/// `timeout`) until the links show a sample newer than `seen` of which
/// `done` holds, and returns that sample. It reads them once a second too:
/// each read lists every node, work the root does for the benchmark and
/// not for its fleet, which a faster poll would add to the root's CPU the
/// fanout reports (O(N) per read, so more at larger N).
pub async fn next_root_links(
    fleet: &Fleet,
    seen: &BTreeMap<String, RootLink>,
    timeout: Duration,
    done: impl Fn(&BTreeMap<String, RootLink>) -> bool,
) -> anyhow::Result<BTreeMap<String, RootLink>> {
    let deadline = Instant::now() + timeout;
    loop {
        let now = root_links(fleet).await?;
        if now != *seen && done(&now) {
            return Ok(now);
        }
        if Instant::now() > deadline {
            anyhow::bail!("the root's link statistics did not show it in {timeout:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How long a new sample of the root's link statistics may take when
/// nothing else is awaited (they are sampled once a second).
pub const NEXT_SAMPLE: Duration = Duration::from_secs(30);

/// Adds up `field` over every link.
pub fn total(links: &BTreeMap<String, RootLink>, field: fn(&RootLink) -> u64) -> u64 {
    links.values().map(field).sum()
}

/// Creates namespace `namespace` with a Deployment `workload` (one replica)
/// and a Placement of the same name that puts it on every cluster; returns
/// the namespace's Placements API.
pub async fn place_deployment_everywhere(
    client: &kube::Client,
    namespace: &str,
    workload: &str,
) -> anyhow::Result<Api<DynamicObject>> {
    create_namespace(client, namespace).await?;
    let deployment: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": workload, "namespace": namespace, "labels": {"app": workload}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": workload}},
            "template": {
                "metadata": {"labels": {"app": workload}},
                "spec": {"containers": [{"name": workload, "image": "nginx:1.27"}]},
            },
        },
    }))?;
    let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
        .create(&PostParams::default(), &deployment)
        .await
        .context("cannot create the Deployment")?;
    let placements = placements_api(client, namespace);
    let placement: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": workload, "namespace": namespace},
        "spec": {
            "workloads": [{"labelSelector": {"matchLabels": {"app": workload}}}],
            "clusters": {"labelSelector": {}},
        },
    }))?;
    placements
        .create(&PostParams::default(), &placement)
        .await
        .context("cannot create the Placement")?;
    Ok(placements)
}

/// A Deployment's status when none of its pods is ready.
pub fn unavailable_deployment_status() -> serde_json::Value {
    json!({
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 0,
        "availableReplicas": 0,
        "unavailableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
             "message": "Deployment does not have minimum availability."},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    })
}

/// Asks the root for Placement `name`'s counts every `poll` until they
/// satisfy `done`; fails after `timeout`.
pub async fn wait_counts(
    placements: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
    poll: Duration,
    done: impl Fn(&ClusterCounts) -> bool,
) -> anyhow::Result<ClusterCounts> {
    let deadline = Instant::now() + timeout;
    loop {
        let counts = placement_counts(placements, name).await?;
        if done(&counts) {
            return Ok(counts);
        }
        if Instant::now() > deadline {
            anyhow::bail!("after {timeout:?} the root counts {counts:?} of {name}");
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_is_fixed_by_its_seed_and_differs_between_seeds() {
        assert_eq!(filler(1, 64), filler(1, 64));
        assert_ne!(filler(1, 64), filler(2, 64));
        assert_eq!(filler(3, 1000).len(), 1000);
        assert!(filler(3, 1000).bytes().all(|b| b.is_ascii_lowercase()));
    }
}
