//! The mesh's trust anchors arriving in the slice (see
//! [`relaymesh_protocol::trust`]), and what this node reports of its own
//! certificates while the root rotates its mesh CA.
//!
//! The core holds no certificates: it hands the daemon the root's decision
//! ([`Action::MeshTrust`]), and the daemon, once it has adopted it, says
//! which mesh CA key its chain reaches and which anchors it trusts
//! ([`Core::set_mesh_ca_report`]), reported up as two labels so the root
//! can tell when every node has moved over.

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

    /// What this node's certificates say now: the mesh CA key its chain
    /// reaches and the keys it trusts (short hex each), reported up as
    /// [`CHAIN_CA_LABEL`] and [`TRUSTED_CAS_LABEL`].
    pub fn set_mesh_ca_report(&mut self, now: Now, chain_ca: String, trusted: Vec<String>) {
        let report = Some((chain_ca, trusted.join(".")));
        if self.mesh_ca_report == report {
            return;
        }
        self.mesh_ca_report = report;
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
