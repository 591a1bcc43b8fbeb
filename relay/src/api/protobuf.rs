//! Just enough of Kubernetes' protobuf encoding to read what kubectl's typed
//! commands send (`kubectl create namespace|configmap|secret|serviceaccount`
//! post `application/vnd.kubernetes.protobuf` and do not fall back to JSON on
//! a 415). Decodes those kinds to the JSON the rest of the API works on;
//! everything else is refused with 415. Replies are always JSON, which
//! kubectl accepts. No IO; every length is checked against the input.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Map, Value};

/// The four bytes every Kubernetes protobuf message starts with.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtobufError {
    /// The bytes are not a well-formed message.
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    /// The kind is not one this server decodes from protobuf.
    #[error("protobuf bodies of kind {0:?} are not supported; send JSON")]
    Unsupported(String),
}

/// Decodes a `runtime.Unknown`-wrapped object to JSON.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let message = body
        .strip_prefix(MAGIC)
        .ok_or(ProtobufError::Malformed("missing magic"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for field in Fields::new(message) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for field in Fields::new(type_meta) {
                    match field? {
                        (1, Wire::Bytes(bytes)) => api_version = text(bytes)?,
                        (2, Wire::Bytes(bytes)) => kind = text(bytes)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(bytes)) => raw = bytes,
            _ => {}
        }
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    for field in Fields::new(raw) {
        let (number, value) = field?;
        let Wire::Bytes(bytes) = value else { continue };
        match (kind.as_str(), number) {
            (_, 1) => {
                object.insert("metadata".into(), object_meta(bytes)?);
            }
            ("Namespace", 2) => {
                let finalizers = strings(bytes, 1)?;
                object.insert("spec".into(), json!({"finalizers": finalizers}));
            }
            ("ConfigMap", 2) | ("Secret", 4) => {
                let key = if kind == "Secret" {
                    "stringData"
                } else {
                    "data"
                };
                insert_entry(&mut object, key, bytes, false)?;
            }
            ("ConfigMap", 3) | ("Secret", 2) => {
                let key = if kind == "Secret" {
                    "data"
                } else {
                    "binaryData"
                };
                insert_entry(&mut object, key, bytes, true)?;
            }
            ("Secret", 3) => {
                object.insert("type".into(), json!(text(bytes)?));
            }
            ("SelfSubjectAccessReview", 2) => {
                object.insert("spec".into(), access_review_spec(bytes)?);
            }
            (
                "Namespace"
                | "ConfigMap"
                | "Secret"
                | "ServiceAccount"
                | "SelfSubjectAccessReview"
                | "SelfSubjectReview",
                _,
            ) => {}
            _ => return Err(ProtobufError::Unsupported(kind)),
        }
    }
    if !matches!(
        kind.as_str(),
        "Namespace"
            | "ConfigMap"
            | "Secret"
            | "ServiceAccount"
            | "SelfSubjectAccessReview"
            | "SelfSubjectReview"
    ) {
        return Err(ProtobufError::Unsupported(kind));
    }
    Ok(Value::Object(object))
}

/// `SelfSubjectAccessReviewSpec`: resource attributes (1) or non-resource
/// attributes (2), each a message of string fields.
fn access_review_spec(bytes: &[u8]) -> Result<Value, ProtobufError> {
    const RESOURCE: [&str; 7] = [
        "namespace",
        "verb",
        "group",
        "version",
        "resource",
        "subresource",
        "name",
    ];
    const NON_RESOURCE: [&str; 2] = ["path", "verb"];
    let mut spec = Map::new();
    for field in Fields::new(bytes) {
        let (number, value) = field?;
        let Wire::Bytes(attributes) = value else {
            continue;
        };
        let (key, names) = match number {
            1 => ("resourceAttributes", &RESOURCE[..]),
            2 => ("nonResourceAttributes", &NON_RESOURCE[..]),
            _ => continue,
        };
        let mut decoded = Map::new();
        for field in Fields::new(attributes) {
            let (number, value) = field?;
            let Wire::Bytes(bytes) = value else { continue };
            let name = usize::try_from(number)
                .ok()
                .and_then(|number| number.checked_sub(1))
                .and_then(|index| names.get(index));
            if let Some(name) = name {
                decoded.insert((*name).into(), json!(text(bytes)?));
            }
        }
        spec.insert(key.into(), Value::Object(decoded));
    }
    Ok(Value::Object(spec))
}

fn object_meta(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut metadata = Map::new();
    for field in Fields::new(bytes) {
        let (number, value) = field?;
        let Wire::Bytes(bytes) = value else { continue };
        match number {
            1 => metadata.insert("name".into(), json!(text(bytes)?)),
            2 => metadata.insert("generateName".into(), json!(text(bytes)?)),
            3 => metadata.insert("namespace".into(), json!(text(bytes)?)),
            11 | 12 => {
                let key = if number == 11 {
                    "labels"
                } else {
                    "annotations"
                };
                insert_entry(&mut metadata, key, bytes, false)?;
                None
            }
            _ => None,
        };
    }
    Ok(Value::Object(metadata))
}

/// Adds one map entry (key = 1, value = 2) to the map `name` of `object`;
/// byte values are base64-encoded, as JSON carries them.
fn insert_entry(
    object: &mut Map<String, Value>,
    name: &str,
    entry: &[u8],
    binary: bool,
) -> Result<(), ProtobufError> {
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    for field in Fields::new(entry) {
        match field? {
            (1, Wire::Bytes(bytes)) => key = text(bytes)?,
            (2, Wire::Bytes(bytes)) if binary => value = json!(STANDARD.encode(bytes)),
            (2, Wire::Bytes(bytes)) => value = json!(text(bytes)?),
            _ => {}
        }
    }
    let map = object
        .entry(name)
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = map {
        map.insert(key, value);
    }
    Ok(())
}

fn strings(bytes: &[u8], number: u64) -> Result<Vec<String>, ProtobufError> {
    let mut values = Vec::new();
    for field in Fields::new(bytes) {
        if let (found, Wire::Bytes(bytes)) = field? {
            if found == number {
                values.push(text(bytes)?);
            }
        }
    }
    Ok(values)
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed("a string is not UTF-8"))
}

