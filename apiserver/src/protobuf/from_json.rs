//! JSON to protobuf: a Kubernetes JSON object to the message its kind's
//! proto definition describes. Whatever the message cannot carry is
//! [`ProtobufError::Unrepresentable`], so the caller can answer in JSON.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value as Proto,
};
use serde_json::{Map, Value};

use super::special::Special;
use super::{go_time, ProtobufError, Schema};

/// The message of type `descriptor` that `json` is the JSON form of.
/// JSON `null`s are left out, as Go reads them as zero values; `apiVersion`
/// and `kind` where the message has no such fields are Go's `TypeMeta`,
/// which protobuf leaves to the envelope.
pub(super) fn message(
    schema: &Schema,
    descriptor: &MessageDescriptor,
    json: &Value,
) -> Result<DynamicMessage, ProtobufError> {
    if let Some(special) = Special::of(descriptor) {
        return self::special(special, schema, descriptor, json);
    }
    let mut message = DynamicMessage::new(descriptor.clone());
    if schema.is_list(descriptor) {
        let field = descriptor
            .get_field_by_name("items")
            .ok_or_else(|| unrepresentable(descriptor.full_name(), "has no items"))?;
        let items = field_value(schema, &field, json)?;
        set(&mut message, &field, items)?;
        return Ok(message);
    }
    let Value::Object(object) = json else {
        return Err(unrepresentable(descriptor.full_name(), "needs an object"));
    };
    let mut inlined: Vec<(FieldDescriptor, Map<String, Value>)> = descriptor
        .fields()
        .filter(|field| schema.is_inlined(field))
        .map(|field| (field, Map::new()))
        .collect();
    for (key, value) in object {
        if value.is_null() {
            continue;
        }
        if let Some(field) = schema
            .field(descriptor, key)
            .filter(|field| !schema.is_inlined(field))
        {
            let value = field_value(schema, &field, value)?;
            set(&mut message, &field, value)?;
        } else if let Some((_, part)) = inlined
            .iter_mut()
            .find(|(field, _)| accepts(schema, field, key))
        {
            part.insert(key.clone(), value.clone());
        } else if key != "apiVersion" && key != "kind" {
            return Err(unrepresentable(
                descriptor.full_name(),
                &format!("has no field {key:?}"),
            ));
        }
    }
    for (field, part) in inlined {
        if let (false, Kind::Message(inner)) = (part.is_empty(), field.kind()) {
            let inner = self::message(schema, &inner, &Value::Object(part))?;
            set(&mut message, &field, Proto::Message(inner))?;
        }
    }
    Ok(message)
}

/// The value of `field` (repeated, a map or single) that `json` is.
pub(super) fn field_value(
    schema: &Schema,
    field: &FieldDescriptor,
    json: &Value,
) -> Result<Proto, ProtobufError> {
    let kind = field.kind();
    if field.is_map() {
        let (Value::Object(entries), Kind::Message(entry)) = (json, &kind) else {
            return Err(unrepresentable(field.full_name(), "needs an object"));
        };
        let value_kind = entry.map_entry_value_field().kind();
        let mut map = HashMap::with_capacity(entries.len());
        for (key, value) in entries {
            let key = match entry.map_entry_key_field().kind() {
                Kind::String => MapKey::String(key.clone()),
                _ => {
                    return Err(unrepresentable(
                        field.full_name(),
                        "has keys that are not strings",
                    ))
                }
            };
            map.insert(key, single(schema, field, &value_kind, value)?);
        }
        Ok(Proto::Map(map))
    } else if field.is_list() {
        let Value::Array(items) = json else {
            return Err(unrepresentable(field.full_name(), "needs a list"));
        };
        let items = items
            .iter()
            .map(|item| single(schema, field, &kind, item))
            .collect::<Result<_, _>>()?;
        Ok(Proto::List(items))
    } else {
        single(schema, field, &kind, json)
    }
}

/// Sets `field` of `message`, checking the value's type.
pub(super) fn set(
    message: &mut DynamicMessage,
    field: &FieldDescriptor,
    value: Proto,
) -> Result<(), ProtobufError> {
    message
        .try_set_field(field, value)
        .map_err(|error| unrepresentable(field.full_name(), &error.to_string()))
}

pub(super) fn unrepresentable(what: &str, problem: &str) -> ProtobufError {
    ProtobufError::Unrepresentable(format!("{what} {problem}"))
}

/// Whether JSON's `key` is a field of `field`'s inlined message.
fn accepts(schema: &Schema, field: &FieldDescriptor, key: &str) -> bool {
    let Kind::Message(inner) = field.kind() else {
        return false;
    };
    let accepted = inner.fields().any(|field| {
        if schema.is_inlined(&field) {
            accepts(schema, &field, key)
        } else {
            schema.json_name(&field) == key
        }
    });
    accepted
}

