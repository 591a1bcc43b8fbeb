//! The bodies of `testbed bench decode`: ConfigMaps nested to a given
//! depth, bodies of the API's largest size full of lists at the depth limit,
//! and the worst cases the clients post, in JSON, YAML and protobuf.

use bytes::Bytes;
use relaymesh_apiserver::http::MAX_JSON_BODY;
use relaymesh_apiserver::{body, depth, protobuf};

/// A body format the API decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// Kubernetes protobuf; its nesting is the raw JSON of a
    /// `managedFields[].fieldsV1`, the one place protobuf carries JSON of
    /// any shape in a ConfigMap.
    Protobuf,
}

/// Why a decoder refused a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Refused for its depth: the API's limit, or serde_json's own
    /// recursion limit (128) on JSON inside protobuf, which is met first
    /// there.
    pub too_deep: bool,
    /// The decoder's words.
    pub message: String,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 3] = [Format::Json, Format::Yaml, Format::Protobuf];

    /// Its name in figures.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
            Format::Protobuf => "protobuf",
        }
    }

    /// The `Content-Type` it is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => protobuf::MEDIA_TYPE,
        }
    }

    /// A ConfigMap body whose deepest list is `depth` levels deep (at
    /// least 2, as its metadata is): the API reads it when `depth` is at
    /// most [`depth::MAX_DEPTH`] and refuses it otherwise.
    pub fn nested(self, depth: usize) -> Vec<u8> {
        let depth = depth.max(2);
        match self {
            // The object is level 1, its lists the rest.
            Format::Json => {
                let mut text = format!("{{{JSON_HEAD}\"x\":").into_bytes();
                text.extend(brackets(depth - 1));
                text.push(b'}');
                text
            }
            Format::Yaml => {
                let mut text = format!("{YAML_HEAD}x: ").into_bytes();
                text.extend(brackets(depth - 1));
                text.push(b'\n');
                text
            }
            // fieldsV1 is counted from its own root.
            Format::Protobuf => configmap_protobuf(&brackets(depth)),
        }
    }

    /// A ConfigMap body of exactly `size` bytes (at least 4 KiB) full of
    /// lists nested to the limit. With `over_limit`, one of them goes one
    /// level deeper, placed where this format's decoder meets it last (the
    /// end of a JSON body, scanned as a stream; the first list of a YAML or
    /// protobuf body, whose value is built whole and then walked from its
    /// last child to its first); without, the API reads the body.
    pub fn filled(self, size: usize, over_limit: bool) -> Vec<u8> {
        let limit = depth::MAX_DEPTH;
        match self {
            Format::Json => {
                let head = format!("{{{JSON_HEAD}\"x\":[");
                fill(
                    &head,
                    "]}",
                    size,
                    limit - 2,
                    over_limit.then_some(Place::Last),
                )
            }
            Format::Yaml => {
                let head = format!("{YAML_HEAD}x: [");
                fill(
                    &head,
                    "]\n",
                    size,
                    limit - 2,
                    over_limit.then_some(Place::First),
                )
            }
            Format::Protobuf => {
                let place = over_limit.then_some(Place::First);
                protobuf_of_size(size, |room| fill("[", "]", room, limit - 1, place))
            }
        }
    }

    /// Decodes `bytes` as the API server decodes a create's body of this
    /// format.
    pub fn decode(self, bytes: &[u8]) -> Result<(), Refusal> {
        let decoded = match self {
            Format::Json => body::json(bytes),
            Format::Yaml => body::yaml(bytes),
            Format::Protobuf => {
                let object = protobuf::decode(bytes).map_err(|error| {
                    let message = error.to_string();
                    Refusal {
                        too_deep: message.contains("recursion limit"),
                        message,
                    }
                })?;
                depth::check_value(&object)
                    .map(|()| object)
                    .map_err(body::BodyError::from)
            }
        };
        match decoded {
            Ok(_) => Ok(()),
            Err(error) => Err(Refusal {
                too_deep: matches!(error, body::BodyError::TooDeep(_)),
                message: error.to_string(),
            }),
        }
    }
}

/// The fields every ConfigMap body here starts with, as JSON.
const JSON_HEAD: &str =
    "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"deep\",\"namespace\":\"default\"},";
/// The same as YAML.
const YAML_HEAD: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: default}\n";

/// `depth` nested empty lists: `[[…]]`.
fn brackets(depth: usize) -> Vec<u8> {
    let mut text = vec![b'['; depth];
    text.resize(2 * depth, b']');
    text
}

/// Where the list one level over the limit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    First,
    Last,
}

/// `head`, then lists nested `depth` deep separated by commas (one of them
/// one deeper at `over`), then `tail`, then spaces up to `size` bytes.
fn fill(head: &str, tail: &str, size: usize, depth: usize, over: Option<Place>) -> Vec<u8> {
    let unit = brackets(depth);
    let deeper = brackets(depth + 1);
    let mut text = head.as_bytes().to_vec();
    let first = if over == Some(Place::First) {
        &deeper
    } else {
        &unit
    };
    text.extend_from_slice(first);
    let reserve = tail.len()
        + if over == Some(Place::Last) {
            deeper.len() + 1
        } else {
            0
        };
    while text.len() + 1 + unit.len() + reserve <= size {
        text.push(b',');
        text.extend_from_slice(&unit);
    }
    if over == Some(Place::Last) {
        text.push(b',');
        text.extend_from_slice(&deeper);
    }
    text.extend_from_slice(tail.as_bytes());
    if text.len() < size {
        text.resize(size, b' ');
    }
    text
}

