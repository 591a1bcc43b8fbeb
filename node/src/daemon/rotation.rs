//! Rotations of the mesh CA and of the token-signing key on the daemon's
//! side (see `pki::rotation`).
//!
//! At the root: start or finish one on an admin's order, sign the trust
//! every node adopts, and tell the root's children to renew. On every
//! node: adopt the root's trust (anchors on every link from the next
//! connection on; links already open stay up; the key that signs tokens),
//! have the certificate signed again where a mesh CA signed it with the
//! old key, and report which mesh CA key the chain reaches and which ones
//! it trusts (the labels [`relaymesh_core::CHAIN_CA_LABEL`] and
//! [`relaymesh_core::TRUSTED_CAS_LABEL`]; the core reports the keys it
//! accepts on entries, [`relaymesh_core::TOKEN_KEYS_LABEL`]), so the root
//! can tell when a rotation can finish.
//!
//! The token-signing key rotates in two steps too. Start: the root keeps
//! signing with the old key and tells every node, in a trust entry the old
//! key signs, to accept entries the new one signs as well. Finish: the
//! root signs with the new key alone, signs every entry it holds again
//! with it (their content unchanged, so no cluster applies anything), and
//! tells every node to accept the new key alone.

use relaymesh_core::Now;
use relaymesh_protocol::MeshTrust;
use tokio::sync::oneshot;

use super::{Daemon, DaemonError};
use crate::pki::{self, RotationStep};

/// What the root did: the trust every node is told now.
pub type RotationReply = oneshot::Sender<Result<MeshTrust, String>>;

impl Daemon {
    /// At the root: takes `step` of a rotation of the mesh CA.
    pub(super) async fn rotate_mesh_ca(
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
        let identity = rotated.map_err(|error| error.to_string())?;
        self.renewal
            .trust(&self.store, identity.clone(), self.core.renewal(), now)
            .await
            .map_err(|error| error.to_string())?;
        self.shared.identity.set(identity);
        let trust = self.publish_trust(now)?;
        tracing::warn!(?step, "rotated the mesh CA");
        // Grants name the root by the key it signs with.
        self.regrant_current_keys(now);
        self.report_mesh_ca(now);
        // The root's children renew now: through the new CA at the start,
        // and without the cross-signed one at the finish.
        self.core.chain_changed();
        Ok(trust)
    }

    /// At the root: takes `step` of a rotation of the token-signing key.
    pub(super) async fn rotate_token_key(
        &mut self,
        now: Now,
        step: RotationStep,
    ) -> Result<MeshTrust, String> {
        let next = self
            .store
            .next_token_key()
            .map_err(|error| error.to_string())?;
        match (step, next) {
            (RotationStep::Start, Some(_)) => {
                Err("a rotation of the token-signing key is under way; finish it first".into())
            }
            (RotationStep::Finish, None) => {
                Err("no rotation of the token-signing key is under way; start one first".into())
            }
            (RotationStep::Start, None) => {
                let key =
                    relaymesh_core::seal::generate_key().map_err(|error| error.to_string())?;
                self.store
                    .set_next_token_key(Some(&key))
                    .map_err(|error| error.to_string())?;
                // Signed with the current key, which every node accepts.
                let trust = self.publish_trust(now)?;
                tracing::warn!("started a rotation of the token-signing key: every node accepts entries the new key signs");
                Ok(trust)
            }
            (RotationStep::Finish, Some((signing, public))) => {
                let identity = crate::identity::Identity {
                    token_signing_key: Some(signing),
                    token_key: public,
                    ..self.renewal.identity().clone()
                };
                self.renewal
                    .trust(&self.store, identity.clone(), self.core.renewal(), now)
                    .await
                    .map_err(|error| error.to_string())?;
                self.shared.identity.set(identity);
                self.store
                    .set_next_token_key(None)
                    .map_err(|error| error.to_string())?;
                // Every entry signed again with the new key before the
                // trust drops the old one; their content is the same.
                let entries: Vec<relaymesh_protocol::SliceEntry> = self
                    .core
                    .entries()
                    .filter(|entry| entry.key != relaymesh_protocol::trust::KEY)
                    .cloned()
                    .collect();
                let count = entries.len();
                for entry in entries {
                    let entry = self
                        .reseal(now, entry)
                        .ok_or("the root cannot sign with its new key")?;
                    self.core.upsert_local(now, entry);
                }
                let trust = self.publish_trust(now)?;
                tracing::warn!(entries = count, "finished the rotation of the token-signing key: entries signed again, the new key alone is accepted");
                Ok(trust)
            }
        }
    }

