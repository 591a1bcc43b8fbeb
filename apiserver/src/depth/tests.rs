use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::objects::{ObjectKey, ObjectStore};

/// `{"x": {"a": {"a": ...}}}`, `levels` maps deep.
fn nested(levels: usize) -> Value {
    let mut value = json!({});
    for _ in 1..levels.max(2) - 1 {
        value = json!({ "a": value });
    }
    json!({ "x": value })
}

#[test]
fn sixty_four_levels_pass_and_sixty_five_are_refused_at_their_path() {
    for (levels, accepted) in [(1, true), (64, true), (65, false), (200, false)] {
        let value = nested(levels);
        let bytes = serde_json::to_vec(&value).expect("encodes");
        assert_eq!(check_value(&value).is_ok(), accepted, "{levels} levels");
        assert_eq!(check_json(&bytes).is_ok(), accepted, "{levels} levels");
    }
    let error = check_json(serde_json::to_vec(&nested(65)).expect("encodes").as_slice())
        .expect_err("too deep");
    assert_eq!(error.path, format!(".x{}", ".a".repeat(63)));
    assert_eq!(
        check_value(&nested(65)).expect_err("too deep").path,
        error.path
    );
}

#[test]
fn paths_name_list_indexes_and_are_cut_short() {
    let bytes = format!("{{\"a\": [1, {{\"b\": {}", "[".repeat(100));
    let error = check_json(bytes.as_bytes()).expect_err("too deep");
    assert!(error.path.starts_with(".a[1].b[0][0]"), "{}", error.path);
    let long_keys = "{\"a-rather-long-key\":".repeat(100);
    let error = check_json(long_keys.as_bytes()).expect_err("too deep");
    assert!(
        error.path.starts_with(".a-rather-long-key.a-rather"),
        "{}",
        error.path
    );
    assert!(error.path.ends_with("..."), "{}", error.path);
    assert!(error.path.len() < 250);
}

#[test]
fn strings_and_escapes_do_not_count() {
    let text = format!("{{\"a\": \"{}\\\"{}\"}}", "[".repeat(100), "{".repeat(100));
    assert_eq!(check_json(text.as_bytes()), Ok(()));
}

#[test]
fn a_million_brackets_are_refused_without_recursion() {
    let deep = "[".repeat(1_000_000);
    assert!(check_json(deep.as_bytes()).is_err());
}

#[test]
fn managed_fields_count_from_their_own_root() {
    let mut object = nested(64);
    let fields = nested(64);
    object["metadata"] = json!({"managedFields": [{"manager": "m", "fieldsV1": fields}]});
    assert_eq!(check_value(&object), Ok(()));
    let bytes = serde_json::to_vec(&object).expect("encodes");
    assert_eq!(check_json(&bytes), Ok(()));
    object["metadata"]["managedFields"][0]["fieldsV1"] = nested(65);
    assert!(check_value(&object).is_err());
    let bytes = serde_json::to_vec(&object).expect("encodes");
    assert!(check_json(&bytes).is_err());
}

fn store() -> (tempfile::TempDir, ObjectStore) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sled::open(dir.path()).expect("sled opens");
    let store = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
    (dir, store)
}

/// A JSON value of nested maps and lists, up to `depth` deep.
fn any_value(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        "[a-z]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 256, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the store accepts, it gives back (get, list, a reopen),
    /// and it accepts exactly what the depth check passes.
    #[test]
    fn what_the_store_accepts_it_reads_back(spec in any_value(80), chain in 0usize..140) {
        let (_dir, store) = store();
        let mut spec = spec;
        for _ in 0..chain {
            spec = json!({ "a": spec });
        }
        let object = json!({"metadata": {"name": "x", "namespace": "default"}, "spec": spec});
        let key = ObjectKey::new("", "configmaps", Some("default"), "x");
        let accepted = store.create(&key, object.clone());
        prop_assert_eq!(accepted.is_ok(), check_value(&object).is_ok());
        if let Ok(stored) = accepted {
            prop_assert_eq!(store.get(&key).expect("reads").expect("found"), stored.clone());
            let (listed, _) = store.list("", "configmaps", Some("default")).expect("lists");
            prop_assert_eq!(listed, vec![stored.clone()]);
            let mut deeper = stored;
            deeper["spec"] = nested(MAX_DEPTH);
            prop_assert!(store.update(&key, deeper).is_err());
        }
    }
}
