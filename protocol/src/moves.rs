//! Moves: the root's decision that a node leaves its parent for another.
//!
//! `relayctl move NODE --to RELAY` makes the root issue a join token for the
//! node under the new parent and send it, as a signed slice entry keyed
//! under [`KEY_PREFIX`], down the tree to the node alone. The node joins the
//! new parent with it (new keys, a certificate from the new parent's
//! issuer), tells its old parent it is leaving (the old parent forgets it
//! and its status at once) and dials the new one, keeping its store: its
//! slice, bundles and applied objects. It reports no placement status to the
//! new parent until the root has seen it there and marked the move
//! [`MoveState::Settled`]: by then every relay between the two parents has
//! dropped what the old parent reported of it, so no summary on the way up
//! counts the node twice.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::{SliceEntry, Target};

/// The key prefix of every move entry in the slice.
pub const KEY_PREFIX: &str = "move/";

/// Why a slice entry under [`KEY_PREFIX`] is not usable.
pub type MoveError = crate::slice::KeyedEntryError;

/// Where a move stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoveState {
    /// The node is to join `to` with the token and leave `from`.
    Moving,
    /// The root's inventory shows the node under `to`: it may report its
    /// status there.
    Settled,
}

/// A node's move from one parent relay to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The node that moves.
    pub node: String,
    /// Its parent when the move was asked for.
    pub from: String,
    /// The relay it moves to.
    pub to: String,
    /// The join token for `node` under `to`, single use (see
    /// [`crate::token`]).
    pub token: String,
    /// When the root asked for the move, in milliseconds since the Unix
    /// epoch.
    pub at_unix_ms: u64,
    /// Where it stands.
    pub state: MoveState,
}

impl Move {
    /// The entry key of a move of `node`: `move/<node>`.
    pub fn key_for(node: &str) -> String {
        format!("{KEY_PREFIX}{node}")
    }

    /// The entry's key.
    pub fn key(&self) -> String {
        Self::key_for(&self.node)
    }

    /// The unsigned slice entry that carries this move to the node (and to
    /// the relays above it, which forward it).
    pub fn to_entry(&self) -> Result<SliceEntry, CodecError> {
        Ok(SliceEntry {
            key: self.key(),
            target: Target::Subtrees(vec![self.node.clone()]),
            bundles: Vec::new(),
            body: codec::encode(self)?,
            serial: 0,
            signature: Vec::new(),
        })
    }

    /// The move an entry carries: `None` if the entry is not a move, an
    /// error if it claims to be one but its body does not decode or does not
    /// match its key.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, MoveError>> {
        crate::slice::decode_keyed(entry, "move", KEY_PREFIX, Move::key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_move_survives_its_entry(
            node in "[a-z][a-z0-9-]{0,20}",
            from in "[a-z][a-z0-9-]{0,20}",
            to in "[a-z][a-z0-9-]{0,20}",
            token in "[a-zA-Z0-9._-]{0,64}",
            at_unix_ms in any::<u64>(),
            settled in any::<bool>(),
        ) {
            let moved = Move {
                node: node.clone(),
                from,
                to,
                token,
                at_unix_ms,
                state: if settled { MoveState::Settled } else { MoveState::Moving },
            };
            let entry = moved.to_entry().expect("test");
            prop_assert_eq!(&entry.target, &Target::Subtrees(vec![node]));
            prop_assert_eq!(Move::from_entry(&entry).expect("a move").expect("decodes"), moved);
        }
    }

    #[test]
    fn a_body_that_names_another_node_is_refused() {
        let mut entry = Move {
            node: "edge-1".into(),
            from: "eu".into(),
            to: "us".into(),
            token: String::new(),
            at_unix_ms: 1,
            state: MoveState::Moving,
        }
        .to_entry()
        .expect("test");
        entry.key = "move/edge-2".into();
        assert!(Move::from_entry(&entry).expect("test").is_err());
        entry.key = "placement/shop/web".into();
        assert!(Move::from_entry(&entry).is_none());
    }
}
