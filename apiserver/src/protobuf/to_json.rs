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

use super::special::Special;
use super::{go_time, ProtobufError, Schema, MAGIC, MAX_EMBEDDED};

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
        return self::special(special, schema, message, depth);
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

/// The JSON of a special message, or `None` when JSON leaves it out (a
/// zero time, empty raw JSON, an empty union).
fn special(
    special: Special,
    schema: &Schema,
    message: &DynamicMessage,
    depth: u8,
) -> Result<Option<Value>, ProtobufError> {
    let has = |name: &str| message.has_field_by_name(name);
    let field = |name: &str| message.get_field_by_name(name);
    let int = |name: &str| field(name).and_then(|value| value.as_i64()).unwrap_or(0);
    let int32 = |name: &str| field(name).and_then(|value| value.as_i32()).unwrap_or(0);
    let text = |name: &str| {
        field(name)
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let schema_field = || -> Result<Option<Value>, ProtobufError> {
        match field("schema").as_deref() {
            Some(Proto::Message(inner)) if has("schema") => self::message(schema, inner, depth),
            _ => Ok(None),
        }
    };
    let list = |name: &str| match field(name).as_deref() {
        Some(Proto::List(items)) => items.clone(),
        _ => Vec::new(),
    };
    Ok(match special {
        // Go's Time and MicroTime write a zero time as an empty message.
        Special::Time | Special::MicroTime if !has("seconds") && !has("nanos") => None,
        Special::Time => Some(Value::String(time(int("seconds"), None)?)),
        Special::MicroTime => {
            let nanos = u32::try_from(int32("nanos"))
                .ok()
                .filter(|nanos| *nanos < 1_000_000_000)
                .ok_or_else(|| ProtobufError::Malformed("nanoseconds out of range".into()))?;
            Some(Value::String(time(int("seconds"), Some(nanos / 1000))?))
        }
        Special::Duration => Some(Value::String(go_time::duration(int("duration")))),
        Special::Quantity => has("string").then(|| Value::String(text("string"))),
        Special::IntOrString if int("type") == 1 => Some(Value::String(text("strVal"))),
        Special::IntOrString => Some(Value::from(int32("intVal"))),
        Special::RawJson {
            field: name,
            may_be_protobuf,
        } => {
            let raw = field(name)
                .and_then(|value| value.as_bytes().cloned())
                .unwrap_or_default();
            if raw.is_empty() {
                None
            } else if may_be_protobuf && raw.starts_with(MAGIC) {
                if depth >= MAX_EMBEDDED {
                    return Err(ProtobufError::Malformed(
                        "objects nested too deep in RawExtensions".into(),
                    ));
                }
                Some(super::decode_embedded(&raw, depth + 1)?)
            } else {
                Some(
                    serde_json::from_slice(&raw).map_err(|error| {
                        ProtobufError::Malformed(format!("embedded JSON: {error}"))
                    })?,
                )
            }
        }
        Special::SchemaOrArray => {
            let items = list("jSONSchemas");
            if items.is_empty() {
                schema_field()?
            } else {
                let mut schemas = Vec::with_capacity(items.len());
                for item in &items {
                    if let Proto::Message(item) = item {
                        schemas.push(self::message(schema, item, depth)?.unwrap_or(Value::Null));
                    }
                }
                Some(Value::Array(schemas))
            }
        }
        Special::SchemaOrBool => match schema_field()? {
            Some(inner) => Some(inner),
            None => Some(Value::Bool(
                field("allows")
                    .and_then(|value| value.as_bool())
                    .unwrap_or(false),
            )),
        },
        Special::SchemaOrStringArray => {
            let names = list("property");
            if names.is_empty() {
                schema_field()?
            } else {
                let names = names
                    .iter()
                    .filter_map(|name| name.as_str().map(|name| Value::String(name.to_string())))
                    .collect();
                Some(Value::Array(names))
            }
        }
    })
}

/// RFC 3339 text of a time, or an error for a year Go would not write.
fn time(seconds: i64, micros: Option<u32>) -> Result<String, ProtobufError> {
    go_time::rfc3339(seconds, micros)
        .ok_or_else(|| ProtobufError::Malformed(format!("time {seconds} is out of range")))
}
