//! Candidate parents: the root's standing grant that a node may be a child
//! of any of several relays.
//!
//! `relayctl token create --parent a --parent b --parent c` issues a token
//! that lists the three relays (the node joins the nearest that admits it)
//! and makes the root send a signed slice entry keyed under [`KEY_PREFIX`]
//! to the node and to each candidate. With it, a candidate serves the node
//! on the certificate another candidate issued (so the node, its parent
//! gone, re-parents without a token), and the relays above a candidate let
//! its record of the node replace the one a disconnected candidate still
//! holds. [`Parents::current`] is the parent the root last saw the node
//! under: the node reports no placement status after re-parenting until it
//! names the new parent, and a candidate the node left forgets it on it.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::{SliceEntry, Target};

/// The key prefix of every candidate-parents entry in the slice.
pub const KEY_PREFIX: &str = "parents/";

/// The most candidate parents one node may have.
pub const MAX_CANDIDATES: usize = 8;

/// Why a slice entry under [`KEY_PREFIX`] is not usable.
pub type ParentsError = crate::slice::KeyedEntryError;

/// One relay a node may have as its parent: its name, where to dial it, the
/// relays whose issuers lead from the mesh CA to its certificate, and the
/// key of its own issuer, by which the node and the other candidates
/// recognise it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateParent {
    /// The relay's name.
    pub name: String,
    /// Where to dial it (`host:port`).
    pub addresses: Vec<String>,
    /// The relays between the root and it, top-down, neither included
    /// (as [`crate::token::TokenClaims::parent_issuers`]).
    pub issuers: Vec<String>,
    /// SHA-256 of the SubjectPublicKeyInfo of the relay's own issuer, as
    /// the root recorded it (as
    /// [`crate::token::TokenClaims::parent_issuer_key`]): the certificates
    /// it serves and issues are signed with that key.
    pub issuer_key: [u8; 32],
}

impl CandidateParent {
    /// The issuers a certificate this relay issued is signed through, top
    /// down: its own issuers and then itself.
    pub fn issuer_path(&self) -> Vec<String> {
        let mut path = self.issuers.clone();
        path.push(self.name.clone());
        path
    }
}

/// The relays a node may have as parent, and the one it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parents {
    /// The node (an edge agent).
    pub node: String,
    /// Every relay it may have as parent.
    pub candidates: Vec<CandidateParent>,
    /// The candidate the root last saw the node under; `None` before it
    /// joined.
    pub current: Option<String>,
}

impl Parents {
    /// The entry key for `node`: `parents/<node>`.
    pub fn key_for(node: &str) -> String {
        format!("{KEY_PREFIX}{node}")
    }

    /// The entry's key.
    pub fn key(&self) -> String {
        Self::key_for(&self.node)
    }

    /// Whether `relay` is one of the candidates.
    pub fn allows(&self, relay: &str) -> bool {
        self.candidates
            .iter()
            .any(|candidate| candidate.name == relay)
    }

    /// The unsigned slice entry that carries the grant to the node and to
    /// every candidate (and so to every relay above one, which forwards it).
    pub fn to_entry(&self) -> Result<SliceEntry, CodecError> {
        let mut targets = vec![self.node.clone()];
        targets.extend(self.candidates.iter().map(|c| c.name.clone()));
        Ok(SliceEntry {
            key: self.key(),
            target: Target::Subtrees(targets),
            bundles: Vec::new(),
            body: codec::encode(self)?,
            serial: 0,
            signature: Vec::new(),
        })
    }

    /// The grant an entry carries: `None` if the entry is not one, an error
    /// if it claims to be one but its body does not decode or does not
    /// match its key.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, ParentsError>> {
        crate::slice::decode_keyed(entry, "candidate parents", KEY_PREFIX, Parents::key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn candidate() -> impl Strategy<Value = CandidateParent> {
        (
            "[a-z][a-z0-9-]{0,12}",
            proptest::collection::vec("[a-z0-9.:]{1,20}", 0..3),
            proptest::collection::vec("[a-z][a-z0-9-]{0,12}", 0..3),
            any::<[u8; 32]>(),
        )
            .prop_map(|(name, addresses, issuers, issuer_key)| CandidateParent {
                name,
                addresses,
                issuers,
                issuer_key,
            })
    }

    proptest! {
        #[test]
        fn every_grant_survives_its_entry(
            node in "[a-z][a-z0-9-]{0,20}",
            candidates in proptest::collection::vec(candidate(), 0..MAX_CANDIDATES),
            current in proptest::option::of("[a-z][a-z0-9-]{0,12}"),
        ) {
            let parents = Parents { node: node.clone(), candidates, current };
            let entry = parents.to_entry().expect("test");
            let Target::Subtrees(targets) = &entry.target else {
                panic!("a grant goes to subtrees");
            };
            prop_assert_eq!(&targets[0], &node);
            prop_assert_eq!(targets.len(), parents.candidates.len() + 1);
            prop_assert_eq!(Parents::from_entry(&entry).expect("a grant").expect("decodes"), parents);
        }
    }

    #[test]
    fn a_body_that_names_another_node_is_refused() {
        let mut entry = Parents {
            node: "edge-1".into(),
            candidates: Vec::new(),
            current: None,
        }
        .to_entry()
        .expect("test");
        entry.key = "parents/edge-2".into();
        assert!(Parents::from_entry(&entry).expect("test").is_err());
        entry.key = "move/edge-1".into();
        assert!(Parents::from_entry(&entry).is_none());
    }

    #[test]
    fn a_candidates_issuer_path_ends_with_itself() {
        let candidate = CandidateParent {
            name: "eu-west".into(),
            addresses: Vec::new(),
            issuers: vec!["eu".into()],
            issuer_key: [1; 32],
        };
        assert_eq!(candidate.issuer_path(), ["eu", "eu-west"]);
    }
}