/// One element of `field` (of type `kind`) from `json`.
fn single(
    schema: &Schema,
    field: &FieldDescriptor,
    kind: &Kind,
    json: &Value,
) -> Result<Proto, ProtobufError> {
    let value = match kind {
        Kind::Message(descriptor) => return message(schema, descriptor, json).map(Proto::Message),
        Kind::Bool => json.as_bool().map(Proto::Bool),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => json
            .as_i64()
            .and_then(|value| i32::try_from(value).ok())
            .map(Proto::I32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => json.as_i64().map(Proto::I64),
        Kind::Uint32 | Kind::Fixed32 => json
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .map(Proto::U32),
        Kind::Uint64 | Kind::Fixed64 => json.as_u64().map(Proto::U64),
        // Narrowing is what a float field is for.
        #[allow(clippy::cast_possible_truncation)]
        Kind::Float => json.as_f64().map(|value| Proto::F32(value as f32)),
        Kind::Double => json.as_f64().map(Proto::F64),
        Kind::String => json.as_str().map(|value| Proto::String(value.to_string())),
        Kind::Bytes => json
            .as_str()
            .and_then(|value| STANDARD.decode(value).ok())
            .map(|value| Proto::Bytes(value.into())),
        Kind::Enum(_) => json
            .as_i64()
            .and_then(|value| i32::try_from(value).ok())
            .map(Proto::EnumNumber),
    };
    value.ok_or_else(|| {
        let expected = match kind {
            Kind::Bool => "a boolean",
            Kind::String => "a string",
            Kind::Bytes => "base64 text",
            Kind::Float | Kind::Double => "a number",
            _ => "an integer in range",
        };
        unrepresentable(
            field.full_name(),
            &format!("needs {expected}, not {}", shape(json)),
        )
    })
}

/// What sort of JSON value `json` is, for messages.
fn shape(json: &Value) -> &'static str {
    match json {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The special message of type `descriptor` that `json` is the JSON of.
fn special(
    special: Special,
    schema: &Schema,
    descriptor: &MessageDescriptor,
    json: &Value,
) -> Result<DynamicMessage, ProtobufError> {
    let mut message = DynamicMessage::new(descriptor.clone());
    let wrong =
        |expected: &str| unrepresentable(descriptor.full_name(), &format!("needs {expected}"));
    let mut put = |name: &str, value: Proto| -> Result<(), ProtobufError> {
        let field = descriptor
            .get_field_by_name(name)
            .ok_or_else(|| unrepresentable(descriptor.full_name(), &format!("has no {name}")))?;
        set(&mut message, &field, value)
    };
    let union = |name: &str, json: &Value| {
        descriptor
            .get_field_by_name(name)
            .ok_or_else(|| unrepresentable(descriptor.full_name(), &format!("has no {name}")))
            .and_then(|field| field_value(schema, &field, json))
    };
    match (special, json) {
        (Special::Time | Special::MicroTime, Value::String(text)) => {
            let (seconds, nanos) =
                go_time::parse_rfc3339(text).ok_or_else(|| wrong("RFC 3339 time"))?;
            put("seconds", Proto::I64(seconds))?;
            // Go keeps only MicroTime's fraction.
            let nanos = if special == Special::MicroTime {
                nanos
            } else {
                0
            };
            put(
                "nanos",
                Proto::I32(i32::try_from(nanos).map_err(|_| wrong("a time"))?),
            )?;
        }
        (Special::Duration, Value::String(text)) => {
            let nanos = go_time::parse_duration(text).ok_or_else(|| wrong("a duration"))?;
            put("duration", Proto::I64(nanos))?;
        }
        (Special::Quantity, Value::String(text)) => put("string", Proto::String(text.clone()))?,
        // Go reads a bare number as the quantity it spells.
        (Special::Quantity, Value::Number(number)) => {
            put("string", Proto::String(number.to_string()))?
        }
        (Special::IntOrString, Value::Number(number)) => {
            let value = number
                .as_i64()
                .and_then(|value| i32::try_from(value).ok())
                .ok_or_else(|| wrong("an int32 or a string"))?;
            put("type", Proto::I64(0))?;
            put("intVal", Proto::I32(value))?;
        }
        (Special::IntOrString, Value::String(text)) => {
            put("type", Proto::I64(1))?;
            put("strVal", Proto::String(text.clone()))?;
        }
        (Special::RawJson { field, .. }, json) => {
            let raw = serde_json::to_vec(json).map_err(|error| wrong(&error.to_string()))?;
            put(field, Proto::Bytes(raw.into()))?;
        }
        (Special::SchemaOrArray, Value::Array(_)) => {
            put("jSONSchemas", union("jSONSchemas", json)?)?
        }
        (Special::SchemaOrArray | Special::SchemaOrStringArray, Value::Object(_)) => {
            put("schema", union("schema", json)?)?;
        }
        (Special::SchemaOrBool, Value::Bool(allows)) => put("allows", Proto::Bool(*allows))?,
        (Special::SchemaOrBool, Value::Object(_)) => {
            put("allows", Proto::Bool(true))?;
            put("schema", union("schema", json)?)?;
        }
        (Special::SchemaOrStringArray, Value::Array(_)) => {
            put("property", union("property", json)?)?
        }
        _ => return Err(wrong("another JSON type")),
    }
    Ok(message)
}
