//! The API's request bodies: what a create or update does with a body before
//! it stores it (decoding JSON, YAML or Kubernetes protobuf by content type,
//! validation against the URL, completing CRDs, Namespaces and Secrets), the
//! resources a stored CRD adds, and `JoinToken` requests.
//!
//! Input: one byte choosing the content type and the URL's namespace and
//! name, one choosing the kind (an index into `kinds()`), then the body.

use relaymesh_apiserver::fuzzing::{prepare_write, served_by_definition};
use relaymesh_root::api::fuzzing::join_token_request;
use serde_json::Value;

const CONTENT_TYPES: [&str; 4] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let [choice, kind_index, body @ ..] = data else {
        return;
    };
    let (choice, kind_index) = (*choice, usize::from(*kind_index));
    let content_type = CONTENT_TYPES[usize::from(choice & 0x3)];
    let namespace = (choice & 0x4 != 0).then_some("default");
    let name = (choice & 0x8 != 0).then_some("fuzz");
    for strict in [false, true] {
        let Ok(object) = prepare_write(kind_index, body, content_type, namespace, name, strict)
        else {
            continue;
        };
        let stored_name = object.pointer("/metadata/name").and_then(Value::as_str);
        assert!(
            stored_name.is_some_and(|stored| !stored.is_empty()),
            "an object without a name validated: {object}"
        );
        if let Some(name) = name {
            assert_eq!(stored_name, Some(name));
        }
        // Within the depth limit, so the store takes it and reads it back.
        assert!(
            relaymesh_apiserver::depth::check_value(&object).is_ok(),
            "an object deeper than the limit validated"
        );
        // What is stored is JSON, and reads back as itself.
        let bytes = serde_json::to_vec(&object).expect("a Value serializes");
        let read: Value = serde_json::from_slice(&bytes).expect("stored JSON reads");
        assert_eq!(read, object);
        // A CRD that is stored adds resources only with a group and a
        // plural to serve them under.
        if object["kind"] == "CustomResourceDefinition" {
            for (group, version, plural) in served_by_definition(&object) {
                assert!(
                    !group.is_empty() && !plural.is_empty(),
                    "{group}/{version} {plural}"
                );
            }
        }
    }
    if let Ok(request) = join_token_request(body) {
        assert!(relaymesh_protocol::name::validate(&request.name).is_ok());
        assert!(!request.ttl.is_zero());
    }
}
