//! Hollow clusters through kube's own client: discovery, server-side apply,
//! get, list with selectors, patch, delete, watches, statuses on tokio's
//! paused clock, and CRDs.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    WatchEvent, WatchParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client};
use serde_json::{json, Value};

use super::*;
use crate::cluster::FailureRule;
use crate::hollow::state::HISTORY_LEN;

/// Built once for every test, as a process of hollow clusters does.
static DISCOVERY: LazyLock<Arc<Discovery>> = LazyLock::new(|| Arc::new(Discovery::builtin()));

const DELAY: Duration = Duration::from_secs(2);

fn cluster(name: &str) -> HollowCluster {
    let options = SimulatorOptions {
        delay: DELAY,
        nodes: 2,
        failures: vec![FailureRule {
            workload: "flaky".into(),
            fraction: 1.0,
        }],
    };
    HollowCluster::new(name, options, DISCOVERY.clone())
}

async fn api(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, _): (ApiResource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("the kind is served");
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn apply(api: &Api<DynamicObject>, object: &Value) -> kube::Result<DynamicObject> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply("relaymesh").force(),
        &Patch::Apply(object),
    )
    .await
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(name: &str, labels: Value, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop", "labels": labels},
           "data": {"key": value}})
}

fn deployment(name: &str, image: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "shop"},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "main", "image": image}]}}}})
}

fn value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).expect("an object serializes")
}

fn available(object: &Value) -> Option<&str> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|condition| condition["type"] == "Available")?["status"]
        .as_str()
}

#[tokio::test(start_paused = true)]
async fn serves_version_and_discovery() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.major, "1");
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery runs");
    assert!(discovery.has_group("apps"));
    let deployments = api(&client, "apps/v1", "Deployment", Some("default")).await;
    assert_eq!(
        deployments.resource_url(),
        "/apis/apps/v1/namespaces/default/deployments"
    );
    let labels = relaymesh_edge_agent::cluster::detect_labels(&client)
        .await
        .expect("labels are detected");
    assert_eq!(labels[relaymesh_edge_agent::cluster::NODES_LABEL], "2");
    assert_eq!(labels[relaymesh_edge_agent::cluster::VERSION_LABEL], "1.33");

    let missing = client
        .request_text(
            http::Request::get("/apis/nope/v1")
                .body(Vec::new())
                .expect("a request"),
        )
        .await;
    assert!(matches!(missing, Err(kube::Error::Api(status)) if status.code == 404));
}

