//! The reconciler against a real Kubernetes-compatible API server (relaymesh's
//! own, over TLS with a throwaway PKI) through a real kube client: apply,
//! update, prune, drift, create-only, failures, restarts and untrusted
//! slices.

#[path = "support/harness.rs"]
mod harness;

use harness::{eventually, stays, Agent, Cluster};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_edge_agent::manifest::PART_OF_LABEL;
use relaymesh_edge_agent::prune::ApplySet;
use serde_json::{json, Value};

const KEY: &str = "placement/shop/web";

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(namespace: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": {"key": value}})
}

fn deployment(image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "web", "image": image}]}}}})
}

fn widget_definition() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn widget() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "gear", "namespace": "shop"}, "spec": {"size": 3}})
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

#[tokio::test]
async fn applies_definition_custom_resource_namespace_and_config_map_in_one_pass(
) -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    // Deliberately out of order: the agent sorts.
    agent.assign(&[(
        KEY,
        vec![
            widget(),
            config_map("shop", "conf", "1"),
            namespace("shop"),
            widget_definition(),
        ],
    )])?;
    let status = agent
        .status_of(KEY, |status| {
            status.counts.ready == 1 || status.counts.failed == 1
        })
        .await?;
    assert_eq!(status.counts.ready, 1, "{status:?}");
    assert_eq!(status.message, None);

    let gear = cluster
        .get("example.com/v1", "Widget", Some("shop"), "gear")
        .await?;
    let gear = gear.ok_or_else(|| anyhow::anyhow!("the widget exists"))?;
    assert_eq!(gear["spec"]["size"], 3);
    assert!(gear["metadata"]["labels"][PART_OF_LABEL]
        .as_str()
        .is_some_and(|id| id.starts_with("applyset-")));
    let managers: Vec<&str> = gear["metadata"]["managedFields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .filter_map(|field| field["manager"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(managers, ["relaymesh"]);
    assert_eq!(
        config_value(&cluster, "shop", "conf").await?.as_deref(),
        Some("1")
    );
    // Steady: the agent's own writes echoed by its watches are not drift.
    let version = |object: Option<Value>| object.map(|o| o["metadata"]["resourceVersion"].clone());
    let settled = version(cluster.get("v1", "ConfigMap", Some("shop"), "conf").await?);
    stays("the object is not re-applied", || async {
        Ok(version(cluster.get("v1", "ConfigMap", Some("shop"), "conf").await?) == settled)
    })
    .await?;
    let parent = cluster
        .get(
            "v1",
            "ConfigMap",
            Some("relaymesh-system"),
            "placement.shop.web",
        )
        .await?;
    let parent = parent.ok_or_else(|| anyhow::anyhow!("the ApplySet parent exists"))?;
    assert_eq!(
        parent["metadata"]["labels"]["applyset.kubernetes.io/id"],
        gear["metadata"]["labels"][PART_OF_LABEL]
    );
    let kinds =
        parent["metadata"]["annotations"]["applyset.kubernetes.io/contains-group-kinds"].as_str();
    assert_eq!(
        kinds,
        Some(
            "ConfigMap,CustomResourceDefinition.apiextensions.k8s.io,Namespace,Widget.example.com"
        )
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

/// A body this agent cannot read (here a version-11 root's JSON, as a
/// store written then holds it) holds the placement back: it fails saying
/// why, and nothing is applied uncustomized. The root's next body is.
#[tokio::test]
async fn a_placement_body_it_cannot_read_fails_and_applies_nothing() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let objects = vec![config_map("shop", "conf", "1")];
    let json = br#"{"metadata": {"namespace": "shop", "name": "web"}, "spec": {}}"#;
    agent.assign_with_bodies(&[(KEY, objects.clone())], vec![json.to_vec()])?;
    let status = agent
        .status_of(KEY, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("cannot read the placement's spec"),
        "{message}"
    );
    assert_eq!(config_value(&cluster, "shop", "conf").await?, None);

    agent.assign(&[(KEY, objects)])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(
        config_value(&cluster, "shop", "conf").await?.as_deref(),
        Some("1")
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_image_change_is_applied_and_a_missing_namespace_created() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    // No Namespace in the bundle: the agent creates it, labelled as its own.
    agent.assign(&[(KEY, vec![deployment("nginx:1.27")])])?;
    // No controller runs on this server: applied, never ready.
    agent
        .status_of(KEY, |status| status.counts.applied == 1)
        .await?;
    let shop = cluster
        .get("v1", "Namespace", None, "shop")
        .await?
        .unwrap_or_default();
    assert_eq!(
        shop["metadata"]["labels"]["relaymesh.dev/created-by"],
        "relaymesh"
    );

    agent.assign(&[(KEY, vec![deployment("nginx:1.28")])])?;
    eventually("the new image is applied", || async {
        let web = cluster
            .get("apps/v1", "Deployment", Some("shop"), "web")
            .await?;
        Ok(web.filter(|web| {
            web.pointer("/spec/template/spec/containers/0/image") == Some(&json!("nginx:1.28"))
        }))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn removed_objects_are_pruned_and_foreign_ones_survive() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(
        KEY,
        vec![
            namespace("shop"),
            config_map("shop", "keep", "1"),
            config_map("shop", "drop", "1"),
        ],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    // Someone else's object, without our part-of label.
    let foreign = config_map("shop", "foreign", "theirs");
    cluster
        .api("v1", "ConfigMap", Some("shop"))
        .await?
        .create(&PostParams::default(), &serde_json::from_value(foreign)?)
        .await?;

    agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "keep", "1")],
    )])?;
    eventually("the dropped object is pruned", || async {
        Ok(config_value(&cluster, "shop", "drop")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert_eq!(
        config_value(&cluster, "shop", "keep").await?.as_deref(),
        Some("1")
    );
    assert_eq!(
        config_value(&cluster, "shop", "foreign").await?.as_deref(),
        Some("theirs")
    );

    // The whole placement goes (from a slice the agent can trust).
    agent.synced()?;
    agent.assign(&[])?;
    eventually("the placement's objects are pruned", || async {
        Ok(config_value(&cluster, "shop", "keep")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn drift_is_restored_but_create_only_objects_are_left_alone() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let mut seed = config_map("shop", "seed", "initial");
    seed["metadata"]["annotations"] = json!({"relaymesh.dev/create-only": "true"});
    agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "conf", "1"), seed],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    let config_maps = cluster.api("v1", "ConfigMap", Some("shop")).await?;

    // A managed field edited by someone else comes back.
    let edit = json!({"data": {"key": "edited"}});
    config_maps
        .patch("conf", &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    eventually("the edited field is restored", || async {
        Ok((config_value(&cluster, "shop", "conf").await?.as_deref() == Some("1")).then_some(()))
    })
    .await?;

    // A deleted managed object comes back.
    config_maps.delete("conf", &DeleteParams::default()).await?;
    eventually("the deleted object is restored", || async {
        Ok((config_value(&cluster, "shop", "conf").await?.as_deref() == Some("1")).then_some(()))
    })
    .await?;

    // A create-only object keeps what the cluster's users made of it.
    config_maps
        .patch("seed", &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    stays("the create-only object keeps its edit", || async {
        Ok(config_value(&cluster, "shop", "seed").await?.as_deref() == Some("edited"))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_rejected_object_fails_the_placement_and_the_rest_applies() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(
        KEY,
        vec![
            namespace("shop"),
            config_map("shop", "Not_A_Name", "1"),
            config_map("shop", "fine", "1"),
        ],
    )])?;
    let status = agent
        .status_of(KEY, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("edge-1: ConfigMap shop/Not_A_Name: Invalid (422)"),
        "{message}"
    );
    assert_eq!(
        config_value(&cluster, "shop", "fine").await?.as_deref(),
        Some("1")
    );

    // Fixed in the next bundle: the placement recovers.
    agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "fine", "1")],
    )])?;
    let status = agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(status.message, None);
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

/// The audit path of ConfigMap `name` in namespace `shop`.
fn config_map_path(name: &str) -> String {
    format!("/api/v1/namespaces/shop/configmaps/{name}")
}

#[tokio::test]
async fn a_pass_writes_only_the_objects_whose_manifest_changed() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let parent = ApplySet::of(KEY).parent_name;
    let parent = format!("/api/v1/namespaces/relaymesh-system/configmaps/{parent}");
    agent.assign(&[(
        KEY,
        vec![
            namespace("shop"),
            config_map("shop", "same", "1"),
            config_map("shop", "changed", "1"),
        ],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(cluster.writes_to(&config_map_path("same"))?, 1);
    assert_eq!(cluster.writes_to(&parent)?, 1);

    // A new bundle in which one object changed: that one is written, the
    // namespace, the other object and the ApplySet parent are not.
    agent.assign(&[(
        KEY,
        vec![
            namespace("shop"),
            config_map("shop", "same", "1"),
            config_map("shop", "changed", "2"),
        ],
    )])?;
    eventually("the changed object is written", || async {
        Ok(
            (config_value(&cluster, "shop", "changed").await?.as_deref() == Some("2"))
                .then_some(()),
        )
    })
    .await?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(cluster.writes_to(&config_map_path("changed"))?, 2);
    assert_eq!(cluster.writes_to(&config_map_path("same"))?, 1);
    assert_eq!(cluster.writes_to("/api/v1/namespaces/shop")?, 1);
    assert_eq!(cluster.writes_to(&parent)?, 1);

    // Drift takes an object out of what the agent holds as written: the
    // next pass writes it again.
    cluster
        .api("v1", "ConfigMap", Some("shop"))
        .await?
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": {"key": "edited"}})),
        )
        .await?;
    eventually("the edited object is restored", || async {
        Ok((config_value(&cluster, "shop", "same").await?.as_deref() == Some("1")).then_some(()))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_object_deleted_while_its_watch_was_broken_is_written_again() -> anyhow::Result<()> {
    let mut cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "kept", "1")],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;

    // Deleted while the API is down: no watch event tells the agent.
    cluster.stop_api().await;
    cluster.delete_unseen(&ObjectKey {
        group: String::new(),
        resource: "configmaps".into(),
        namespace: Some("shop".into()),
        name: "kept".into(),
    })?;
    cluster.restart_api().await?;
    eventually("the deleted object is written again", || async {
        Ok((config_value(&cluster, "shop", "kept").await?.as_deref() == Some("1")).then_some(()))
    })
    .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_restarted_agent_reapplies_from_its_local_state() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let entries = agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "conf", "1")],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    let store = agent.stop().await?;

    // While the agent is down, someone deletes its object.
    cluster
        .api("v1", "ConfigMap", Some("shop"))
        .await?
        .delete("conf", &DeleteParams::default())
        .await?;
    // Restarted on the same sled: the daemon republishes the stored slice
    // (whose bundle is only in the store).
    let mut agent = Agent::start_on(&cluster, store)?;
    agent.publish(entries);
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    assert_eq!(
        config_value(&cluster, "shop", "conf").await?.as_deref(),
        Some("1")
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_empty_slice_before_the_first_sync_prunes_nothing() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(KEY, vec![config_map("shop", "conf", "1")])])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    let store = agent.stop().await?;

    // Restarted with its uplink down: the slice it is handed is empty and
    // the node never synchronized with a parent.
    let mut agent = Agent::start_on(&cluster, store)?;
    agent.assign(&[])?;
    stays("the workload stays", || async {
        Ok(config_value(&cluster, "shop", "conf").await?.is_some())
    })
    .await?;

    // Once synchronized, an empty slice means it: pruned, and the namespace
    // the agent created for it goes too.
    agent.synced()?;
    agent.assign(&[])?;
    eventually("the placement is pruned", || async {
        Ok(cluster
            .get("v1", "Namespace", None, "shop")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert_eq!(config_value(&cluster, "shop", "conf").await?, None);
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_placement_waits_pending_for_its_bundle() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    let entries = agent.assign(&[(
        KEY,
        vec![namespace("shop"), config_map("shop", "conf", "1")],
    )])?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    // A new version whose bundle has not arrived yet.
    let mut waiting = entries.clone();
    waiting[0].bundles = vec![relaymesh_protocol::BundleId::of(b"not here yet")];
    agent.publish(waiting);
    agent
        .status_of(KEY, |status| status.counts.pending == 1)
        .await?;
    // Nothing is pruned meanwhile.
    assert_eq!(
        config_value(&cluster, "shop", "conf").await?.as_deref(),
        Some("1")
    );
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_workload_becomes_ready_when_its_status_says_so() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&cluster, dir.path())?;
    agent.assign(&[(KEY, vec![namespace("shop"), deployment("nginx:1.27")])])?;
    agent
        .status_of(KEY, |status| status.counts.applied == 1)
        .await?;
    // Playing the Deployment controller: the watch on Deployments sees it.
    // Ready by kstatus's rules: every count caught up with the spec, and
    // both conditions say the rollout is done.
    let status = json!({"status": {"observedGeneration": 1, "replicas": 1,
        "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}});
    cluster
        .api("apps/v1", "Deployment", Some("shop"))
        .await?
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    agent
        .status_of(KEY, |status| status.counts.ready == 1)
        .await?;
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}

#[tokio::test]
async fn join_detects_the_cluster_version_and_nodes() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let labels = relaymesh_edge_agent::cluster::detect_labels(&cluster.client).await?;
    let version = labels
        .get("relaymesh.dev/kubernetes-version")
        .cloned()
        .unwrap_or_default();
    assert!(version.starts_with("1.") && version.len() >= 4, "{version}");
    // This server serves no Nodes: the count falls back to 0.
    assert_eq!(
        labels.get("relaymesh.dev/nodes").map(String::as_str),
        Some("0")
    );
    cluster.stop().await;
    Ok(())
}

fn replicated(name: &str, replicas: u64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "shop"},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": name, "image": "nginx"}]}}}})
}

async fn deployed(cluster: &Cluster, name: &str) -> anyhow::Result<bool> {
    Ok(cluster
        .get("apps/v1", "Deployment", Some("shop"), name)
        .await?
        .is_some())
}

/// `edge-agent join --max-replicas 4`: of two placements asking for 2 and
/// 3 replicas, the second by key waits, failing and saying why, and the
/// cluster is out of room; once the first leaves, the second runs. After a
/// restart, what runs is counted from its stored bundles before anything
/// new is admitted.
#[tokio::test]
async fn a_placement_beyond_the_replica_capacity_waits_for_room() -> anyhow::Result<()> {
    const API: &str = "placement/shop/api";
    const WEB: &str = "placement/shop/web";
    const EXTRA: &str = "placement/shop/batch";
    let cluster = Cluster::start().await?;
    let dir = tempfile::tempdir()?;
    let (mut agent, mut room) =
        Agent::start_with_replicas(&cluster, relaymesh_node::store::Store::open(dir.path())?, 4)?;
    agent.synced()?;
    let entries = agent.assign(&[
        (API, vec![namespace("shop"), replicated("api", 2)]),
        (WEB, vec![replicated("web", 3)]),
    ])?;
    agent
        .status_of(API, |status| status.counts.applied == 1)
        .await?;
    let status = agent
        .status_of(WEB, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("ask for 3 replicas and this cluster runs 2 of at most 4"),
        "{message}"
    );
    assert!(!deployed(&cluster, "web").await?);
    eventually("out of room", || {
        let said = *room.borrow_and_update();
        async move { Ok(said.then_some(())) }
    })
    .await?;

    // The first leaves: the second runs, and there is room again (3 of 4).
    let web: Vec<_> = entries
        .into_iter()
        .filter(|entry| entry.key == WEB)
        .collect();
    agent.publish(web.clone());
    agent
        .status_of(WEB, |status| status.counts.applied == 1)
        .await?;
    eventually("api pruned", || async {
        Ok((!deployed(&cluster, "api").await?).then_some(()))
    })
    .await?;
    assert!(deployed(&cluster, "web").await?);
    eventually("room again", || {
        let said = *room.borrow_and_update();
        async move { Ok((!said).then_some(())) }
    })
    .await?;

    // Restarted, the agent counts web's 3 before a placement asking for 2
    // that sorts first.
    let store = agent.stop().await?;
    let (mut agent, _room) = Agent::start_with_replicas(&cluster, store, 4)?;
    let mut both = agent.assign(&[(EXTRA, vec![replicated("batch", 2)])])?;
    both.extend(web);
    agent.publish(both);
    let status = agent
        .status_of(EXTRA, |status| status.counts.failed == 1)
        .await?;
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("ask for 2 replicas and this cluster runs 3 of at most 4"),
        "{message}"
    );
    assert!(!deployed(&cluster, "batch").await?);
    assert!(deployed(&cluster, "web").await?);
    agent.stop().await?;
    cluster.stop().await;
    Ok(())
}
