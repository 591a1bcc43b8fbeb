//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! converted to and from the JSON objects the rest of the API works on, for
//! every built-in kind. kubectl and client-go send it for every typed call
//! (`kubectl create deployment`) and prefer it in replies.
//!
//! Driven by descriptors rather than hand-written field tables: `build.rs`
//! compiles Kubernetes' own `generated.proto` files (`apiserver/proto/`, see its
//! README) and this module reads them with prost-reflect, so a kind is
//! supported when its group version's proto file is there. The proto field
//! names are the JSON names, but for the types Go marshals by hand
//! (`special.rs`) and the few renames, inlined structs and bare lists
//! `apiserver/proto/json-names.tsv` lists. Which zero values JSON leaves out
//! comes from the Go types too: `apiserver/proto/omitempty.tsv`.
//!
//! Custom resources and relaymesh's own kinds have no protobuf form (nor do
//! they in Kubernetes): [`ProtobufError::UnknownKind`] says to send JSON,
//! and a reply that [`encode`] refuses is sent as JSON. No IO; prost-reflect
//! checks every length and nesting depth, and nothing here panics on input.
//!
//! Start with [`decode`] and [`encode`]; `to_json.rs` and `from_json.rs`
//! hold the two directions of the conversion.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, MessageDescriptor};
use serde_json::Value;

mod from_json;
mod go_time;
mod special;
mod to_json;

/// The four bytes every Kubernetes protobuf message starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The media type of Kubernetes protobuf, as requests and replies name it.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The media type of a protobuf watch stream: frames of [`encode_watch_event`].
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The package of the types every group version registers (`Status`,
/// `DeleteOptions`, `WatchEvent`, ...), looked in after the group's own.
const META_PACKAGE: &str = "apimachinery.pkg.apis.meta.v1";

/// How deep protobuf objects may nest inside each other's `RawExtension`s
/// (a `List` of objects): each level starts prost's nesting count afresh.
const MAX_EMBEDDED: u8 = 4;

/// Why a body cannot be read as protobuf, or an object written as it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtobufError {
    /// The bytes are not a well-formed Kubernetes protobuf message.
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    /// The wire format is broken (lengths, tags, UTF-8, nesting).
    #[error("malformed protobuf body: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The kind has no protobuf message here: a custom resource, one of
    /// relaymesh's own kinds, or a group version the root does not serve.
    #[error("protobuf bodies of kind {kind:?} in {api_version:?} are not supported; send JSON")]
    UnknownKind {
        /// The `apiVersion` asked for.
        api_version: String,
        /// The `kind` asked for.
        kind: String,
    },
    /// The JSON object holds something its protobuf message cannot carry
    /// (a field the message does not have, a value of another type): send
    /// it as JSON.
    #[error("cannot encode as protobuf: {0}")]
    Unrepresentable(String),
}

/// Decodes a body (`k8s\0`, then a `runtime.Unknown` wrapping the object)
/// to the object's Kubernetes JSON, with its `apiVersion` and `kind`.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    decode_embedded(body, 0)
}

/// Encodes a Kubernetes JSON object (a kind or a `<Kind>List`) as a
/// protobuf body, as kube-apiserver writes replies.
pub fn encode(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let text = |key: &str| {
        object.get(key).and_then(Value::as_str).ok_or_else(|| {
            ProtobufError::Unrepresentable(format!("the object has no {key} string"))
        })
    };
    let (api_version, kind) = (text("apiVersion")?, text("kind")?);
    let schema = schema();
    let descriptor = schema.kind(api_version, kind)?;
    let raw = from_json::message(schema, &descriptor, object)?.encode_to_vec();
    let mut type_meta = DynamicMessage::new(schema.type_meta.clone());
    set(&mut type_meta, "apiVersion", text_value(api_version))?;
    set(&mut type_meta, "kind", text_value(kind))?;
    let mut unknown = DynamicMessage::new(schema.unknown.clone());
    set(
        &mut unknown,
        "typeMeta",
        prost_reflect::Value::Message(type_meta),
    )?;
    set(&mut unknown, "raw", prost_reflect::Value::Bytes(raw.into()))?;
    // Go writes its empty strings too.
    set(&mut unknown, "contentEncoding", text_value(""))?;
    set(&mut unknown, "contentType", text_value(""))?;
    let mut body = MAGIC.to_vec();
    unknown.encode(&mut body).map_err(|error| {
        ProtobufError::Unrepresentable(format!("cannot encode the envelope: {error}"))
    })?;
    Ok(body)
}

/// One frame of a protobuf watch stream ([`WATCH_MEDIA_TYPE`]): the
/// 4-byte big-endian length of a `meta.v1.WatchEvent`, then that event,
/// whose `object` holds the [`encode`]d object. `event_type` is `ADDED`,
/// `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR` (with a `Status`).
pub fn encode_watch_event(event_type: &str, object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let schema = schema();
    let mut raw = DynamicMessage::new(schema.raw_extension.clone());
    set(
        &mut raw,
        "raw",
        prost_reflect::Value::Bytes(encode(object)?.into()),
    )?;
    let mut event = DynamicMessage::new(schema.watch_event.clone());
    set(&mut event, "type", text_value(event_type))?;
    set(&mut event, "object", prost_reflect::Value::Message(raw))?;
    let message = event.encode_to_vec();
    let length = u32::try_from(message.len())
        .map_err(|_| ProtobufError::Unrepresentable("a watch event over 4 GiB".into()))?;
    let mut frame = length.to_be_bytes().to_vec();
    frame.extend(message);
    Ok(frame)
}

