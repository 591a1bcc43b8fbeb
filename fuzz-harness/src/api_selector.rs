//! The API's label and field selectors and query strings, as a list request
//! carries them (`?labelSelector=...&fieldSelector=...`): parsed, then
//! matched against an object whose labels and name come from the input.
//!
//! Input: the query string, then an object (JSON), separated by 0xff.
//! Properties: parsing is deterministic; matching an object is matching its
//! labels; an empty selector matches everything.

use crate::split_parts;
use relaymesh_apiserver::fuzzing::{query_parameter, FieldSelector, LabelSelector};
use serde_json::{Map, Value};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let [query, object] = split_parts(data, 2)[..] else {
        return;
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let object: Value = serde_json::from_slice(object).unwrap_or(Value::Null);
    // The raw text as a selector, and the selectors the query carries.
    check_label_selector(query, &object);
    check_field_selector(query, &object);
    if let Ok(Some(text)) = query_parameter(query, "labelSelector") {
        check_label_selector(&text, &object);
    }
    if let Ok(Some(text)) = query_parameter(query, "fieldSelector") {
        check_field_selector(&text, &object);
    }
}

fn check_label_selector(text: &str, object: &Value) {
    let Ok(selector) = LabelSelector::parse(text) else {
        return;
    };
    assert_eq!(LabelSelector::parse(text).ok(), Some(selector.clone()));
    let labels = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    assert_eq!(selector.matches_object(object), selector.matches(&labels));
    // An empty selector matches everything.
    if text.trim().is_empty() {
        assert!(selector.matches(&labels) && selector.matches(&Map::new()));
    }
}

fn check_field_selector(text: &str, object: &Value) {
    let Ok(selector) = FieldSelector::parse(text) else {
        return;
    };
    assert_eq!(FieldSelector::parse(text).ok(), Some(selector.clone()));
    let _ = selector.matches_object(object);
    if text.trim().is_empty() {
        assert!(selector.matches_object(object));
    }
}
