//! The reconciler when its cluster's API stops answering: every placement
//! reports the cluster failed with `ClusterUnreachable` (not the last state
//! it knew), what arrives meanwhile waits, and once the API answers again
//! every placement is applied and reported as it is.

#[path = "support/harness.rs"]
mod harness;

use harness::{eventually, Agent, Cluster};
use serde_json::{json, Value};

const KEY: &str = "placement/shop/web";

fn config_map(value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "conf", "namespace": "shop"}, "data": {"key": value}})
}

async fn config_value(cluster: &Cluster) -> anyhow::Result<Option<String>> {
    Ok(cluster
        .get("v1", "ConfigMap", Some("shop"), "conf")
        .await?
        .and_then(|object| {
            object
                .pointer("/data/key")
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
}

#[tokio::test]
async fn an_unreachable_cluster_fails_its_placements_until_it_answers_again() -> anyhow::Result<()>
{
    let mut cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(KEY, vec![config_map("1")])])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;

    cluster.stop_api().await;
    let status = agent
        .status_of(KEY, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("edge-1: ClusterUnreachable: the cluster's API does not answer: "),
        "{status:?}"
    );
    assert_eq!(status.failing.len(), 1, "{status:?}");
    assert!(
        status.failing[0]
            .message
            .starts_with("ClusterUnreachable: "),
        "{status:?}"
    );

    // A new revision while the API is down: reported unreachable, not
    // pending, and applied once the API answers.
    agent.assign(&[(KEY, vec![config_map("2")])])?;
    cluster.restart_api().await?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    eventually("the new revision in the cluster", || async {
        Ok((config_value(&cluster).await?.as_deref() == Some("2")).then_some(()))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}
