//! The agent's apply policy against a real Kubernetes-compatible API server
//! through a real kube client: refused categories (judged on the objects'
//! bodies where the kind alone does not tell) are reported and the rest of
//! the bundle applies; an existing object is taken over only when the
//! placement asks to adopt it and the agent allows adoption in its
//! namespace, and an adopted object (a Namespace included) is released,
//! never deleted, when it leaves.

#[path = "support/harness.rs"]
mod harness;

use harness::{eventually, Agent, Cluster};
use kube::api::PostParams;
use relaymesh_edge_agent::manifest::PART_OF_LABEL;
use relaymesh_edge_agent::policy::{AdoptionScope, Category, Policy};
use relaymesh_node::store::Store;
use serde_json::{json, Value};

const KEY: &str = "placement/shop/web";

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(namespace: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": {"key": value}})
}

fn default_priority_class(name: &str) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": name}, "value": 1_000_000_000, "globalDefault": true})
}

fn lax_namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
}

fn cluster_role_binding(name: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "shop"}]})
}

async fn config_value(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<String>> {
    Ok(cluster
        .get("v1", "ConfigMap", Some(namespace), name)
        .await?
        .and_then(|object| {
            object
                .pointer("/data/key")
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
}

/// Creates `object` as someone other than relaymesh would: no labels of
/// ours.
async fn create_foreign(
    cluster: &Cluster,
    object: Value,
    namespace: Option<&str>,
) -> anyhow::Result<()> {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    cluster
        .api(&api_version, &kind, namespace)
        .await?
        .create(&PostParams::default(), &serde_json::from_value(object)?)
        .await?;
    Ok(())
}

fn part_of(object: &Value) -> Option<&str> {
    object["metadata"]["labels"][PART_OF_LABEL].as_str()
}

#[tokio::test]
async fn refused_categories_are_reported_and_the_rest_applies() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let bundle = vec![
        namespace("shop"),
        config_map("shop", "conf", "1"),
        cluster_role_binding("grant"),
        config_map("kube-system", "sneaky", "1"),
        default_priority_class("above-everyone"),
        lax_namespace("lax"),
    ];
    agent.assign(&[(KEY, bundle.clone())])?;
    let status = agent
        .status_of(KEY, |status| status.counts.failed == 1)
        .await?;
    // The first refused object (in reference order) names the reason.
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "edge-1: ConfigMap kube-system/sneaky: refused by this agent's apply policy"
        ) && message.contains("--allow kube-system"),
        "{message}"
    );
    assert_eq!(
        config_value(&cluster, "shop", "conf").await?.as_deref(),
        Some("1")
    );
    let binding = cluster
        .get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            None,
            "grant",
        )
        .await?;
    assert!(binding.is_none(), "{binding:?}");
    assert_eq!(config_value(&cluster, "kube-system", "sneaky").await?, None);
    let priority = ("scheduling.k8s.io/v1", "PriorityClass", "above-everyone");
    let class = cluster
        .get(priority.0, priority.1, None, priority.2)
        .await?;
    assert!(class.is_none(), "{class:?}");
    let lax = cluster.get("v1", "Namespace", None, "lax").await?;
    assert!(lax.is_none(), "{lax:?}");

    // The cluster's owner opens the categories: everything applies.
    let store: Store = agent.stop().await?;
    let policy = Policy::new(
        &[
            Category::ClusterRbac,
            Category::KubeSystem,
            Category::ClusterDefaults,
            Category::PodSecurity,
        ],
        &[],
    )?;
    let mut agent = Agent::start_with_policy(&cluster, store, policy)?;
    agent.assign(&[(KEY, bundle)])?;
    let status = agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(status.message, None);
    let binding = cluster
        .get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            None,
            "grant",
        )
        .await?;
    assert!(binding.is_some());
    assert_eq!(
        config_value(&cluster, "kube-system", "sneaky")
            .await?
            .as_deref(),
        Some("1")
    );
    let class = cluster
        .get(priority.0, priority.1, None, priority.2)
        .await?;
    assert_eq!(class.unwrap_or_default()["globalDefault"], true);
    let lax = cluster.get("v1", "Namespace", None, "lax").await?;
    assert_eq!(
        lax.unwrap_or_default()["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn existing_objects_are_taken_over_only_when_the_placement_adopts_them() -> anyhow::Result<()>
{
    let cluster = Cluster::start().await?;
    create_foreign(&cluster, namespace("legacy"), None).await?;
    create_foreign(
        &cluster,
        config_map("legacy", "settings", "theirs"),
        Some("legacy"),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let bundle = vec![
        namespace("legacy"),
        config_map("legacy", "settings", "ours"),
        config_map("legacy", "fresh", "ours"),
    ];
    agent.assign(&[(KEY, bundle.clone())])?;
    let status = agent
        .status_of(KEY, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.unwrap_or_default();
    assert_eq!(
        message,
        "edge-1: ConfigMap legacy/settings: exists and is not managed by relaymesh; \
         set spec.adopt: true to take it over"
    );
    // Neither pre-existing object was touched; the new one was created.
    assert_eq!(
        config_value(&cluster, "legacy", "settings")
            .await?
            .as_deref(),
        Some("theirs")
    );
    let legacy = cluster
        .get("v1", "Namespace", None, "legacy")
        .await?
        .unwrap_or_default();
    assert_eq!(part_of(&legacy), None, "{legacy}");
    assert_eq!(
        config_value(&cluster, "legacy", "fresh").await?.as_deref(),
        Some("ours")
    );

    // The placement asks to adopt, but the cluster's owner did not allow
    // adoption in `legacy`: still nothing is taken over, and the status
    // names the flag.
    agent.assign_with_spec(&[(KEY, bundle.clone())], &json!({"adopt": true}))?;
    let status = agent
        .status_of(KEY, |status| {
            status.counts.failed == 1
                && status
                    .message
                    .as_deref()
                    .is_some_and(|message| message.contains("--allow-adopt"))
        })
        .await?;
    assert_eq!(
        status.message.as_deref(),
        Some(
            "edge-1: ConfigMap legacy/settings: exists and is not managed by relaymesh, \
             and this agent does not allow adoption in namespace legacy \
             (edge-agent run --allow-adopt legacy)"
        )
    );
    assert_eq!(
        config_value(&cluster, "legacy", "settings")
            .await?
            .as_deref(),
        Some("theirs")
    );
    let legacy = cluster
        .get("v1", "Namespace", None, "legacy")
        .await?
        .unwrap_or_default();
    assert_eq!(part_of(&legacy), None, "{legacy}");

    // The owner allows it (`--allow-adopt legacy`): both are taken over.
    let store = agent.stop().await?;
    let policy = Policy::default().allowing_adoption([AdoptionScope::Namespace("legacy".into())]);
    let mut agent = Agent::start_with_policy(&cluster, store, policy)?;
    agent.assign_with_spec(&[(KEY, bundle)], &json!({"adopt": true}))?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(
        config_value(&cluster, "legacy", "settings")
            .await?
            .as_deref(),
        Some("ours")
    );
    let legacy = cluster
        .get("v1", "Namespace", None, "legacy")
        .await?
        .unwrap_or_default();
    assert!(part_of(&legacy).is_some(), "{legacy}");

    // The placement goes: what the agent created is deleted, what it
    // adopted is released and stays, the pre-existing Namespace above all.
    agent.synced()?;
    agent.assign(&[])?;
    eventually("the created object is pruned", || async {
        Ok(config_value(&cluster, "legacy", "fresh")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    eventually("the adopted objects are released", || async {
        let legacy = cluster.get("v1", "Namespace", None, "legacy").await?;
        let settings = cluster
            .get("v1", "ConfigMap", Some("legacy"), "settings")
            .await?;
        Ok(match (legacy, settings) {
            (Some(legacy), Some(settings))
                if part_of(&legacy).is_none() && part_of(&settings).is_none() =>
            {
                Some(())
            }
            (None, _) | (_, None) => anyhow::bail!("an adopted object was deleted"),
            _ => None,
        })
    })
    .await?;
    assert_eq!(
        config_value(&cluster, "legacy", "settings")
            .await?
            .as_deref(),
        Some("ours")
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}
