//! Revocations: the root's decision that a node's certificates, or a join
//! token, no longer open anything.
//!
//! A revocation travels as a slice entry like any other decision of the
//! root: keyed under [`KEY_PREFIX`], targeted at every node, signed by the
//! root, and so verified, stored, forwarded and resumed by the same code.
//! Each relay turns the revocations it holds into a deny list that it checks
//! when a child connects or a node joins, and a new one closes the links it
//! names at once.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::{SliceEntry, Target};

/// The key prefix of every revocation entry in the slice.
pub const KEY_PREFIX: &str = "revocation/";

/// Why a slice entry under [`KEY_PREFIX`] is not usable.
pub type RevocationError = crate::slice::KeyedEntryError;

/// What the root revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Revocation {
    /// Every certificate issued to node `name` at or before `at_unix`: its
    /// TLS certificate and, for a relay, its issuer, so everything that
    /// issuer signed is revoked with it. A node given the same name later,
    /// with a new token, gets certificates issued after `at_unix` and is not
    /// affected.
    Node {
        /// The node's name.
        name: String,
        /// When the root revoked it, in seconds since the Unix epoch.
        at_unix: u64,
    },
    /// A join token that was issued and not used yet.
    Token {
        /// The token's id (see [`crate::token::TokenClaims::id`]).
        id: [u8; 16],
        /// The name the token was for, for people reading the list.
        name: String,
        /// When the token would have expired; after that the entry can go.
        not_after_unix: u64,
    },
}

impl Revocation {
    /// The entry's key: `revocation/node/<name>` or
    /// `revocation/token/<id in hex>`.
    pub fn key(&self) -> String {
        match self {
            Self::Node { name, .. } => format!("{KEY_PREFIX}node/{name}"),
            Self::Token { id, .. } => format!("{KEY_PREFIX}token/{}", hex(id)),
        }
    }

    /// The unsigned slice entry that carries this revocation to every node.
    pub fn to_entry(&self) -> Result<SliceEntry, CodecError> {
        Ok(SliceEntry {
            key: self.key(),
            target: Target::Everywhere,
            bundles: Vec::new(),
            body: codec::encode(self)?,
            serial: 0,
            signature: Vec::new(),
        })
    }

    /// The revocation an entry carries: `None` if the entry is not a
    /// revocation, an error if it claims to be one but its body does not
    /// decode or does not match its key.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, RevocationError>> {
        crate::slice::decode_keyed(entry, "revocation", KEY_PREFIX, Revocation::key)
    }
}

/// Lower-case hex of a token id, as `relayctl token list` shows it.
pub fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_revocation_survives_its_entry(
            name in "[a-z][a-z0-9-]{0,20}",
            at_unix in any::<u64>(),
            id in any::<[u8; 16]>(),
        ) {
            for revocation in [
                Revocation::Node { name: name.clone(), at_unix },
                Revocation::Token { id, name: name.clone(), not_after_unix: at_unix },
            ] {
                let entry = revocation.to_entry().expect("test");
                prop_assert!(matches!(entry.target, Target::Everywhere));
                prop_assert_eq!(Revocation::from_entry(&entry).expect("a revocation").expect("decodes"), revocation);
            }
        }
    }

    #[test]
    fn a_body_that_names_another_key_is_refused() {
        let mut entry = Revocation::Node {
            name: "eu".into(),
            at_unix: 1,
        }
        .to_entry()
        .expect("test");
        entry.key = "revocation/node/us".into();
        assert!(Revocation::from_entry(&entry).expect("test").is_err());
        entry.key = "placement/shop/web".into();
        assert!(Revocation::from_entry(&entry).is_none());
    }
}
