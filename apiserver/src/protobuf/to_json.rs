//! Protobuf to JSON: a decoded message to the JSON Kubernetes writes for
//! it. Only the fields the message carries are written; an empty list or
//! map is left out, as Go's `omitempty` leaves them out, and so is the zero
//! of every field `apiserver/proto/omitempty.tsv` lists: Go's generated code
//! writes every non-pointer field, zeros included (`nodePort: 0`,
//! `imagePullPolicy: ""`), where kube-apiserver's JSON leaves an
//! `omitempty` field's zero out. Other zeros stay: a pointer's `0`
//! (`replicas: 0`) is a value, and so is a zero on a field without
//! `omitempty` (`containerPort: 0`).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use prost_reflect::{DynamicMessage, MapKey, ReflectMessage as _, Value as Proto};
use serde_json::{Map, Value};

use super::special::{self, Special};
use super::{ProtobufError, Schema};

/// The JSON of `message`, or `None` for a value JSON leaves out (a zero
/// `Time`, an empty `RawExtension`). `depth` counts the protobuf objects
/// this one is embedded in.
pub(super) fn message(
    schema: &Schema,
    message: &DynamicMessage,
    depth: u8,
) -> Result<Option<Value>, ProtobufError> {
    let descriptor = message.descriptor();
    if let Some(special) = Special::of(&descriptor) {
        return special::to_json(special, schema, message, depth);
    }
    if schema.is_list(&descriptor) {
        let items = match message.get_field_by_name("items").as_deref() {
            Some(Proto::List(items)) => list(schema, items, depth)?,
            _ => Vec::new(),
        };
        return Ok(Some(Value::Array(items)));
    }
    let mut object = Map::new();
    for (field, value) in message.fields() {
        if schema.is_zero_unset(&field) && value.is_default_for_field(&field) {
            continue;
        }
        if schema.is_inlined(&field) {
            if let Some(Value::Object(inner)) = single(schema, value, depth)? {
                object.extend(inner);
            }
            continue;
        }
        let json = match value {
            Proto::List(items) if items.is_empty() => None,
            Proto::List(items) => Some(Value::Array(list(schema, items, depth)?)),
            Proto::Map(entries) if entries.is_empty() => None,
            Proto::Map(entries) => {
                let mut map = Map::new();
                for (key, value) in entries {
                    let value = single(schema, value, depth)?.unwrap_or(Value::Null);
                    map.insert(map_key(key), value);
                }
                Some(Value::Object(map))
            }
            value => single(schema, value, depth)?,
        };
        if let Some(json) = json {
            object.insert(schema.json_name(&field).to_string(), json);
        }
    }
    Ok(Some(Value::Object(object)))
}

/// A JSON number as Go writes a float: integral values without a fraction.
pub(super) fn number(value: f64) -> Result<Value, ProtobufError> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() < EXACT {
        // Exact: an integral float below 2^53 is an i64.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::from(value as i64));
    }
    serde_json::Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| ProtobufError::Malformed(format!("{value} has no JSON form")))
}

fn list(schema: &Schema, items: &[Proto], depth: u8) -> Result<Vec<Value>, ProtobufError> {
    items
        .iter()
        .map(|item| Ok(single(schema, item, depth)?.unwrap_or(Value::Null)))
        .collect()
}

/// One value that is not itself a repeated field or a map.
fn single(schema: &Schema, value: &Proto, depth: u8) -> Result<Option<Value>, ProtobufError> {
    Ok(Some(match value {
        Proto::Bool(value) => Value::Bool(*value),
        Proto::I32(value) | Proto::EnumNumber(value) => Value::from(*value),
        Proto::I64(value) => Value::from(*value),
        Proto::U32(value) => Value::from(*value),
        Proto::U64(value) => Value::from(*value),
        Proto::F32(value) => number(f64::from(*value))?,
        Proto::F64(value) => number(*value)?,
        Proto::String(value) => Value::String(value.clone()),
        Proto::Bytes(value) => Value::String(STANDARD.encode(value)),
        Proto::Message(value) => return message(schema, value, depth),
        Proto::List(items) => Value::Array(list(schema, items, depth)?),
        Proto::Map(_) => return Err(ProtobufError::Malformed("a map inside a map".into())),
    }))
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::String(key) => key.clone(),
        MapKey::Bool(key) => key.to_string(),
        MapKey::I32(key) => key.to_string(),
        MapKey::I64(key) => key.to_string(),
        MapKey::U32(key) => key.to_string(),
        MapKey::U64(key) => key.to_string(),
    }
}
