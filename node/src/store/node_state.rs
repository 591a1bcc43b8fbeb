//! The node's own records in its store: identity (certificate, keys,
//! trust), configuration, parent addresses and candidates, and at the root
//! the API's certificates and the next token key.

use super::{
    encode, ApiCertificate, Mutation, Store, StoreError, TokenKey, API_CERTIFICATE, CANDIDATES,
    CONFIG, EXTRA_ANCHORS, IDENTITY, NEXT_TOKEN_KEY, OBJECTS_STORE, PREVIOUS_API_CA,
    PREVIOUS_ISSUER,
};
use crate::config::NodeConfig;
use crate::identity::Identity;

impl Store {
    /// The node's identity, if it was initialized or joined.
    pub fn identity(&self) -> Result<Option<Identity>, StoreError> {
        let Some(mut identity) = self.read::<Identity>(&self.node, IDENTITY)? else {
            return Ok(None);
        };
        identity.extra_anchors_der = self.read(&self.node, EXTRA_ANCHORS)?.unwrap_or_default();
        identity.previous_issuer = self.read(&self.node, PREVIOUS_ISSUER)?.flatten();
        Ok(Some(identity))
    }

    /// The node's configuration, if it was initialized or joined.
    pub fn config(&self) -> Result<Option<NodeConfig>, StoreError> {
        self.read(&self.node, CONFIG)
    }

    /// Writes identity, configuration and a fresh epoch at once: the node is
    /// either fully set up or not at all.
    pub fn initialize(
        &self,
        identity: &Identity,
        config: &NodeConfig,
        epoch: u64,
    ) -> Result<(), StoreError> {
        let mut node = super::journal::Batch::default();
        node.insert(IDENTITY, encode(identity)?);
        node.insert(EXTRA_ANCHORS, encode(&identity.extra_anchors_der)?);
        node.insert(CONFIG, encode(config)?);
        self.node.apply_batch(node).map_err(|e| self.sled(e))?;
        self.apply(&[Mutation::SetEpoch(epoch)])?;
        self.flush()
    }

    /// Replaces the node's identity (a renewed certificate) durably.
    pub fn set_identity(&self, identity: &Identity) -> Result<(), StoreError> {
        let mut node = super::journal::Batch::default();
        node.insert(IDENTITY, encode(identity)?);
        node.insert(EXTRA_ANCHORS, encode(&identity.extra_anchors_der)?);
        node.insert(PREVIOUS_ISSUER, encode(&identity.previous_issuer)?);
        self.node.apply_batch(node).map_err(|e| self.sled(e))?;
        self.flush()
    }

    /// The root API's server certificate chain and key, if this is the root.
    pub fn api_certificate(&self) -> Result<Option<ApiCertificate>, StoreError> {
        self.read(&self.node, API_CERTIFICATE)
    }

    /// At the root, while its token-signing key rotates (`relayctl rotate
    /// token-key`): the next key.
    pub fn next_token_key(&self) -> Result<Option<TokenKey>, StoreError> {
        Ok(self
            .read::<Option<TokenKey>>(&self.node, NEXT_TOKEN_KEY)?
            .flatten())
    }

    /// Keeps (or, with `None`, forgets) the next token-signing key, durably.
    pub fn set_next_token_key(&self, key: Option<&TokenKey>) -> Result<(), StoreError> {
        self.node
            .insert(NEXT_TOKEN_KEY, encode(&key)?)
            .map_err(|e| self.sled(e))?;
        self.flush()
    }

    /// The API CA the root trusted before the one it signs with now, while
    /// it rotates its API CA (`relayctl rotate api-ca`).
    pub fn previous_api_ca(&self) -> Result<Option<crate::pki::ApiAuthority>, StoreError> {
        Ok(self
            .read::<Option<crate::pki::ApiAuthority>>(&self.node, PREVIOUS_API_CA)?
            .flatten())
    }

    /// Keeps the root API's certificate, its CA and the CA before it (see
    /// [`Store::previous_api_ca`]) in one write.
    pub fn set_api_certificates(
        &self,
        certificate: &ApiCertificate,
        previous_ca: Option<&crate::pki::ApiAuthority>,
    ) -> Result<(), StoreError> {
        let mut node = super::journal::Batch::default();
        node.insert(API_CERTIFICATE, encode(certificate)?);
        node.insert(PREVIOUS_API_CA, encode(&previous_ca)?);
        self.node.apply_batch(node).map_err(|e| self.sled(e))?;
        self.flush()
    }

    /// Keeps the root API's server certificate.
    pub fn set_api_certificate(&self, certificate: &ApiCertificate) -> Result<(), StoreError> {
        self.node
            .insert(API_CERTIFICATE, encode(certificate)?)
            .map_err(|e| self.sled(e))?;
        Ok(())
    }

    /// Replaces the parent's addresses (`relay run` / `edge-agent run
    /// --parent-address`) and makes it durable; `Ok(false)` if this node has
    /// no parent to replace them for.
    pub fn set_parent_addresses(&self, addresses: Vec<String>) -> Result<bool, StoreError> {
        let Some(mut config) = self.config()? else {
            return Ok(false);
        };
        let Some(parent) = config.parent.as_mut() else {
            return Ok(false);
        };
        parent.addresses = addresses;
        self.set_config(&config)?;
        self.flush()?;
        Ok(true)
    }

    /// Where the root's API keeps its objects.
    pub fn objects_store(&self) -> Result<crate::config::ObjectsStore, StoreError> {
        Ok(self.read(&self.node, OBJECTS_STORE)?.unwrap_or_default())
    }

    /// Keeps where the root's API keeps its objects.
    pub fn set_objects_store(&self, store: &crate::config::ObjectsStore) -> Result<(), StoreError> {
        self.node
            .insert(OBJECTS_STORE, encode(store)?)
            .map_err(|e| self.sled(e))?;
        Ok(())
    }

    /// The candidate parents this node joined with (empty for one parent;
    /// see [`relaymesh_protocol::parents`]).
    pub fn candidates(&self) -> Result<Vec<relaymesh_protocol::CandidateParent>, StoreError> {
        Ok(self.read(&self.node, CANDIDATES)?.unwrap_or_default())
    }

    /// Keeps the candidate parents this node joined with.
    pub fn set_candidates(
        &self,
        candidates: &[relaymesh_protocol::CandidateParent],
    ) -> Result<(), StoreError> {
        if candidates.is_empty() {
            self.node.remove(CANDIDATES).map_err(|e| self.sled(e))?;
        } else {
            self.node
                .insert(CANDIDATES, encode(&candidates.to_vec())?)
                .map_err(|e| self.sled(e))?;
        }
        Ok(())
    }

    /// Replaces the configuration (for example, new parent addresses).
    pub fn set_config(&self, config: &NodeConfig) -> Result<(), StoreError> {
        self.node
            .insert(CONFIG, encode(config)?)
            .map_err(|e| self.sled(e))?;
        Ok(())
    }
}
