//! The mesh's trust anchors, as the root decides them: the CA certificates
//! every node trusts on its links and the key the root signs them with
//! now, and the keys whose signatures on slice entries every node accepts.
//!
//! The entry travels in the slice like a revocation: keyed [`KEY`],
//! targeted at every node and signed by the root, so a node adopts anchors
//! on the root's word only, never on a parent's. It exists once the root
//! has rotated its mesh CA (`relayctl rotate mesh-ca`); a mesh that never
//! rotated trusts the CA each node received at join.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::{SliceEntry, Target};

/// The key of the one trust entry in the slice.
pub const KEY: &str = "trust/mesh";

/// Why a slice entry under [`KEY`] is not usable.
pub type TrustError = crate::slice::KeyedEntryError;

/// The CA certificates the mesh trusts, and who signs under it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshTrust {
    /// Every trusted CA certificate (DER), the one join tokens pin first.
    /// During a rotation the old CA and the new one; afterwards the new
    /// one alone.
    pub anchors: Vec<Vec<u8>>,
    /// The SHA-256 of the SubjectPublicKeyInfo of the key that signs the
    /// root's children's certificates and relay issuers now: a node whose
    /// certificate another mesh CA key signed has it signed again.
    pub signer_key: [u8; 32],
    /// The Ed25519 public keys whose signatures on slice entries every
    /// node accepts; the first signs entries and join tokens now. During
    /// a rotation of the token-signing key, the old one and the new one;
    /// afterwards the new one alone.
    pub token_keys: Vec<Vec<u8>>,
}

impl MeshTrust {
    /// The unsigned slice entry that carries the trust to every node.
    pub fn to_entry(&self) -> Result<SliceEntry, CodecError> {
        Ok(SliceEntry {
            key: KEY.to_string(),
            target: Target::Everywhere,
            bundles: Vec::new(),
            body: codec::encode(self)?,
            serial: 0,
            signature: Vec::new(),
        })
    }

    /// The trust an entry carries: `None` if the entry is not the trust
    /// entry, an error if its body does not decode.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, TrustError>> {
        if entry.key != KEY {
            return None;
        }
        crate::slice::decode_keyed(entry, "mesh trust", KEY, |_: &Self| KEY.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_other_keys_are_not_trust() {
        let trust = MeshTrust {
            anchors: vec![vec![1, 2, 3], vec![4, 5]],
            signer_key: [7; 32],
            token_keys: vec![vec![9; 32]],
        };
        let entry = trust.to_entry().expect("encodes");
        assert_eq!(entry.target, Target::Everywhere);
        assert_eq!(
            MeshTrust::from_entry(&entry)
                .expect("is trust")
                .expect("decodes"),
            trust
        );
        let other = SliceEntry {
            key: "trust/meshy".into(),
            ..entry.clone()
        };
        assert!(MeshTrust::from_entry(&other).is_none());
        let garbled = SliceEntry {
            body: vec![0xff; 3],
            ..entry
        };
        assert!(MeshTrust::from_entry(&garbled).expect("is trust").is_err());
    }
}
