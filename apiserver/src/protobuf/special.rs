//! The types whose JSON Go writes by hand (`MarshalJSON`), so that their
//! JSON form is not their message's: times as RFC 3339 text, durations as
//! Go writes them, quantities as text, int-or-strings, embedded raw JSON and
//! the JSON-schema unions of CustomResourceDefinitions.

use prost_reflect::{DynamicMessage, MessageDescriptor, Value as Proto};
use serde_json::Value;

use super::from_json::{self, set, unrepresentable};
use super::{go_time, to_json, ProtobufError, Schema, MAGIC, MAX_EMBEDDED};

/// A message with a JSON form of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Special {
    /// `meta.v1.Time` {seconds, nanos}: RFC 3339 to the second (Go drops
    /// the nanoseconds both ways).
    Time,
    /// `meta.v1.MicroTime`: RFC 3339 with six fractional digits.
    MicroTime,
    /// `meta.v1.Duration` {duration in ns}: Go's `1h0m0s`.
    Duration,
    /// `resource.Quantity` and `QuantityValue` {string}: the text.
    Quantity,
    /// `intstr.IntOrString` {type 0 int, 1 string; intVal; strVal}.
    IntOrString,
    /// A message of one bytes field holding JSON (`runtime.RawExtension`,
    /// `meta.v1.FieldsV1`, `apiextensions.v1.JSON`): that JSON. A
    /// RawExtension may hold a protobuf object instead.
    RawJson {
        /// The bytes field.
        field: &'static str,
        /// Whether the bytes may be a `k8s\0` protobuf object.
        may_be_protobuf: bool,
    },
    /// `JSONSchemaPropsOrArray` {schema, jSONSchemas}: a schema or a list.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool` {allows, schema}: a boolean or a schema.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray` {schema, property}: a schema or a
    /// list of property names.
    SchemaOrStringArray,
}

const APIEXTENSIONS: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

impl Special {
    /// The special form of `descriptor`, if it has one.
    pub(super) fn of(descriptor: &MessageDescriptor) -> Option<Self> {
        let name = descriptor.full_name();
        if let Some(name) = name.strip_prefix(APIEXTENSIONS) {
            return match name {
                ".JSON" => Some(Self::RawJson {
                    field: "raw",
                    may_be_protobuf: false,
                }),
                ".JSONSchemaPropsOrArray" => Some(Self::SchemaOrArray),
                ".JSONSchemaPropsOrBool" => Some(Self::SchemaOrBool),
                ".JSONSchemaPropsOrStringArray" => Some(Self::SchemaOrStringArray),
                _ => None,
            };
        }
        Some(match name {
            "apimachinery.pkg.apis.meta.v1.Time" => Self::Time,
            "apimachinery.pkg.apis.meta.v1.MicroTime" => Self::MicroTime,
            "apimachinery.pkg.apis.meta.v1.Duration" => Self::Duration,
            "apimachinery.pkg.apis.meta.v1.FieldsV1" => Self::RawJson {
                field: "Raw",
                may_be_protobuf: false,
            },
            "apimachinery.pkg.api.resource.Quantity"
            | "apimachinery.pkg.api.resource.QuantityValue" => Self::Quantity,
            "apimachinery.pkg.util.intstr.IntOrString" => Self::IntOrString,
            "apimachinery.pkg.runtime.RawExtension" => Self::RawJson {
                field: "raw",
                may_be_protobuf: true,
            },
            _ => return None,
        })
    }
}

/// The JSON of a special message, or `None` when JSON leaves it out (a
/// zero time, empty raw JSON, an empty union).
pub(super) fn to_json(
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
            Some(Proto::Message(inner)) if has("schema") => to_json::message(schema, inner, depth),
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
                        schemas.push(to_json::message(schema, item, depth)?.unwrap_or(Value::Null));
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

/// The special message of type `descriptor` that `json` is the JSON of.
pub(super) fn from_json(
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
            .and_then(|field| from_json::field_value(schema, &field, json))
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

/// RFC 3339 text of a time, or an error for a year Go would not write.
fn time(seconds: i64, micros: Option<u32>) -> Result<String, ProtobufError> {
    go_time::rfc3339(seconds, micros)
        .ok_or_else(|| ProtobufError::Malformed(format!("time {seconds} is out of range")))
}