/// A field's value by wire type.
enum Wire<'a> {
    Varint,
    Fixed,
    Bytes(&'a [u8]),
}

/// The fields of one message, in order.
struct Fields<'a> {
    input: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    fn new(input: &'a [u8]) -> Self {
        Self {
            input,
            failed: false,
        }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0_u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .input
                .split_first()
                .ok_or(ProtobufError::Malformed("truncated varint"))?;
            self.input = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed("varint too long"))
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], ProtobufError> {
        if length > self.input.len() {
            return Err(ProtobufError::Malformed("length beyond the message"));
        }
        let (taken, rest) = self.input.split_at(length);
        self.input = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u64, Wire<'a>), ProtobufError> {
        let tag = self.varint()?;
        let value = match tag & 7 {
            0 => {
                self.varint()?;
                Wire::Varint
            }
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let length = usize::try_from(self.varint()?)
                    .map_err(|_| ProtobufError::Malformed("length too large"))?;
                Wire::Bytes(self.take(length)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            _ => return Err(ProtobufError::Malformed("unknown wire type")),
        };
        Ok((tag >> 3, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.input.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![number << 3 | 2, u8::try_from(bytes.len()).expect("short")];
        out.extend_from_slice(bytes);
        out
    }

    fn envelope(kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = bytes_field(1, b"v1");
        type_meta.extend(bytes_field(2, kind.as_bytes()));
        let mut body = MAGIC.to_vec();
        body.extend(bytes_field(1, &type_meta));
        body.extend(bytes_field(2, raw));
        body
    }

    #[test]
    fn namespaces_and_config_maps_decode() {
        let mut labels = bytes_field(1, b"team");
        labels.extend(bytes_field(2, b"shop"));
        let mut meta = bytes_field(1, b"shop");
        meta.extend(bytes_field(11, &labels));
        let namespace = decode(&envelope("Namespace", &bytes_field(1, &meta))).expect("decodes");
        assert_eq!(
            namespace,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "shop"}}})
        );

        let mut entry = bytes_field(1, b"color");
        entry.extend(bytes_field(2, b"blue"));
        let mut raw = bytes_field(1, &bytes_field(1, b"cfg"));
        raw.extend(bytes_field(2, &entry));
        let config_map = decode(&envelope("ConfigMap", &raw)).expect("decodes");
        assert_eq!(config_map["data"], json!({"color": "blue"}));
    }

    #[test]
    fn refuses_garbage_and_other_kinds() {
        assert!(decode(b"{}").is_err());
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        assert!(matches!(
            decode(&envelope("Pod", &[])),
            Err(ProtobufError::Unsupported(_))
        ));
    }
}
