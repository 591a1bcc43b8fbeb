//! The mesh's trust anchors arriving in the slice (see
//! [`relaymesh_protocol::trust`]), and what this node reports of its own
//! certificates while the root rotates its mesh CA.
//!
//! The core holds no certificates: it hands the daemon the root's decision
//! ([`Action::MeshTrust`]), and the daemon, once it has adopted it, says
//! which mesh CA key its chain reaches and which anchors it trusts
//! ([`Core::set_certificate_labels`]), reported up as labels so the root
//! can tell when every node has moved over.

use std::collections::BTreeMap;

use relaymesh_protocol::MeshTrust;

use super::slice::Changed;
use super::{Action, Core, Now};

/// The label with the first bytes (hex) of the mesh CA key this node's
/// certificate chain reaches.
pub const CHAIN_CA_LABEL: &str = "relaymesh.dev/chain-ca";
/// The label with the first bytes (hex) of every mesh CA key this node
/// trusts, joined with `.`.
pub const TRUSTED_CAS_LABEL: &str = "relaymesh.dev/trusted-cas";
/// The label with the first bytes (hex) of every key whose signatures on
/// slice entries this node accepts, joined with `.`.
pub const TOKEN_KEYS_LABEL: &str = "relaymesh.dev/token-keys";
/// The label with the first bytes (hex) of the key that signed this node's
/// certificate: its parent's issuer key (a mesh CA's for the root's
/// children).
pub const SIGNED_BY_LABEL: &str = "relaymesh.dev/signed-by";
/// On a relay whose issuer key rotated during a rotation of the mesh CA:
/// the first bytes (hex) of the mesh CA key the root signed with then.
pub const ISSUER_ROTATED_LABEL: &str = "relaymesh.dev/issuer-rotated";

impl Core {
    /// Hands the daemon the root's trust decision, if it is among
    /// `changed`.
    pub(super) fn apply_trust(&mut self, now: Now, changed: &[Changed]) {
        if !changed
            .iter()
            .any(|change| change.key == relaymesh_protocol::trust::KEY)
        {
            return;
        }
        let Some(entry) = self.slice.entry(relaymesh_protocol::trust::KEY) else {
            return;
        };
        match MeshTrust::from_entry(entry) {
            Some(Ok(trust)) => {
                self.actions.push_back(Action::MeshTrust(trust));
                // The keys it accepts changed with it.
                if self.relabel() {
                    self.schedule_inventory_flush(now);
                }
            }
            // Signed by the root yet unreadable: a newer root's format.
            Some(Err(error)) => tracing::error!(%error, "unreadable mesh trust"),
            None => {}
        }
    }

    /// The root's trust decision this node holds, if the root ever made
    /// one: a daemon that starts adopts it again (it may have stopped
    /// between storing the entry and adopting it).
    pub fn mesh_trust(&self) -> Option<MeshTrust> {
        MeshTrust::from_entry(self.slice.entry(relaymesh_protocol::trust::KEY)?)?.ok()
    }

    /// The keys whose signatures on slice entries this node accepts: those
    /// the root's trust names, else the one it was given at join.
    pub fn root_keys(&self) -> Vec<Vec<u8>> {
        match self.mesh_trust() {
            Some(trust) if !trust.token_keys.is_empty() => trust.token_keys,
            _ => vec![self.root_key.clone()],
        }
    }

    /// [`TOKEN_KEYS_LABEL`]'s value.
    pub(super) fn token_keys_label(&self) -> String {
        self.root_keys()
            .iter()
            .map(|key| short_hex(key))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// What this node's certificates say now, as labels the daemon
    /// makes (the mesh CA key its chain reaches, the keys it trusts, the
    /// key that signed it, a relay's issuer key and whether it rotated):
    /// they replace what it said before, and override labels of the same
    /// name given at start.
    pub fn set_certificate_labels(&mut self, now: Now, labels: BTreeMap<String, String>) {
        if self.certificate_labels == labels {
            return;
        }
        self.certificate_labels = labels;
        if self.relabel() {
            self.schedule_inventory_flush(now);
        }
    }
}

/// The first six bytes of `key` in hex, as the labels carry keys.
pub(crate) fn short_hex(key: &[u8]) -> String {
    key.iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
