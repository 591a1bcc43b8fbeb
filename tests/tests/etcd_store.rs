//! The object store on etcd, against real `etcd` processes: several stores
//! (root replicas) on one keyspace agree on resourceVersions (etcd's
//! revisions), refuse a stale one with a conflict whichever replica
//! answers, resume a watch on any replica from the version it last saw,
//! answer 410 Gone once etcd has compacted the history, and answer
//! "unavailable" rather than stale data without a quorum.

use std::time::Duration;

use anyhow::Result;
use relaymesh_apiserver::etcd::Etcd;
use relaymesh_apiserver::objects::{
    BackendError, ObjectError, ObjectKey, ObjectStore, WatchEventType,
};
use relaymesh_testbed::etcd::EtcdCluster;
use serde_json::{json, Value};

const PREFIX: &str = "/relaymesh-test/";

fn store(etcd: &Etcd) -> ObjectStore {
    ObjectStore::open_on(Box::new(etcd.clone())).expect("the store opens on etcd")
}

fn config_map(name: &str, data: &str) -> (ObjectKey, Value) {
    (
        ObjectKey::new("", "configmaps", Some("default"), name),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"value": data},
        }),
    )
}

fn version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|version| version.parse().ok())
        .expect("a numeric resourceVersion")
}

#[test]
fn replicas_agree_on_versions_and_refuse_stale_ones() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = EtcdCluster::start(dir.path(), 1)?;
    let etcd = cluster.connect(PREFIX)?;
    let (a, b) = (store(&etcd), store(&cluster.connect(PREFIX)?));

    let (key, object) = config_map("shared", "one");
    let created = a.create(&key, object.clone())?;
    let seen = b.get(&key)?.expect("replica b reads what a wrote");
    assert_eq!(
        seen, created,
        "both replicas serve the same object and version"
    );

    // An update through b at the version both saw wins; the same version
    // through a is now stale: 409 on either replica.
    let mut through_b = seen.clone();
    through_b["data"]["value"] = json!("two");
    let updated = b.update(&key, through_b)?;
    assert!(version(&updated) > version(&created));
    let mut stale = created.clone();
    stale["data"]["value"] = json!("three");
    match a.update(&key, stale) {
        Err(ObjectError::Conflict { stored, .. }) => assert_eq!(stored, version(&updated)),
        other => panic!("a stale resourceVersion must conflict, got {other:?}"),
    }
    // A create of an existing name conflicts across replicas too.
    assert!(matches!(
        b.create(&key, object),
        Err(ObjectError::AlreadyExists(_))
    ));
    // The version is etcd's revision: a list on either replica is at or
    // after it.
    let (listed, at) = a.list("", "configmaps", Some("default"))?;
    assert!(at >= version(&updated));
    assert_eq!(listed, vec![updated]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_on_any_replica_from_the_version_it_saw() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = EtcdCluster::start(dir.path(), 1)?;
    let a = store(&cluster.connect(PREFIX)?);
    let b = store(&cluster.connect(PREFIX)?);
    let mut live_on_b = b.subscribe();

    let (key, object) = config_map("watched", "one");
    let created = a.create(&key, object)?;
    let from = version(&created);
    let mut next = created.clone();
    next["data"]["value"] = json!("two");
    let updated = a.update(&key, next)?;
    let deleted = a.delete(&key)?;

    // b's live subscribers saw a's writes, in order.
    for expected in [&created, &updated] {
        let event = tokio::time::timeout(Duration::from_secs(10), live_on_b.recv()).await??;
        assert_eq!(&event.object, expected);
    }
    let event = tokio::time::timeout(Duration::from_secs(10), live_on_b.recv()).await??;
    assert_eq!(event.event_type, WatchEventType::Deleted);

    // A client that saw `from` on a resumes on b, and on a replica that
    // started only now (its history comes from etcd), missing nothing.
    let c = store(&cluster.connect(PREFIX)?);
    for replica in [&b, &c] {
        let (events, _) = replica.watch(from)?;
        let seen: Vec<(WatchEventType, u64)> = events
            .iter()
            .filter(|event| event.key == key)
            .map(|event| (event.event_type, event.resource_version))
            .collect();
        assert_eq!(
            seen,
            vec![
                (WatchEventType::Modified, version(&updated)),
                (WatchEventType::Deleted, version(&deleted)),
            ]
        );
    }
    Ok(())
}

#[test]
fn compacted_history_is_gone() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = EtcdCluster::start(dir.path(), 1)?;
    let etcd = cluster.connect(PREFIX)?;
    let a = store(&etcd);
    let (key, object) = config_map("compacted", "one");
    let created = a.create(&key, object)?;
    // Two changes after the one watched from: compacting at the last keeps
    // it, and drops the one the watch would start with.
    for value in ["two", "three"] {
        let mut next = created.clone();
        next["data"]["value"] = json!(value);
        next["metadata"]["resourceVersion"] = json!("");
        a.update(&key, next)?;
    }
    let now = etcd.check()?;
    let (mut client, _) = etcd.client();
    etcd.run(async move {
        client
            .compact(i64::try_from(now).unwrap_or(i64::MAX), None)
            .await
    })??;

    // A replica whose own history does not reach back asks etcd: gone.
    let fresh = store(&cluster.connect(PREFIX)?);
    match fresh.watch(version(&created)) {
        Err(ObjectError::Gone { requested, .. }) => assert_eq!(requested, version(&created)),
        other => panic!(
            "a compacted version must be gone, got {:?}",
            other.map(|(events, _)| events)
        ),
    }
    assert!(matches!(
        fresh.list_at("", "configmaps", Some("default"), version(&created)),
        Err(ObjectError::Gone { .. })
    ));
    Ok(())
}

#[test]
fn without_a_quorum_the_store_is_unavailable_then_recovers() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cluster = EtcdCluster::start(dir.path(), 3)?;
    let a = store(&cluster.connect(PREFIX)?);
    let (key, object) = config_map("quorum", "one");
    let created = a.create(&key, object)?;

    // One member down: nothing changes.
    cluster.kill(2)?;
    let mut next = created.clone();
    next["data"]["value"] = json!("two");
    let updated = a.update(&key, next)?;

    // Two down: reads and writes say so; no stale answer.
    cluster.kill(1)?;
    let mut lost = updated.clone();
    lost["data"]["value"] = json!("lost");
    for result in [a.update(&key, lost).map(|_| ()), a.get(&key).map(|_| ())] {
        match result {
            Err(ObjectError::Storage(BackendError::Unavailable(_))) => {}
            other => panic!("without a quorum the store must be unavailable, got {other:?}"),
        }
    }

    // Quorum back: the store answers again, the acknowledged write intact.
    cluster.restart(1)?;
    cluster.restart(2)?;
    cluster.wait_healthy()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let read = loop {
        match a.get(&key) {
            Ok(read) => break read,
            Err(error) if std::time::Instant::now() < deadline => {
                eprintln!("waiting for the store: {error}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => return Err(error.into()),
        }
    };
    // The acknowledged write is there. The refused one may be too: a 503
    // means "not known to be written", and etcd may commit a proposal its
    // leader took before it lost the quorum.
    let read = read.expect("the object is stored");
    let value = read["data"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        value == "two" || value == "lost",
        "the acknowledged write must survive, read {read}"
    );
    assert!(version(&read) >= version(&updated));
    Ok(())
}