#[tokio::test(start_paused = true)]
async fn applies_gets_lists_patches_and_deletes() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let maps = api(&client, "v1", "ConfigMap", Some("shop")).await;
    let refused = apply(&maps, &config_map("early", json!({}), "1")).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 404),
        "a namespaced object needs its namespace: {refused:?}"
    );

    let namespaces = api(&client, "v1", "Namespace", None).await;
    apply(&namespaces, &namespace("shop"))
        .await
        .expect("the namespace is applied");
    let web = apply(
        &maps,
        &config_map("web", json!({"app": "web", "tier": "front"}), "1"),
    )
    .await
    .expect("applied");
    apply(&maps, &config_map("db", json!({"app": "db"}), "1"))
        .await
        .expect("applied");
    let first = value(&web);
    assert_eq!(first["metadata"]["generation"], 1);
    assert!(first["metadata"]["uid"].is_string());
    assert!(first["metadata"]["creationTimestamp"].is_string());

    // Applying the same object again changes nothing but the version;
    // changing its data bumps the generation.
    let same = value(
        &apply(
            &maps,
            &config_map("web", json!({"app": "web", "tier": "front"}), "1"),
        )
        .await
        .expect("applied"),
    );
    assert_eq!(same["metadata"]["generation"], 1);
    assert_eq!(same["metadata"]["uid"], first["metadata"]["uid"]);
    let changed = value(
        &apply(
            &maps,
            &config_map("web", json!({"app": "web", "tier": "front"}), "2"),
        )
        .await
        .expect("applied"),
    );
    assert_eq!(changed["metadata"]["generation"], 2);
    let version = |object: &Value| {
        object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|text| text.parse::<u64>().ok())
            .unwrap_or_default()
    };
    assert!(version(&changed) > version(&same) && version(&same) > version(&first));

    let got = maps.get("web").await.expect("got");
    assert_eq!(value(&got)["data"]["key"], "2");
    let names = |list: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|item| item.metadata.name)
            .collect()
    };
    assert_eq!(
        names(
            maps.list(&ListParams::default().labels("app=web"))
                .await
                .expect("listed")
        ),
        ["web"]
    );
    assert_eq!(
        names(
            maps.list(&ListParams::default().labels("app"))
                .await
                .expect("listed")
        ),
        ["db", "web"]
    );
    assert_eq!(
        names(
            maps.list(&ListParams::default().fields("metadata.name=db"))
                .await
                .expect("listed")
        ),
        ["db"]
    );
    let everywhere = api(&client, "v1", "ConfigMap", None).await;
    assert_eq!(
        names(
            everywhere
                .list(&ListParams::default())
                .await
                .expect("listed")
        )
        .len(),
        2
    );

    // The agent's remove_label: a merge patch with a null.
    let patch = json!({"metadata": {"labels": {"tier": null}}});
    let patched = maps
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    assert_eq!(value(&patched)["metadata"]["labels"], json!({"app": "web"}));

    maps.delete("web", &DeleteParams::background())
        .await
        .expect("deleted");
    assert!(maps.get_opt("web").await.expect("asked").is_none());
    let again = maps.delete("web", &DeleteParams::background()).await;
    assert!(matches!(again, Err(kube::Error::Api(status)) if status.is_not_found()));

    let written: Vec<(Operation, &str, String)> = cluster
        .applied()
        .into_iter()
        .map(|record| {
            (
                record.operation,
                if record.kind == "Namespace" {
                    "ns"
                } else {
                    "cm"
                },
                record.name,
            )
        })
        .collect();
    assert_eq!(
        written,
        [
            (Operation::Apply, "ns", "shop".to_string()),
            (Operation::Apply, "cm", "web".into()),
            (Operation::Apply, "cm", "db".into()),
            (Operation::Apply, "cm", "web".into()),
            (Operation::Apply, "cm", "web".into()),
            (Operation::Patch, "cm", "web".into()),
            (Operation::Delete, "cm", "web".into()),
        ]
    );
    assert_eq!(
        cluster
            .object("", "ConfigMap", Some("shop"), "db")
            .map(|db| db["data"]["key"].clone()),
        Some(json!("1"))
    );
    assert_eq!(cluster.object("", "configmaps", Some("shop"), "web"), None);
}

