//! The deny list: the revocations a relay holds, as its listener and its
//! admission check them.
//!
//! Built from the slice's revocation entries at start-up and kept current
//! by the loop as [`crate::core::Action::Revoked`] arrives. A node revoked
//! at time T loses every certificate issued to it at or before T — its TLS
//! certificate and, for a relay, its issuer, which takes everything that
//! issuer signed with it. A node that joins again later under the same name
//! gets certificates issued after T and is not affected.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::{Revocation, SliceEntry};

use crate::pki;

/// The revoked nodes and tokens a relay knows of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenyList {
    /// Revoked node → when (Unix seconds).
    nodes: BTreeMap<String, u64>,
    tokens: BTreeSet<[u8; 16]>,
}

impl DenyList {
    /// The deny list of a slice's revocation entries (others are skipped).
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a SliceEntry>) -> Self {
        let mut list = Self::default();
        for entry in entries {
            if let Some(Ok(revocation)) = Revocation::from_entry(entry) {
                list.insert(&revocation);
            }
        }
        list
    }

    /// Adds a revocation.
    pub fn insert(&mut self, revocation: &Revocation) {
        match revocation {
            Revocation::Node { name, at_unix } => {
                let at = self.nodes.entry(name.clone()).or_insert(*at_unix);
                *at = (*at).max(*at_unix);
            }
            Revocation::Token { id, .. } => {
                self.tokens.insert(*id);
            }
        }
    }

    /// Why a peer presenting `chain` (leaf first, DER) is refused: the
    /// first certificate in it issued to a revoked node before it was
    /// revoked. A certificate that cannot be read is not this check's to
    /// judge (the TLS handshake has verified the chain already).
    pub fn refuses_chain(&self, chain: &[Vec<u8>]) -> Option<String> {
        if self.nodes.is_empty() {
            return None;
        }
        chain.iter().find_map(|der| {
            let holder = pki::holder_of(der).ok().flatten()?;
            let revoked_at = *self.nodes.get(&holder.name)?;
            (holder.issued_unix <= revoked_at).then(|| {
                format!(
                    "node {:?} was revoked by the root (a certificate issued to it at {} is in the chain; revoked at {revoked_at})",
                    holder.name, holder.issued_unix
                )
            })
        })
    }

    /// Whether the join token with `id` was revoked.
    pub fn refuses_token(&self, id: &[u8; 16]) -> bool {
        self.tokens.contains(id)
    }
}
