//! Content addresses of workload bundles.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The BLAKE3 hash of a bundle's canonical bytes. Two bundles with the same id
/// are the same bundle, which is what lets a bundle cross each link once.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BundleId(pub [u8; 32]);

impl BundleId {
    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// Whether `bytes` hash to this id.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        // blake3::Hash compares in constant time; not needed here, but free.
        blake3::Hash::from(self.0) == blake3::hash(bytes)
    }

    /// A streaming hasher, for bundles received in chunks.
    pub fn hasher() -> BundleHasher {
        BundleHasher(blake3::Hasher::new())
    }

    /// The id as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }
}

/// Hashes a bundle fed in pieces; see [`BundleId::hasher`].
#[derive(Clone, Debug, Default)]
pub struct BundleHasher(blake3::Hasher);

impl BundleHasher {
    /// Adds the next piece of the bundle.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The id of everything fed so far.
    pub fn finish(&self) -> BundleId {
        BundleId(*self.0.finalize().as_bytes())
    }
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Twelve digits identify a bundle in logs without drowning them.
        write!(f, "BundleId({})", &self.to_hex()[..12])
    }
}

/// The text was not 64 hex digits.
#[derive(Debug, thiserror::Error)]
#[error("a bundle id is 64 hex digits: {0}")]
pub struct ParseBundleIdError(String);

impl FromStr for BundleId {
    type Err = ParseBundleIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        blake3::Hash::from_hex(s)
            .map(|hash| Self(*hash.as_bytes()))
            .map_err(|_| ParseBundleIdError(s.chars().take(80).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_blake3_and_parses_back() {
        let id = BundleId::of(b"hello");
        assert_eq!(id.to_hex(), blake3::hash(b"hello").to_hex().to_string());
        assert_eq!(id.to_hex().parse::<BundleId>().ok(), Some(id));
        assert!(id.matches(b"hello"));
        assert!(!id.matches(b"hellO"));
        assert!("zz".parse::<BundleId>().is_err());
    }

    #[test]
    fn streaming_hash_equals_one_shot() {
        let mut hasher = BundleId::hasher();
        hasher.update(b"hel");
        hasher.update(b"lo");
        assert_eq!(hasher.finish(), BundleId::of(b"hello"));
    }
}
