//! The deny list: the revocations a relay holds, as its listener and its
//! admission check them.
//!
//! Built from the slice's revocation entries at start-up and kept current
//! by the loop as [`relaymesh_core::Action::Revoked`] arrives. A node revoked
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

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use relaymesh_protocol::Role;

    use super::*;
    use crate::identity::Issuer;

    /// A chain as eu-west presents it: its leaf, then eu's issuer, which the
    /// root's mesh CA signed.
    fn eu_west_chain() -> Vec<Vec<u8>> {
        let root = pki::create_mesh("root", &[]).expect("mesh").identity;
        let ca = root.issuer.expect("the root issues");
        let eu_keys = pki::new_node_keys("eu", Role::Relay).expect("keys");
        let eu_issuer_cert = pki::sign_issuer_cert(
            &ca,
            eu_keys
                .issuer_csr_der
                .as_deref()
                .expect("a relay asks for an issuer"),
            "eu",
        )
        .expect("signed");
        let eu_issuer = Issuer {
            cert_der: eu_issuer_cert.clone(),
            chain_der: Vec::new(),
            key_der: eu_keys.issuer_key_der.expect("issuer key"),
        };
        let west_keys = pki::new_node_keys("eu-west", Role::Relay).expect("keys");
        let leaf = pki::sign_node_cert(
            &eu_issuer,
            &west_keys.tls_csr_der,
            "eu-west",
            Role::Relay,
            pki::DEFAULT_NODE_CERT_VALIDITY,
        )
        .expect("signed");
        vec![leaf, eu_issuer_cert]
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs())
    }

    #[test]
    fn revoking_a_relay_voids_what_its_issuer_signed() {
        let chain = eu_west_chain();
        let mut list = DenyList::default();
        assert_eq!(list.refuses_chain(&chain), None);
        list.insert(&Revocation::Node {
            name: "us".into(),
            at_unix: now() + 10,
        });
        assert_eq!(list.refuses_chain(&chain), None, "another relay");
        list.insert(&Revocation::Node {
            name: "eu".into(),
            at_unix: now() + 10,
        });
        let reason = list.refuses_chain(&chain).expect("refused");
        assert!(reason.contains("node \"eu\" was revoked"), "{reason}");

        let mut list = DenyList::default();
        list.insert(&Revocation::Node {
            name: "eu-west".into(),
            at_unix: now() + 10,
        });
        let reason = list.refuses_chain(&chain).expect("refused");
        assert!(reason.contains("node \"eu-west\""), "{reason}");
    }

    #[test]
    fn a_node_joined_again_after_its_revocation_is_not_refused() {
        let mut list = DenyList::default();
        // Revoked a minute before these certificates were signed.
        list.insert(&Revocation::Node {
            name: "eu".into(),
            at_unix: now() - 60,
        });
        assert_eq!(list.refuses_chain(&eu_west_chain()), None);
    }

    #[test]
    fn tokens_are_refused_by_id_and_entries_rebuild_the_list() {
        let revocations = [
            Revocation::Token {
                id: [7; 16],
                name: "edge-1".into(),
                not_after_unix: 1,
            },
            Revocation::Node {
                name: "eu".into(),
                at_unix: 5,
            },
        ];
        let entries: Vec<SliceEntry> = revocations
            .iter()
            .map(|revocation| revocation.to_entry().expect("encodes"))
            .collect();
        let list = DenyList::from_entries(&entries);
        assert!(list.refuses_token(&[7; 16]));
        assert!(!list.refuses_token(&[8; 16]));
        let mut expected = DenyList::default();
        revocations
            .iter()
            .for_each(|revocation| expected.insert(revocation));
        assert_eq!(list, expected);
    }
}
