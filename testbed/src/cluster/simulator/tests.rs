//! The simulator driven against a real object store, in virtual time.

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{sleep, Duration};

use super::*;

struct Running {
    store: ObjectStore,
    stop: watch::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start(options: SimulatorOptions) -> Running {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = sled::open(dir.path().join("store")).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
    let (stop, stopped) = watch::channel(());
    let task = tokio::spawn(run(store.clone(), "edge-1".into(), options, stopped));
    Running {
        store,
        stop,
        task,
        _dir: dir,
    }
}

fn key() -> ObjectKey {
    ObjectKey::new("apps", "deployments", Some("shop"), "web")
}

fn deployment(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    })
}

fn condition(object: &Value, kind: &str) -> Value {
    object["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

fn stored(running: &Running) -> Value {
    running
        .store
        .get(&key())
        .expect("readable")
        .expect("exists")
}

#[tokio::test(start_paused = true)]
async fn status_is_written_after_the_delay_and_only_once() {
    let running = start(SimulatorOptions::default());
    running
        .store
        .create(&key(), deployment("nginx:1.27"))
        .expect("created");
    sleep(Duration::from_millis(1500)).await;
    assert_eq!(stored(&running)["status"], Value::Null, "not before 2s");
    sleep(Duration::from_secs(1)).await;
    let object = stored(&running);
    assert_eq!(object["status"]["readyReplicas"], 2);
    assert_eq!(object["status"]["observedGeneration"], 1);
    assert_eq!(condition(&object, "Available")["status"], "True");

    // Its own write does not start another: the version stays put.
    let version = running.store.resource_version();
    sleep(Duration::from_secs(10)).await;
    assert_eq!(running.store.resource_version(), version);
    let _ = running.stop.send(());
    running.task.await.expect("stops");
}

#[tokio::test(start_paused = true)]
async fn a_spec_change_is_simulated_again_and_a_failing_image_fails() {
    let running = start(SimulatorOptions::default());
    running
        .store
        .create(&key(), deployment("nginx:1.27"))
        .expect("created");
    sleep(Duration::from_secs(3)).await;
    assert_eq!(condition(&stored(&running), "Available")["status"], "True");

    let mut changed = stored(&running);
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:fail");
    running.store.update(&key(), changed).expect("updated");
    sleep(Duration::from_millis(100)).await;
    let object = stored(&running);
    assert_eq!(object["metadata"]["generation"], 2);
    assert_eq!(object["status"]["observedGeneration"], 1, "not yet");
    sleep(Duration::from_secs(3)).await;
    let object = stored(&running);
    assert_eq!(object["status"]["observedGeneration"], 2);
    let available = condition(&object, "Available");
    assert_eq!(available["status"], "False");
    assert_eq!(available["reason"], "MinimumReplicasUnavailable");
    let _ = running.stop.send(());
    running.task.await.expect("stops");
}

#[tokio::test(start_paused = true)]
async fn workloads_present_at_start_and_jobs_are_simulated() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = sled::open(dir.path().join("store")).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
    store
        .create(&key(), deployment("nginx:1.27"))
        .expect("created");
    let job_key = ObjectKey::new("batch", "jobs", Some("shop"), "migrate");
    let job = json!({
        "metadata": {"name": "migrate", "namespace": "shop"},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "migrate:1"}]}}},
    });
    store.create(&job_key, job).expect("created");
    let (stop, stopped) = watch::channel(());
    let options = SimulatorOptions {
        delay: Duration::from_secs(5),
        ..SimulatorOptions::default()
    };
    let task = tokio::spawn(run(store.clone(), "edge-1".into(), options, stopped));
    sleep(Duration::from_secs(6)).await;
    let deployment = store.get(&key()).expect("readable").expect("exists");
    assert_eq!(deployment["status"]["availableReplicas"], 2);
    let job = store.get(&job_key).expect("readable").expect("exists");
    assert_eq!(job["status"]["succeeded"], 1);
    assert_eq!(condition(&job, "Complete")["status"], "True");

    // A deleted workload is forgotten.
    store.delete(&job_key).expect("deleted");
    sleep(Duration::from_secs(6)).await;
    assert!(store.get(&job_key).expect("readable").is_none());
    drop(stop);
    task.await.expect("stops when the sender is dropped");
}