/// A protobuf ConfigMap `default/deep` whose one managed-fields entry holds
/// `fields_v1` as its raw JSON, in Kubernetes' envelope (`k8s\0`, then a
/// `runtime.Unknown`). Field numbers from apiserver/proto.
fn configmap_protobuf(fields_v1: &[u8]) -> Vec<u8> {
    let fields = message(&[(1, fields_v1)]);
    let entry = message(&[
        (1, b"bench".as_slice()),
        (2, b"Update".as_slice()),
        (3, b"v1".as_slice()),
        (6, b"FieldsV1".as_slice()),
        (7, fields.as_slice()),
    ]);
    let metadata = message(&[
        (1, b"deep".as_slice()),
        (3, b"default".as_slice()),
        (17, entry.as_slice()),
    ]);
    let configmap = message(&[(1, metadata.as_slice())]);
    let type_meta = message(&[(1, b"v1".as_slice()), (2, b"ConfigMap".as_slice())]);
    let unknown = message(&[(1, type_meta.as_slice()), (2, configmap.as_slice())]);
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown);
    body
}

/// A [`configmap_protobuf`] of `size` bytes (or just under, should a
/// varint's length make it unreachable) whose raw JSON `fields_v1(room)`
/// makes of `room` bytes.
fn protobuf_of_size(size: usize, fields_v1: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut room = size.saturating_sub(configmap_protobuf(&[]).len());
    let mut best = Vec::new();
    for _ in 0..8 {
        let body = configmap_protobuf(&fields_v1(room));
        match body.len().cmp(&size) {
            std::cmp::Ordering::Equal => return body,
            std::cmp::Ordering::Less => {
                room += size - body.len();
                best = body;
            }
            std::cmp::Ordering::Greater => room = room.saturating_sub(body.len() - size),
        }
    }
    best
}

/// A protobuf message of length-delimited fields (strings, bytes and
/// messages), in the order given.
fn message(fields: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (number, bytes) in fields {
        varint(&mut out, (number << 3) | 2);
        varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    out
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A YAML body of about `size` bytes that expands aliases nine levels deep
/// (a billion laughs), then a comment up to `size`.
fn yaml_aliases(size: usize) -> Vec<u8> {
    let mut text =
        format!("{YAML_HEAD}data:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let previous = format!("*a{}", level - 1);
        let items = [previous.as_str(); 10].join(", ");
        text.push_str(&format!("  a{level}: &a{level} [{items}]\n"));
    }
    text.push('#');
    let mut text = text.into_bytes();
    if text.len() < size {
        text.resize(size, b'x');
    }
    text
}

/// A body the clients post: its name, `Content-Type` and bytes.
pub(super) type Body = (&'static str, &'static str, Bytes);

/// The bodies the clients post: each of the API's largest size.
pub(super) fn worst_bodies() -> Vec<Body> {
    let size = MAX_JSON_BODY as usize;
    let deep = |head: &str| {
        let mut text = head.as_bytes().to_vec();
        text.resize(size, b'[');
        Bytes::from(text)
    };
    let protobuf_deep = protobuf_of_size(size, |room| vec![b'['; room]);
    vec![
        (
            "JSON at the limit",
            Format::Json.content_type(),
            Bytes::from(Format::Json.filled(size, true)),
        ),
        ("JSON deepest", Format::Json.content_type(), deep("{\"x\":")),
        (
            "YAML at the limit",
            Format::Yaml.content_type(),
            Bytes::from(Format::Yaml.filled(size, true)),
        ),
        (
            "YAML deepest flow",
            Format::Yaml.content_type(),
            deep("x: "),
        ),
        ("YAML deepest block", Format::Yaml.content_type(), {
            let mut text = b"x:\n".to_vec();
            while text.len() + 2 <= size {
                text.extend_from_slice(b"- ");
            }
            text.resize(size, b'0');
            Bytes::from(text)
        }),
        (
            "YAML aliases",
            Format::Yaml.content_type(),
            Bytes::from(yaml_aliases(size)),
        ),
        (
            "protobuf at the limit",
            Format::Protobuf.content_type(),
            Bytes::from(Format::Protobuf.filled(size, true)),
        ),
        (
            "protobuf deepest",
            Format::Protobuf.content_type(),
            Bytes::from(protobuf_deep),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_within_the_limit_are_read_and_one_level_more_is_refused() {
        for format in Format::ALL {
            assert_eq!(
                format.decode(&format.nested(depth::MAX_DEPTH)),
                Ok(()),
                "{format:?}"
            );
            for depth in [depth::MAX_DEPTH + 1, 1000] {
                let refusal = format
                    .decode(&format.nested(depth))
                    .expect_err("a body past the limit");
                assert!(
                    refusal.too_deep,
                    "{format:?} at {depth}: {}",
                    refusal.message
                );
            }
        }
    }

    #[test]
    fn filled_bodies_have_the_size_asked_and_only_the_deeper_list_is_refused() {
        let size = 64 * 1024;
        for format in Format::ALL {
            let within = format.filled(size, false);
            let over = format.filled(size, true);
            assert_eq!((within.len(), over.len()), (size, size), "{format:?}");
            assert_eq!(format.decode(&within), Ok(()), "{format:?}");
            let refusal = format.decode(&over).expect_err("one list past the limit");
            assert!(refusal.too_deep, "{format:?}: {}", refusal.message);
        }
    }
}
