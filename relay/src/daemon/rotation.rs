//! Rotations of the mesh CA on the daemon's side (see `pki::rotation`).
//!
//! At the root: start or finish one on an admin's order, sign the trust
//! every node adopts, and tell the root's children to renew. On every
//! node: adopt the root's trust (anchors on every link from the next
//! connection on; links already open stay up), have the certificate
//! signed again where a mesh CA signed it with the old key, and report
//! which mesh CA key the chain reaches and which ones it trusts (the
//! labels [`relaymesh_core::CHAIN_CA_LABEL`] and
//! [`relaymesh_core::TRUSTED_CAS_LABEL`]), so the root can tell when the
//! rotation can finish.

use relaymesh_core::Now;
use relaymesh_protocol::MeshTrust;
use tokio::sync::oneshot;

use super::{Daemon, DaemonError};
use crate::pki::{self, RotationStep};

/// What the root did: the trust every node is told now.
pub type RotationReply = oneshot::Sender<Result<MeshTrust, String>>;

impl Daemon {
    /// At the root: takes `step` of a rotation of the mesh CA.
    pub(super) fn rotate_mesh_ca(
        &mut self,
        now: Now,
        step: RotationStep,
    ) -> Result<MeshTrust, String> {
        let identity = self.renewal.identity().clone();
        let validity = self.shared.node_cert_validity;
        let rotated = match step {
            RotationStep::Start => pki::start_mesh_ca_rotation(&identity, validity),
            RotationStep::Finish => pki::finish_mesh_ca_rotation(&identity, validity),
        };
        let (identity, trust) = rotated.map_err(|error| error.to_string())?;
        // Signed before the root uses the new CA: if it cannot be, nothing
        // changed.
        let entry = trust
            .to_entry()
            .map_err(|error| error.to_string())
            .and_then(|entry| {
                self.seal(now, entry)
                    .ok_or_else(|| "the root cannot sign the mesh trust".to_string())
            })?;
        self.renewal
            .trust(&self.store, identity.clone())
            .map_err(|error| error.to_string())?;
        self.shared.identity.set(identity);
        self.core.upsert_local(now, entry);
        tracing::warn!(?step, "rotated the mesh CA");
        self.report_mesh_ca(now);
        // The root's children renew now: through the new CA at the start,
        // and without the cross-signed one at the finish.
        self.core.chain_changed();
        Ok(trust)
    }

    /// On every node but the root: adopts the root's trust.
    pub(super) fn adopt_mesh_trust(
        &mut self,
        now: Now,
        trust: &MeshTrust,
    ) -> Result<(), DaemonError> {
        if self.renewal.identity().is_root() {
            return Ok(());
        }
        let adopted = match pki::with_mesh_trust(self.renewal.identity(), trust) {
            Ok(adopted) => adopted,
            Err(error) => {
                tracing::error!(%error, "cannot adopt the root's mesh trust");
                return Ok(());
            }
        };
        if adopted.anchors() != self.renewal.identity().anchors() {
            tracing::info!(
                anchors = trust.anchors.len(),
                "trusts the mesh CAs the root named"
            );
            self.renewal.trust(&self.store, adopted.clone())?;
            self.shared.identity.set(adopted);
        }
        if pki::needs_mesh_signature(self.renewal.identity(), &trust.signer_key) {
            self.renewal.resign(trust.signer_key);
        }
        self.report_mesh_ca(now);
        Ok(())
    }

    /// Reports which mesh CA key this node's chain reaches and which it
    /// trusts (after a start, a renewal, an adopted trust).
    pub(super) fn report_mesh_ca(&mut self, now: Now) {
        let identity = self.renewal.identity();
        let chain_ca = match pki::chain_ca_key(identity) {
            Ok(key) => pki::short_key(&key),
            Err(error) => {
                tracing::warn!(%error, "cannot tell which mesh CA this node's chain reaches");
                return;
            }
        };
        let trusted = identity
            .anchors()
            .into_iter()
            .filter_map(|anchor| pki::public_key_sha256(anchor).ok())
            .map(|key| pki::short_key(&key))
            .collect();
        self.core.set_mesh_ca_report(now, chain_ca, trusted);
    }
}
