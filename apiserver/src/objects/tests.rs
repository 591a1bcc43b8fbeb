use serde_json::{json, Value};

use super::*;

fn open() -> (tempfile::TempDir, sled::Db, ObjectStore) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = sled::open(dir.path().join("db")).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("store opens");
    (dir, db, store)
}

fn deployment(name: &str) -> (ObjectKey, Value) {
    let key = ObjectKey::new("apps", "deployments", Some("default"), name);
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 1}});
    (key, object)
}

fn config_map(name: &str) -> (ObjectKey, Value) {
    let key = ObjectKey::new("", "configmaps", Some("default"), name);
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}});
    (key, object)
}

#[test]
fn initial_namespaces_exist() {
    let (_dir, _db, store) = open();
    let (namespaces, version) = store.list("", "namespaces", None).expect("lists");
    let names: Vec<_> = namespaces
        .iter()
        .map(|ns| ns["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["default", "kube-public", "kube-system"]);
    assert_eq!(version, 3);
    assert_eq!(namespaces[0]["status"]["phase"], "Active");
}

#[test]
fn create_sets_server_fields_and_refuses_duplicates() {
    let (_dir, _db, store) = open();
    let (key, object) = config_map("a");
    let created = store.create(&key, object.clone()).expect("creates");
    assert_eq!(created["metadata"]["resourceVersion"], "4");
    // kube-apiserver's ConfigMap strategy keeps no generation.
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert!(matches!(
        store.create(&key, object),
        Err(ObjectError::AlreadyExists(_))
    ));
    assert_eq!(store.get(&key).expect("reads"), Some(created));
}

#[test]
fn updates_check_the_resource_version_and_bump_generation() {
    let (_dir, _db, store) = open();
    let (key, object) = deployment("a");
    let created = store.create(&key, object).expect("creates");
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    assert!(matches!(
        store.update(&key, stale),
        Err(ObjectError::Conflict { stored: 4, .. })
    ));
    let mut changed = created.clone();
    changed["spec"]["replicas"] = json!(2);
    let updated = store.update(&key, changed).expect("updates");
    assert_eq!(updated["metadata"]["resourceVersion"], "5");
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    // Status changes keep the generation; no-op updates write nothing.
    let mut status = updated.clone();
    status["metadata"]["resourceVersion"] = json!("");
    status["status"] = json!({"x": 1});
    let with_status = store.update(&key, status).expect("updates");
    assert_eq!(with_status["metadata"]["generation"], 2);
    let again = store.update(&key, with_status.clone()).expect("updates");
    assert_eq!(again, with_status);
    assert_eq!(store.resource_version(), 6);
    let missing = ObjectKey::new("apps", "deployments", Some("default"), "b");
    assert!(matches!(
        store.update(&missing, json!({})),
        Err(ObjectError::NotFound(_))
    ));
}

#[test]
fn generation_is_kept_only_where_kube_apiserver_keeps_it() {
    let (_dir, _db, store) = open();
    // A ConfigMap has none, whatever a write changes; a zero a client
    // sends is no generation either.
    let (key, mut object) = config_map("plain");
    object["metadata"]["generation"] = json!(0);
    let created = store.create(&key, object).expect("creates");
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    let mut changed = created.clone();
    changed["data"]["a"] = json!("2");
    changed["metadata"]["generation"] = json!(7);
    let updated = store.update(&key, changed).expect("updates");
    assert!(updated["metadata"].get("generation").is_none(), "{updated}");
    // Custom resources and relaymesh's own kinds have one, as CRDs do.
    for (group, resource) in [("example.com", "widgets"), ("relaymesh.dev", "placements")] {
        let key = ObjectKey::new(group, resource, Some("default"), "w");
        let created = store
            .create(
                &key,
                json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
            )
            .expect("creates");
        assert_eq!(created["metadata"]["generation"], 1, "{created}");
        let mut changed = created.clone();
        changed["spec"]["size"] = json!(2);
        let updated = store.update(&key, changed).expect("updates");
        assert_eq!(updated["metadata"]["generation"], 2, "{updated}");
    }
    assert!(stamp::tracks_generation("apps", "deployments"));
    assert!(stamp::tracks_generation(
        "gateway.networking.k8s.io",
        "gateways"
    ));
    assert!(!stamp::tracks_generation("", "services"));
    assert!(!stamp::tracks_generation(
        "autoscaling",
        "horizontalpodautoscalers"
    ));
}

#[test]
fn dry_runs_write_nothing() {
    let (_dir, _db, store) = open();
    let (key, object) = config_map("a");
    let would = store.create_dry_run(&key, object).expect("would create");
    assert_eq!(would["metadata"]["name"], "a");
    assert_eq!(store.get(&key).expect("reads"), None);
    assert_eq!(store.resource_version(), 3);
}

#[test]
fn watch_replays_history_and_refuses_too_old_versions() {
    let (_dir, db, store) = open();
    let (key, object) = config_map("a");
    store.create(&key, object).expect("creates");
    let deleted = store.delete(&key).expect("deletes");
    assert_eq!(deleted["metadata"]["resourceVersion"], "5");
    let (events, mut receiver) = store.watch(3).expect("watchable");
    let types: Vec<_> = events.iter().map(|event| event.event_type).collect();
    assert_eq!(types, [WatchEventType::Added, WatchEventType::Deleted]);
    assert_eq!(store.events_since(4).expect("watchable").len(), 1);
    let (key_b, object_b) = config_map("b");
    store.create(&key_b, object_b).expect("creates");
    let event = receiver.try_recv().expect("an event");
    assert_eq!((event.key, event.resource_version), (key_b, 6));

    // After a restart the history is empty: older versions are gone.
    drop(store);
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("reopens");
    assert_eq!(store.resource_version(), 6);
    assert!(matches!(
        store.watch(5),
        Err(ObjectError::Gone {
            requested: 5,
            oldest: 6
        })
    ));
    assert!(store.watch(6).expect("current").0.is_empty());
}

#[test]
fn history_is_bounded() {
    let (_dir, _db, store) = open();
    let (key, object) = config_map("a");
    store.create(&key, object).expect("creates");
    for round in 0..HISTORY_LEN {
        let mut current = store.get(&key).expect("reads").expect("exists");
        current["data"]["a"] = json!(round.to_string());
        store.update(&key, current).expect("updates");
    }
    // Events 1 to 4 were dropped: a watch from 4 still sees all later ones.
    assert!(matches!(store.watch(3), Err(ObjectError::Gone { .. })));
    assert_eq!(store.events_since(4).expect("kept").len(), HISTORY_LEN);
}

#[test]
fn list_all_and_scoped_lists() {
    let (_dir, _db, store) = open();
    let (key, object) = config_map("a");
    store.create(&key, object).expect("creates");
    let other = ObjectKey::new("", "configmaps", Some("kube-system"), "a");
    store
        .create(&other, json!({"metadata": {}}))
        .expect("creates");
    assert_eq!(
        store.list("", "configmaps", None).expect("lists").0.len(),
        2
    );
    assert_eq!(
        store
            .list("", "configmaps", Some("kube-system"))
            .expect("lists")
            .0
            .len(),
        1
    );
    let all = store.list_all().expect("lists");
    assert_eq!(all.len(), 5);
    assert!(all.iter().any(|(k, _)| *k == other));
}

#[test]
fn uids_are_uuid_shaped() {
    let uid = new_uid();
    assert_eq!(uid.len(), 36);
    assert_eq!(uid.as_bytes()[14], b'4');
    assert_ne!(uid, new_uid());
}

#[test]
fn lists_at_an_older_version_undo_later_changes() {
    let (_dir, _db, store) = open();
    for name in ["b", "c", "d"] {
        let (key, object) = config_map(name);
        store.create(&key, object).expect("creates");
    }
    let (before, version) = store
        .list("", "configmaps", Some("default"))
        .expect("lists");
    let (a, object) = config_map("a");
    store.create(&a, object).expect("creates");
    let (b, _) = config_map("b");
    let mut changed = before[0].clone();
    changed["data"]["a"] = json!("2");
    store.update(&b, changed).expect("updates");
    let (c, _) = config_map("c");
    store.delete(&c).expect("deletes");
    store.delete(&b).expect("deletes");

    let then = store
        .list_at("", "configmaps", Some("default"), version)
        .expect("the history reaches back");
    assert_eq!(then, before, "the list as it was, byte for byte");
    let (now, current) = store
        .list("", "configmaps", Some("default"))
        .expect("lists");
    assert_eq!(
        store
            .list_at("", "configmaps", Some("default"), current)
            .expect("now"),
        now
    );
    assert!(matches!(
        store.list_at("", "configmaps", Some("default"), current + 1),
        Err(ObjectError::Gone { .. })
    ));
}

#[test]
fn lists_older_than_the_history_are_gone() {
    let (_dir, _db, store) = open();
    let (key, object) = config_map("a");
    let created = store.create(&key, object).expect("creates");
    let version = resource_version_of(&created);
    let mut object = created;
    for n in 0..=HISTORY_LEN {
        object["data"]["a"] = json!(n.to_string());
        object = store.update(&key, object).expect("updates");
    }
    assert!(matches!(
        store.list_at("", "configmaps", Some("default"), version),
        Err(ObjectError::Gone { .. })
    ));
}

fn resource_version_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|text| text.parse().ok())
        .unwrap_or_default()
}