/// Whether a reply to a request with this `Accept` header should be
/// protobuf, as kube-apiserver negotiates it: the media ranges in order of
/// their `q` (ties in the order written), the first one served wins. JSON,
/// YAML and wildcards are served as JSON; protobuf only as is, never as a
/// `Table` or other `as=` transformation, which are JSON here. Replies of
/// kinds [`encode`] refuses stay JSON whatever this says.
pub fn wants_protobuf(accept: &str) -> bool {
    let mut ranges: Vec<(u16, usize, &str, bool)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(order, range)| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().filter(|media| !media.is_empty())?;
            let (mut quality, mut transformed) = (1000, false);
            for parameter in parts {
                let (key, value) = parameter.split_once('=').unwrap_or((parameter, ""));
                match key.trim().to_ascii_lowercase().as_str() {
                    "q" => quality = thousandths(value.trim()),
                    "as" => transformed = true,
                    _ => {}
                }
            }
            Some((quality, order, media, transformed))
        })
        .collect();
    ranges.sort_by_key(|&(quality, order, _, _)| (std::cmp::Reverse(quality), order));
    for (quality, _, media, transformed) in ranges {
        if quality == 0 {
            continue;
        }
        let media = media.to_ascii_lowercase();
        match media.as_str() {
            MEDIA_TYPE if !transformed => return true,
            "application/json" | "application/yaml" | "application/*" | "*/*" => return false,
            _ => {}
        }
    }
    false
}

/// A `q` value (`0`, `0.5`, `1.000`) in thousandths; what cannot be read
/// counts as 1, as Go's parser takes it.
fn thousandths(value: &str) -> u16 {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let fraction = fraction
        .bytes()
        .take(3)
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .try_fold(0_u16, |total, digit| {
            digit
                .is_ascii_digit()
                .then(|| total * 10 + u16::from(digit - b'0'))
        });
    match (whole, fraction) {
        ("0" | "", Some(fraction)) => fraction,
        _ => 1000,
    }
}

fn decode_embedded(body: &[u8], depth: u8) -> Result<Value, ProtobufError> {
    let message = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ProtobufError::Malformed("no k8s\\0 magic".into()))?;
    let schema = schema();
    let unknown = DynamicMessage::decode(schema.unknown.clone(), message)?;
    let text = |message: &DynamicMessage, name: &str| {
        message
            .get_field_by_name(name)
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let content_type = text(&unknown, "contentType");
    if !content_type.is_empty() && content_type != MEDIA_TYPE {
        return Err(ProtobufError::Malformed(format!(
            "the object inside is {content_type:?}, not protobuf"
        )));
    }
    let content_encoding = text(&unknown, "contentEncoding");
    if !content_encoding.is_empty() {
        return Err(ProtobufError::Malformed(format!(
            "content encoding {content_encoding:?} is not supported"
        )));
    }
    let type_meta = unknown
        .get_field_by_name("typeMeta")
        .and_then(|value| value.as_message().cloned())
        .unwrap_or_else(|| DynamicMessage::new(schema.type_meta.clone()));
    let (api_version, kind) = (text(&type_meta, "apiVersion"), text(&type_meta, "kind"));
    let descriptor = schema.kind(&api_version, &kind)?;
    let raw = unknown
        .get_field_by_name("raw")
        .and_then(|value| value.as_bytes().cloned())
        .unwrap_or_default();
    let object = DynamicMessage::decode(descriptor, raw)?;
    let mut json = match to_json::message(schema, &object, depth)? {
        Some(Value::Object(json)) => json,
        Some(_) | None => serde_json::Map::new(),
    };
    json.insert("apiVersion".into(), Value::String(api_version));
    json.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(json))
}

fn text_value(text: &str) -> prost_reflect::Value {
    prost_reflect::Value::String(text.to_string())
}

/// Sets a field of one of the envelope's messages.
fn set(
    message: &mut DynamicMessage,
    name: &str,
    value: prost_reflect::Value,
) -> Result<(), ProtobufError> {
    message
        .try_set_field_by_name(name, value)
        .map_err(|error| ProtobufError::Unrepresentable(format!("{name}: {error}")))
}

