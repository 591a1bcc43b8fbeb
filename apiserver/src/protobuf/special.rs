//! The types whose JSON Go writes by hand (`MarshalJSON`), so that their
//! JSON form is not their message's: times as RFC 3339 text, durations as
//! Go writes them, quantities as text, int-or-strings, embedded raw JSON and
//! the JSON-schema unions of CustomResourceDefinitions. Which messages
//! they are is said here; each direction converts them beside its other
//! conversions (`to_json::special`, `from_json::special`).

use prost_reflect::MessageDescriptor;

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