#[tokio::test(start_paused = true)]
async fn watches_report_adds_changes_and_deletes() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let namespaces = api(&client, "v1", "Namespace", None).await;
    apply(&namespaces, &namespace("shop"))
        .await
        .expect("applied");
    let maps = api(&client, "v1", "ConfigMap", Some("shop")).await;
    apply(&maps, &config_map("before", json!({"app": "a"}), "1"))
        .await
        .expect("applied");

    // kube-runtime's watcher lists, then watches from the list's version.
    let everywhere = api(&client, "v1", "ConfigMap", None).await;
    let mut seen = watcher(everywhere, watcher::Config::default().labels("app"))
        .applied_objects()
        .boxed();
    let first = seen.try_next().await.expect("no error").expect("an object");
    assert_eq!(first.metadata.name.as_deref(), Some("before"));
    apply(&maps, &config_map("unlabelled", json!({}), "1"))
        .await
        .expect("applied");
    apply(&maps, &config_map("after", json!({"app": "b"}), "1"))
        .await
        .expect("applied");
    let next = seen.try_next().await.expect("no error").expect("an object");
    assert_eq!(
        next.metadata.name.as_deref(),
        Some("after"),
        "the unlabelled one is not selected"
    );

    // A plain watch from a version: the changes after it, in order.
    let from = cluster.resource_version().to_string();
    let mut events = maps
        .watch(&WatchParams::default().timeout(60), &from)
        .await
        .expect("a watch")
        .boxed();
    apply(&maps, &config_map("after", json!({"app": "b"}), "2"))
        .await
        .expect("applied");
    maps.delete("before", &DeleteParams::background())
        .await
        .expect("deleted");
    match events.try_next().await.expect("no error") {
        Some(WatchEvent::Modified(object)) => assert_eq!(value(&object)["data"]["key"], "2"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    match events.try_next().await.expect("no error") {
        Some(WatchEvent::Deleted(object)) => {
            assert_eq!(object.metadata.name.as_deref(), Some("before"))
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    // At its timeout the watch ends with a bookmark of the current version.
    match events.try_next().await.expect("no error") {
        Some(WatchEvent::Bookmark(bookmark)) => {
            assert_eq!(
                bookmark.metadata.resource_version,
                cluster.resource_version().to_string()
            )
        }
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    assert!(events.try_next().await.expect("no error").is_none());
    assert!(
        cluster.inner.lock().watchers.len() <= 1,
        "the ended watch is forgotten"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_a_forgotten_version_expires() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let namespaces = api(&client, "v1", "Namespace", None).await;
    let start = cluster.resource_version().to_string();
    for index in 0..(HISTORY_LEN + 1) {
        apply(&namespaces, &namespace(&format!("ns-{index}")))
            .await
            .expect("applied");
    }
    let mut events = namespaces
        .watch(&WatchParams::default(), &start)
        .await
        .expect("a watch")
        .boxed();
    match events.try_next().await.expect("no error") {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn workloads_become_ready_after_the_delay_and_failing_images_fail() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    apply(
        &api(&client, "v1", "Namespace", None).await,
        &namespace("shop"),
    )
    .await
    .expect("applied");
    let deployments = api(&client, "apps/v1", "Deployment", Some("shop")).await;
    let applied = apply(&deployments, &deployment("web", "nginx:1.27", 3))
        .await
        .expect("applied");
    assert_eq!(
        available(&value(&applied)),
        None,
        "no status before the delay"
    );
    apply(&deployments, &deployment("broken", "registry/fail:1", 1))
        .await
        .expect("applied");
    apply(&deployments, &deployment("flaky", "nginx:1.27", 1))
        .await
        .expect("applied");
    let mut events = deployments
        .watch(
            &WatchParams::default(),
            &cluster.resource_version().to_string(),
        )
        .await
        .expect("a watch")
        .boxed();

    tokio::time::sleep(DELAY - Duration::from_millis(10)).await;
    let web = cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .expect("stored");
    assert_eq!(
        available(&web),
        None,
        "still no status just before the delay"
    );
    let mut ready = Vec::new();
    while ready.len() < 3 {
        match events.try_next().await.expect("no error") {
            Some(WatchEvent::Modified(object)) => {
                let object = value(&object);
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                ready.push((name, available(&object).unwrap_or_default().to_string()));
            }
            other => panic!("expected MODIFIED, got {other:?}"),
        }
    }
    ready.sort();
    assert_eq!(
        ready,
        [
            ("broken".to_string(), "False".to_string()),
            ("flaky".into(), "False".into()),
            ("web".into(), "True".into())
        ]
    );
    let web = cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .expect("stored");
    assert_eq!(web["status"]["readyReplicas"], 3);
    assert_eq!(web["status"]["observedGeneration"], 1);

    // A new generation is observed a delay later; the old status stays till then.
    apply(&deployments, &deployment("web", "nginx:1.28", 3))
        .await
        .expect("applied");
    let web = cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .expect("stored");
    assert_eq!(
        (
            web["metadata"]["generation"].as_i64(),
            web["status"]["observedGeneration"].as_i64()
        ),
        (Some(2), Some(1))
    );
    // Just past the delay: the timer and this test wake at the same instant
    // otherwise, in either order.
    tokio::time::sleep(DELAY + Duration::from_millis(1)).await;
    let web = cluster
        .object("apps", "Deployment", Some("shop"), "web")
        .expect("stored");
    assert_eq!(web["status"]["observedGeneration"], 2);
    assert!(
        !cluster.inner.lock().timer_running,
        "no timer once nothing is due"
    );
}

#[tokio::test(start_paused = true)]
async fn definitions_are_established_and_serve_their_kind_here_only() {
    let cluster = cluster("edge-1");
    let other = self::cluster("edge-2");
    let client = cluster.client();
    let definition = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}});
    let definitions = api(
        &client,
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
    )
    .await;
    apply(&definitions, &definition).await.expect("applied");
    // The agent's wait_established.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let established = tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(
            crds,
            "widgets.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("in time")
    .expect("no error");
    assert!(established.is_some());

    apply(
        &api(&client, "v1", "Namespace", None).await,
        &namespace("shop"),
    )
    .await
    .expect("applied");
    let widgets = api(&client, "example.com/v1", "Widget", Some("shop")).await;
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "gear", "namespace": "shop"}, "spec": {"size": 3}});
    apply(&widgets, &widget).await.expect("applied");
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    assert!(
        kube::discovery::pinned_kind(&other.client(), &gvk)
            .await
            .is_err(),
        "not served on another cluster"
    );
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery runs");
    assert!(discovery.has_group("example.com"));

    definitions
        .delete("widgets.example.com", &DeleteParams::background())
        .await
        .expect("deleted");
    assert!(cluster
        .object("example.com", "Widget", Some("shop"), "gear")
        .is_none());
    assert!(
        kube::discovery::pinned_kind(&client, &gvk).await.is_err(),
        "no longer served"
    );
}

