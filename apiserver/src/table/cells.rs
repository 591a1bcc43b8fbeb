//! What the cells of many kinds read alike: fields with kubectl's
//! defaults, pod templates' containers, label maps and selectors, and
//! durations as kubectl prints them. Each kind's module builds its own
//! cells from these, so they print the same way everywhere.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

pub(super) fn text(object: &Value, pointer: &str, default: &str) -> Value {
    json!(object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or(default))
}

pub(super) fn number(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn replicas(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

pub(super) fn count(object: &Value, pointer: &str) -> usize {
    object
        .pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |map| map.len())
}

/// The array at `pointer`, or none.
pub(super) fn array<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The `field` (`name`, `image`) of each container of the pod template
/// under `spec/template/spec`, joined with commas.
pub(super) fn containers(object: &Value, field: &str) -> String {
    containers_at(object, "/spec/template/spec", field)
}

/// The `field` of each container of the pod spec at `pod_spec`.
pub(super) fn containers_at(object: &Value, pod_spec: &str, field: &str) -> String {
    array(object, &format!("{pod_spec}/containers"))
        .iter()
        .filter_map(|container| container[field].as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// A label map as Go's `labels.FormatLabels`: `k=v` sorted by key,
/// `<none>` when empty.
pub(super) fn labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs.sort();
    pairs.join(",")
}

/// A `LabelSelector` as Go's `LabelSelectorAsSelector(...).String()`:
/// its requirements sorted by key (`k=v`, `k in (a,b)`, `k notin (a,b)`,
/// `k`, `!k`), joined with commas; empty when it has none.
pub(super) fn label_selector(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut requirements: Vec<(String, String)> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let value = value.as_str().unwrap_or_default();
            (key.clone(), format!("{key}={value}"))
        })
        .collect();
    for expression in selector["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = expression["values"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let text = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        };
        requirements.push((key.to_string(), text));
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// How long ago the timestamp `value` was, if it is one.
pub(super) fn since(value: Option<&Value>, now: SystemTime) -> Option<String> {
    let then = humantime::parse_rfc3339(value?.as_str()?).ok()?;
    Some(human_duration(
        now.duration_since(then).unwrap_or(Duration::ZERO),
    ))
}

/// The object's age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d`).
pub(super) fn age(object: &Value, now: SystemTime) -> String {
    let Some(created) = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|text| humantime::parse_rfc3339(text).ok())
    else {
        return "<unknown>".into();
    };
    human_duration(now.duration_since(created).unwrap_or(Duration::ZERO))
}

pub(super) fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86400);
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 if !seconds.is_multiple_of(60) => format!("{minutes}m{}s", seconds % 60),
        120..10_800 => format!("{minutes}m"),
        10_800..28_800 if minutes % 60 != 0 => format!("{hours}h{}m", minutes % 60),
        10_800..172_800 => format!("{hours}h"),
        172_800..691_200 if hours % 24 != 0 => format!("{days}d{}h", hours % 24),
        _ => format!("{days}d"),
    }
}