/// The compiled definitions, and what build.rs derived from them.
struct Schema {
    pool: DescriptorPool,
    /// apiVersion → proto package.
    packages: HashMap<&'static str, &'static str>,
    /// A field's full name → its JSON name, where they differ.
    json_names: HashMap<String, &'static str>,
    /// Message → (JSON name, proto field name), where they differ.
    proto_names: HashMap<&'static str, Vec<(&'static str, &'static str)>>,
    /// Full names of the fields whose message JSON inlines.
    inlined: HashSet<String>,
    /// Messages whose JSON is the bare list of their `items`.
    lists: Vec<&'static str>,
    /// Full names of the fields whose zero JSON leaves out.
    zero_is_unset: HashSet<String>,
    unknown: MessageDescriptor,
    type_meta: MessageDescriptor,
    raw_extension: MessageDescriptor,
    watch_event: MessageDescriptor,
}

include!(concat!(env!("OUT_DIR"), "/protobuf_tables.rs"));

/// The non-pointer scalar fields whose json tag says `omitempty`, as
/// `omitempty.py` derives them from the Go types: `MESSAGE<TAB>FIELD` a
/// line, `#` comments. `build.rs` reruns when `proto/` changes, and the
/// tests check that every field named is in the descriptors.
const OMITEMPTY_TSV: &str = include_str!("../proto/omitempty.tsv");

/// The full names (`api.core.v1.ServicePort.nodePort`) [`OMITEMPTY_TSV`]
/// lists.
fn omitempty_fields() -> impl Iterator<Item = (&'static str, &'static str)> {
    OMITEMPTY_TSV
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split_once('\t'))
}

/// Loaded on first use; build.rs wrote and checked what this reads.
fn schema() -> &'static Schema {
    static SCHEMA: LazyLock<Schema> = LazyLock::new(Schema::load);
    &SCHEMA
}

impl Schema {
    fn load() -> Self {
        let pool = DescriptorPool::decode(
            &include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.bin"))[..],
        )
        // Invariant: build.rs encoded this set from a pool protox built.
        .expect("build.rs wrote a valid descriptor set");
        let message = |name: &str| {
            pool.get_message_by_name(name)
                // Invariant: these are in apiserver/proto's apimachinery files,
                // which build.rs always compiles.
                .expect("apimachinery's runtime and meta/v1 messages are compiled in")
        };
        let mut proto_names: HashMap<&str, Vec<(&str, &str)>> = HashMap::new();
        for (message, field, json) in RENAMED {
            proto_names.entry(message).or_default().push((json, field));
        }
        Self {
            packages: API_VERSIONS.iter().copied().collect(),
            json_names: RENAMED
                .iter()
                .map(|(message, field, json)| (format!("{message}.{field}"), *json))
                .collect(),
            proto_names,
            inlined: INLINED
                .iter()
                .map(|(message, field)| format!("{message}.{field}"))
                .collect(),
            lists: LISTS.to_vec(),
            zero_is_unset: omitempty_fields()
                .map(|(message, field)| format!("{message}.{field}"))
                .collect(),
            unknown: message("apimachinery.pkg.runtime.Unknown"),
            type_meta: message("apimachinery.pkg.runtime.TypeMeta"),
            raw_extension: message("apimachinery.pkg.runtime.RawExtension"),
            watch_event: message("apimachinery.pkg.apis.meta.v1.WatchEvent"),
            pool,
        }
    }

    /// The message of `kind` in `api_version`: the group version's own, or
    /// one of the types every group version registers.
    fn kind(&self, api_version: &str, kind: &str) -> Result<MessageDescriptor, ProtobufError> {
        let unknown = || ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        };
        // A kind is a Go type name: no dots that would reach nested messages.
        if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(unknown());
        }
        let package = self.packages.get(api_version).ok_or_else(unknown)?;
        self.pool
            .get_message_by_name(&format!("{package}.{kind}"))
            .or_else(|| {
                self.pool
                    .get_message_by_name(&format!("{META_PACKAGE}.{kind}"))
            })
            .ok_or_else(unknown)
    }

    /// The name of `field` in JSON.
    fn json_name<'a>(&self, field: &'a FieldDescriptor) -> &'a str {
        self.json_names
            .get(field.full_name())
            .copied()
            .unwrap_or_else(|| field.name())
    }

    /// The field of `message` that JSON calls `name`, if it has one.
    fn field(&self, message: &MessageDescriptor, name: &str) -> Option<FieldDescriptor> {
        let renamed = self.proto_names.get(message.full_name());
        if let Some(renamed) = renamed {
            if let Some((_, field)) = renamed.iter().find(|(json, _)| *json == name) {
                return message.get_field_by_name(field);
            }
        }
        let field = message.get_field_by_name(name)?;
        // A renamed field is not reachable by its proto name.
        (self.json_name(&field) == name).then_some(field)
    }

    /// Whether JSON writes the fields of `field`'s message in its parent.
    fn is_inlined(&self, field: &FieldDescriptor) -> bool {
        self.inlined.contains(field.full_name())
    }

    /// Whether JSON leaves out `field` when it holds its zero value.
    fn is_zero_unset(&self, field: &FieldDescriptor) -> bool {
        self.zero_is_unset.contains(field.full_name())
    }

    /// Whether JSON writes `message` as the bare list of its `items`.
    fn is_list(&self, message: &MessageDescriptor) -> bool {
        self.lists.contains(&message.full_name())
    }
}

#[cfg(test)]
mod tests;