#[tokio::test(start_paused = true)]
async fn deleting_a_namespace_deletes_what_is_in_it() {
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let namespaces = api(&client, "v1", "Namespace", None).await;
    apply(&namespaces, &namespace("shop"))
        .await
        .expect("applied");
    let maps = api(&client, "v1", "ConfigMap", Some("shop")).await;
    apply(&maps, &config_map("web", json!({}), "1"))
        .await
        .expect("applied");
    let mut agent = relaymesh_edge_agent::applier::Applier::new(client.clone());
    assert!(!agent.namespace_is_empty("shop").await.expect("asked"));
    assert!(agent.namespace_is_empty("default").await.expect("asked"));
    namespaces
        .delete("shop", &DeleteParams::background())
        .await
        .expect("deleted");
    assert!(cluster
        .object("", "ConfigMap", Some("shop"), "web")
        .is_none());
    assert!(cluster.object("", "Namespace", None, "shop").is_none());
    assert!(cluster.object("", "Namespace", None, "default").is_some());
}

/// The agent's applier asks for a namespace once, not on every pass; it
/// asks again once a write into it failed or it deleted it.
#[tokio::test(start_paused = true)]
async fn a_found_namespace_is_asked_for_again_only_after_a_failed_write() {
    use relaymesh_edge_agent::applier::{namespace_ref, Applier};
    use relaymesh_edge_agent::manifest::{Manifest, ObjectRef};
    let cluster = cluster("edge-1");
    let client = cluster.client();
    let mut agent = Applier::new(client.clone());
    assert!(
        agent.ensure_namespace("shop").await.expect("asked"),
        "created"
    );
    let namespaces = api(&client, "v1", "Namespace", None).await;
    namespaces
        .delete("shop", &DeleteParams::background())
        .await
        .expect("deleted behind the agent's back");
    assert!(!agent.ensure_namespace("shop").await.expect("known"));
    assert!(
        cluster.object("", "Namespace", None, "shop").is_none(),
        "not asked for again, so not created again yet"
    );
    let web = Manifest {
        reference: ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        },
        body: config_map("web", json!({}), "1"),
        create_only: false,
    };
    assert!(agent.apply(&web).await.is_err(), "its namespace is gone");
    assert!(
        agent.ensure_namespace("shop").await.expect("asked"),
        "created again"
    );
    agent.apply(&web).await.expect("applied");
    agent
        .delete(&namespace_ref("shop"))
        .await
        .expect("deleted by the agent");
    assert!(
        agent.ensure_namespace("shop").await.expect("asked"),
        "and again"
    );
    assert!(cluster.object("", "Namespace", None, "shop").is_some());
}

/// A namespace the agent needs is made with one request, a create, and
/// one that exists is not written to.
#[tokio::test(start_paused = true)]
async fn a_needed_namespace_is_created_by_one_request() {
    use relaymesh_edge_agent::applier::{Applier, CREATED_BY_LABEL};
    let cluster = cluster("edge-1");
    let mut agent = Applier::new(cluster.client());
    assert!(agent.ensure_namespace("shop").await.expect("asked"));
    let writes = cluster.applied();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].operation, Operation::Create);
    assert_eq!(
        (writes[0].kind.as_str(), writes[0].name.as_str()),
        ("Namespace", "shop")
    );
    let shop = cluster.object("", "Namespace", None, "shop").expect("made");
    assert_eq!(shop["metadata"]["labels"][CREATED_BY_LABEL], "relaymesh");
    let mut another = Applier::new(cluster.client());
    assert!(
        !another.ensure_namespace("shop").await.expect("asked"),
        "found, not created"
    );
    assert!(!another.ensure_namespace("default").await.expect("asked"));
    assert_eq!(cluster.applied().len(), 1, "nothing written for those");
}

/// Ten thousand idle clusters fit in one process (`testbed bench` measures
/// how much each takes).
#[test]
fn ten_thousand_idle_clusters() {
    let clusters: Vec<HollowCluster> = (0..10_000)
        .map(|index| cluster(&format!("edge-{index}")))
        .collect();
    assert_eq!(clusters.len(), 10_000);
    assert!(clusters.iter().all(|cluster| cluster.applied().is_empty()));
    assert!(
        Arc::strong_count(&*DISCOVERY) > 10_000,
        "the discovery is shared"
    );
}