    /// The trust the root `identity` tells every node, with the next
    /// token-signing key while one rotates.
    fn trust_of(&self, identity: &crate::identity::Identity) -> Result<MeshTrust, String> {
        let next = self
            .store
            .next_token_key()
            .map_err(|error| error.to_string())?;
        pki::current_trust(identity, next.as_ref().map(|(_, public)| public.as_slice()))
            .map_err(|error| error.to_string())
    }

    /// At the root: signs and publishes the trust as it stands.
    fn publish_trust(&mut self, now: Now) -> Result<MeshTrust, String> {
        let trust = self.trust_of(self.renewal.identity())?;
        let entry = trust
            .to_entry()
            .map_err(|error| error.to_string())
            .and_then(|entry| {
                self.seal(now, entry)
                    .ok_or_else(|| "the root cannot sign the mesh trust".to_string())
            })?;
        self.core.upsert_local(now, entry);
        self.shared
            .trust_published
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(trust)
    }

    /// On every node but the root: adopts the root's trust.
    pub(super) async fn adopt_mesh_trust(
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
        let current = self.renewal.identity();
        if adopted.anchors() != current.anchors() || adopted.token_key != current.token_key {
            tracing::info!(
                anchors = trust.anchors.len(),
                token_keys = trust.token_keys.len(),
                "trusts the mesh CAs and the token key the root named"
            );
            self.renewal
                .trust(&self.store, adopted.clone(), self.core.renewal(), now)
                .await?;
            self.shared.identity.set(adopted);
        }
        if pki::needs_mesh_signature(self.renewal.identity(), &trust.signer_key) {
            self.renewal
                .resign(trust.signer_key, self.core.renewal(), now);
        }
        // A relay's issuer key rotates once in each rotation of the mesh
        // CA, and the old one goes when it finishes.
        let identity = self.renewal.identity();
        let rotating = trust.anchors.len() > 1;
        if rotating && identity.previous_issuer.is_none() {
            self.renewal
                .rotate_issuer(trust.signer_key, self.core.renewal(), now);
        } else if !rotating && identity.previous_issuer.is_some() {
            self.renewal
                .drop_previous_issuer(&self.store, self.core.renewal(), now)
                .await?;
        }
        self.report_mesh_ca(now);
        Ok(())
    }

    /// Reports what this node's certificates say (after a start, a
    /// renewal, an adopted trust), once the root's trust exists: before,
    /// every node holds the one CA it joined with, and a million labels
    /// saying so would only cost memory at the root. The labels: which
    /// mesh CA key its chain reaches and which it trusts, the key that
    /// signed its certificate, and at a relay its issuer key (which the
    /// root records, see `store::issuer_keys`) and whether it rotated.
    pub(super) fn report_mesh_ca(&mut self, now: Now) {
        if self.core.mesh_trust().is_none() {
            return;
        }
        let identity = self.renewal.identity();
        let chain_ca = match pki::chain_ca_key(identity) {
            Ok(key) => pki::short_key(&key),
            Err(error) => {
                tracing::warn!(%error, "cannot tell which mesh CA this node's chain reaches");
                return;
            }
        };
        let trusted: Vec<String> = identity
            .anchors()
            .into_iter()
            .filter_map(|anchor| pki::public_key_sha256(anchor).ok())
            .map(|key| pki::short_key(&key))
            .collect();
        let mut labels = std::collections::BTreeMap::from([
            (relaymesh_core::CHAIN_CA_LABEL.to_string(), chain_ca),
            (
                relaymesh_core::TRUSTED_CAS_LABEL.to_string(),
                trusted.join("."),
            ),
        ]);
        if !identity.is_root() {
            if let Ok(key) = pki::chain_signer_key(&identity.tls_chain_der, &identity.anchors()) {
                labels.insert(
                    relaymesh_core::SIGNED_BY_LABEL.to_string(),
                    pki::short_key(&key),
                );
            }
            if let Some(issuer) = &identity.issuer {
                if let Ok(key) = pki::public_key_sha256(&issuer.cert_der) {
                    labels = crate::store::with_issuer_key_label(labels, Some(key));
                }
            }
            if let Some(previous) = &identity.previous_issuer {
                labels.insert(
                    relaymesh_core::ISSUER_ROTATED_LABEL.to_string(),
                    pki::short_key(&previous.during_ca),
                );
            }
        }
        self.core.set_certificate_labels(now, labels);
    }
}
