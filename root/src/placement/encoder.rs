//! Encoding bundles once per change: the controller rebuilds every
//! placement after any object changes, and compressing an unchanged
//! placement's bundle again at each rebuild would cost the root a
//! compression per placement per change anywhere. The encoder remembers the
//! id each objects' JSON was encoded to in the last rebuild.

use std::collections::HashMap;

use relaymesh_protocol::BundleId;

use super::bundle::BundleEncoding;

/// A bundle as the encoder gives it.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The bundle's id: the hash of its encoded bytes.
    pub id: BundleId,
    /// Its bytes when this build compressed them; none for a JSON bundle
    /// (its bytes are the JSON) or when the last rebuild encoded the same
    /// JSON (its bytes went to the store then). [`Encoder::again`] makes
    /// them from the JSON.
    pub bytes: Option<Vec<u8>>,
}

/// Encodes bundles in the root's encoding, compressing each distinct JSON
/// once while it stays in use.
#[derive(Debug)]
pub struct Encoder {
    encoding: BundleEncoding,
    /// The id of each JSON's encoding (by the JSON's own id), from the last
    /// rebuild and this one: a JSON that no rebuild asks for is forgotten,
    /// so the map holds at most two rebuilds' bundles.
    last: HashMap<BundleId, BundleId>,
    this: HashMap<BundleId, BundleId>,
}

impl Encoder {
    /// An encoder that has encoded nothing yet.
    pub fn new(encoding: BundleEncoding) -> Self {
        Self {
            encoding,
            last: HashMap::new(),
            this: HashMap::new(),
        }
    }

    /// The bundle of the objects whose canonical JSON is `json`.
    pub fn encode(&mut self, json: &[u8]) -> Encoded {
        let key = BundleId::of(json);
        if self.encoding == BundleEncoding::Json {
            return Encoded {
                id: key,
                bytes: None,
            };
        }
        let known = self.this.get(&key).or_else(|| self.last.get(&key)).copied();
        if let Some(id) = known {
            self.this.insert(key, id);
            return Encoded { id, bytes: None };
        }
        let bytes = relaymesh_protocol::bundle_encoding::compress(json);
        let id = BundleId::of(&bytes);
        self.this.insert(key, id);
        Encoded {
            id,
            bytes: Some(bytes),
        }
    }

    /// The encoded bytes of `json`: the JSON itself, or compressed anew.
    pub fn again(&self, json: Vec<u8>) -> Vec<u8> {
        self.encoding.encode(json)
    }

    /// Ends a rebuild: JSON that this rebuild did not encode is forgotten.
    pub fn end_rebuild(&mut self) {
        self.last = std::mem::take(&mut self.this);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Vec<u8> {
        format!(r#"[{{"kind":"ConfigMap","data":{{"k":"{text}"}}}}]"#).into_bytes()
    }

    #[test]
    fn an_unchanged_bundle_is_compressed_once() {
        let mut encoder = Encoder::new(BundleEncoding::Zstd);
        let first = encoder.encode(&json("a"));
        let bytes = first.bytes.expect("the first encoding gives the bytes");
        assert!(relaymesh_protocol::bundle_encoding::is_compressed(&bytes));
        assert_eq!(first.id, BundleId::of(&bytes));
        encoder.end_rebuild();
        let second = encoder.encode(&json("a"));
        assert_eq!(second.id, first.id);
        assert!(second.bytes.is_none(), "not compressed again");
        assert_eq!(encoder.again(json("a")), bytes, "the same bytes anew");
        encoder.end_rebuild();
        assert!(encoder.encode(&json("a")).bytes.is_none());
    }

    #[test]
    fn a_bundle_no_rebuild_asked_for_is_forgotten() {
        let mut encoder = Encoder::new(BundleEncoding::Zstd);
        let first = encoder.encode(&json("a"));
        encoder.end_rebuild();
        assert!(encoder.encode(&json("b")).bytes.is_some(), "a change");
        encoder.end_rebuild();
        encoder.end_rebuild();
        let again = encoder.encode(&json("a"));
        assert_eq!(again.id, first.id);
        assert!(again.bytes.is_some(), "forgotten, so compressed again");
    }

    #[test]
    fn json_bundles_are_their_json() {
        let mut encoder = Encoder::new(BundleEncoding::Json);
        encoder.encode(&json("a"));
        encoder.end_rebuild();
        let again = encoder.encode(&json("a"));
        assert!(again.bytes.is_none(), "the JSON is the bundle");
        assert_eq!(encoder.again(json("a")), json("a"));
        assert_eq!(again.id, BundleId::of(&json("a")));
    }
}