#[test]
fn a_corrupt_object_is_quarantined_not_fatal() {
    let (_dir, db, store) = open();
    let (good, object) = config_map("good");
    store.create(&good, object).expect("creates");
    drop(store);
    // Written behind the store's back: JSON nested past serde_json's limit,
    // and bytes that are not JSON at all.
    let tree = db.open_tree("objects").expect("a tree");
    let deep = format!(
        "{{\"x\":{}{}}}",
        "{\"a\":".repeat(200),
        "{}".to_string() + &"}".repeat(200)
    );
    let (deep_key, _) = config_map("deep");
    tree.insert(deep_key.encode().as_bytes(), deep.as_bytes())
        .expect("plants");
    let (garbage_key, _) = deployment("garbage");
    tree.insert(garbage_key.encode().as_bytes(), &b"\xff not json"[..])
        .expect("plants");

    let store = ObjectStore::open(tree).expect("opens all the same");
    let (listed, _) = store.list("", "configmaps", None).expect("lists");
    let names: Vec<_> = listed
        .iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("good")]);
    assert_eq!(
        store.list_all().expect("lists").len(),
        4,
        "3 namespaces and good"
    );
    let quarantined: Vec<ObjectKey> = store
        .quarantined()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(quarantined, vec![deep_key.clone(), garbage_key.clone()]);
    let error = store.get(&deep_key).expect_err("cannot be read");
    assert!(
        error.to_string().contains("configmaps default/\"deep\""),
        "{error}"
    );
    assert!(matches!(
        store.update(&deep_key, json!({"metadata": {"name": "deep"}})),
        Err(ObjectError::Quarantined { .. })
    ));

    let mut receiver = store.subscribe();
    assert!(store.remove_quarantined(&deep_key).expect("removes"));
    let event = receiver.try_recv().expect("a deletion event");
    assert_eq!(
        (event.event_type, event.key),
        (WatchEventType::Deleted, deep_key.clone())
    );
    assert!(!store.remove_quarantined(&good).expect("not quarantined"));
    assert_eq!(store.get(&deep_key).expect("reads"), None);
    assert_eq!(store.quarantined().len(), 1);
}

#[test]
fn the_store_refuses_what_it_could_not_read_back() {
    let (_dir, _db, store) = open();
    let (key, mut object) = config_map("deep");
    let mut value = json!({});
    for _ in 0..200 {
        value = json!({ "a": value });
    }
    object["x"] = value;
    assert!(matches!(
        store.create(&key, object.clone()),
        Err(ObjectError::TooDeep(_))
    ));
    let (key, shallow) = config_map("deep");
    store.create(&key, shallow).expect("creates");
    assert!(matches!(
        store.update(&key, object),
        Err(ObjectError::TooDeep(_))
    ));
}
