//! The desired-state slice: what a relay holds for its subtree and sends on.
//!
//! A slice is a set of entries by key. Each entry says which part of the tree
//! it is for ([`Target`]), which bundles it references, and carries a body the
//! transport does not interpret (placements, later). A relay forwards to each
//! child only the entries that can concern that child's subtree.

use serde::{Deserialize, Serialize};

use crate::{BundleId, PlacementTarget};

/// One entry of a slice.
///
/// The root signs every entry it decides ([`SliceEntry::signed_message`]):
/// relays and agents check the signature with the root's public key, which
/// they received at join, before they store or forward the entry, so a relay
/// on the way cannot forge or alter one. It can still withhold entries, and
/// so removals, which are withholding by another name, are not signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceEntry {
    /// Unique key within the slice, such as `bundle/demo`.
    pub key: String,
    /// Which subtrees the entry is for.
    pub target: Target,
    /// Bundles the entry references; a relay that forwards the entry fetches
    /// them from its parent.
    pub bundles: Vec<BundleId>,
    /// The entry's payload, opaque to the transport.
    pub body: Vec<u8>,
    /// The root's serial for this version of the entry: it grows each time
    /// the root changes the entry, so an older signed version cannot be
    /// replayed over a newer one.
    pub serial: u64,
    /// The root's Ed25519 signature over [`SliceEntry::signed_message`].
    pub signature: Vec<u8>,
}

/// What the root's signature on a slice entry covers: a context string, so a
/// signature made for anything else (a join token) never verifies here, then
/// the entry without its signature.
const SIGNED_CONTEXT: &[u8] = b"relaymesh slice entry v1\0";

impl SliceEntry {
    /// The bytes the root signs: a context string (`relaymesh slice entry v1`) and the encoding of the
    /// key, target, bundles, body and serial.
    ///
    /// A placement's target is signed without its quota and its wave: each
    /// relay on the way fills in the share of a bounded placement, and of a
    /// rollout's wave, its child must provide (the decisions the root
    /// delegates), and nothing else of the target. Both revisions a wave
    /// chooses between are the root's, signed.
    pub fn signed_message(&self) -> Result<Vec<u8>, crate::codec::CodecError> {
        let target = match &self.target {
            Target::Placement(placement) => Target::Placement(crate::PlacementTarget {
                quota: None,
                wave: None,
                ..placement.clone()
            }),
            other => other.clone(),
        };
        let signed = (&self.key, &target, &self.bundles, &self.body, self.serial);
        let mut message = SIGNED_CONTEXT.to_vec();
        message.extend(crate::codec::encode(&signed)?);
        Ok(message)
    }
}

/// Which part of the tree a slice entry is for.
// Not `non_exhaustive`: a new variant must make every routing decision in
// `topology` fail to compile until it handles it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// Every node of the tree.
    Everywhere,
    /// The named nodes and their subtrees.
    Subtrees(Vec<String>),
    /// The clusters a placement selects, resolved level by level.
    Placement(PlacementTarget),
}

/// One change of a slice.
// Removals are rare and short-lived; boxing every upsert to shrink them
// would cost an allocation per entry on the hot path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceChange {
    /// Add or replace the entry with this key.
    Upsert(SliceEntry),
    /// Remove the entry with this key (a no-op if absent).
    Remove(String),
}

impl SliceChange {
    /// The key this change is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Upsert(entry) => &entry.key,
            Self::Remove(key) => key,
        }
    }
}

/// Why a slice entry that carries one of the root's typed decisions (a
/// revocation, a move, cluster labels) under its key prefix cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyedEntryError {
    /// The body does not decode.
    #[error("{what} entry body: {source}")]
    Body {
        /// What the entry carries (`revocation`, `move`, ...).
        what: &'static str,
        /// The codec's reason.
        #[source]
        source: crate::codec::CodecError,
    },
    /// The body belongs under another key than the entry's.
    #[error("{what} entry {key} carries a body for {body_key}")]
    KeyMismatch {
        /// What the entry carries.
        what: &'static str,
        /// The entry's key.
        key: String,
        /// The key the body belongs under.
        body_key: String,
    },
}

/// The `T` an entry carries: `None` if its key is not under `prefix`, an
/// error if the body does not decode or belongs under another key
/// (`key_of` says which).
pub(crate) fn decode_keyed<T: serde::de::DeserializeOwned>(
    entry: &SliceEntry,
    what: &'static str,
    prefix: &str,
    key_of: impl Fn(&T) -> String,
) -> Option<Result<T, KeyedEntryError>> {
    if !entry.key.starts_with(prefix) {
        return None;
    }
    let decoded = crate::codec::decode::<T>(&entry.body)
        .map_err(|source| KeyedEntryError::Body { what, source });
    Some(decoded.and_then(|value| {
        let body_key = key_of(&value);
        if body_key == entry.key {
            Ok(value)
        } else {
            Err(KeyedEntryError::KeyMismatch {
                what,
                key: entry.key.clone(),
                body_key,
            })
        }
    }))
}
