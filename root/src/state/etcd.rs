//! The root's own state on etcd, beside its objects (`relay init --store
//! etcd`): users, issued tokens and the API's certificates, under `s/` of
//! the root's prefix. The certificates hold private keys (the API CA's and
//! the server's), so they are sealed with the root's secrets key
//! ([`SecretsKey`]) before they leave the process: etcd, its snapshots and
//! its backups never see them in plaintext.
//!
//! What the root's loop writes itself (the issuer keys it records from the
//! inventory, the next token-signing key while it rotates) stays in the
//! node's store, where the loop keeps the rest of its state.

use std::sync::Arc;

use relaymesh_apiserver::etcd::Etcd;
use relaymesh_apiserver::objects::{Expect, Replicated};
use relaymesh_node::pki::ApiAuthority;
use relaymesh_node::store::{
    ApiCertificate, PruneGate, Store, TokenKey, TokenRecord, UserRecord, KEEP_EXPIRED_SECS,
};
use relaymesh_protocol::codec;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::secrets::SecretsKey;
use super::{RootState, StateError};

/// The prefix of the root's state within its etcd prefix.
pub const STATE_PREFIX: &str = "s/";

/// How many times a read-modify-write reads again after another writer.
const ATTEMPTS: usize = 16;

const USERS: &str = "users/";
const TOKENS: &str = "tokens/";
const API_CERTIFICATE: &str = "api-certificate";
const PREVIOUS_API_CA: &str = "api-ca-previous";

/// The root's state in etcd; the node's store for what its loop writes.
#[derive(Clone)]
pub struct EtcdState {
    etcd: Etcd,
    node: Store,
    key: Arc<SecretsKey>,
    /// When issuing a token last forgot the expired ones.
    tokens_pruned: Arc<PruneGate>,
}

impl EtcdState {
    /// The state under `etcd`'s prefix (the root's), sealing with `key`.
    pub fn new(etcd: &Etcd, node: Store, key: SecretsKey) -> Self {
        Self {
            etcd: etcd.within(STATE_PREFIX),
            node,
            key: Arc::new(key),
            tokens_pruned: Arc::default(),
        }
    }

    fn read<T: DeserializeOwned>(&self, key: &str) -> Result<Option<(T, u64)>, StateError> {
        let Some((bytes, revision)) = self.etcd.get_value(key.as_bytes()).map_err(boxed)? else {
            return Ok(None);
        };
        Ok(Some((codec::decode(&bytes).map_err(boxed)?, revision)))
    }

    fn list<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<(String, T)>, StateError> {
        let (entries, _) = self.etcd.range(prefix.as_bytes(), None).map_err(boxed)?;
        entries
            .iter()
            .map(|(key, value, _)| {
                Ok((
                    String::from_utf8_lossy(key).into_owned(),
                    codec::decode(value).map_err(boxed)?,
                ))
            })
            .collect()
    }

    /// Changes the record at `key` with `change` (given what it holds),
    /// checked against concurrent writers; what was stored.
    fn update<T, F>(&self, key: &str, change: F) -> Result<Option<T>, StateError>
    where
        T: Serialize + DeserializeOwned,
        F: Fn(Option<T>) -> Option<T>,
    {
        for _ in 0..ATTEMPTS {
            let (old, expect) = match self.read::<T>(key)? {
                Some((old, revision)) => (Some(old), Expect::Revision(revision)),
                None => (None, Expect::Absent),
            };
            let Some(new) = change(old) else {
                return Ok(None);
            };
            let bytes = codec::encode(&new).map_err(boxed)?;
            if self
                .etcd
                .commit(key.as_bytes(), Some(bytes), expect)
                .map_err(boxed)?
                .is_some()
            {
                return Ok(Some(new));
            }
        }
        Err(boxed(std::io::Error::other(format!(
            "{key}: other writers changed it {ATTEMPTS} times while this one tried"
        ))))
    }

    fn sealed<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StateError> {
        let Some((sealed, _)) = self.etcd.get_value(name.as_bytes()).map_err(boxed)? else {
            return Ok(None);
        };
        let plain = self.key.open(name, &sealed).map_err(boxed)?;
        Ok(Some(codec::decode(&plain).map_err(boxed)?))
    }

    fn seal<T: Serialize>(&self, name: &str, value: &T) -> Result<Vec<u8>, StateError> {
        let plain = codec::encode(value).map_err(boxed)?;
        self.key.seal(name, &plain).map_err(boxed)
    }
}

impl RootState for EtcdState {
    fn users(&self) -> Result<Vec<UserRecord>, StateError> {
        Ok(self
            .list::<UserRecord>(USERS)?
            .into_iter()
            .map(|(_, user)| user)
            .collect())
    }

    fn record_user(&self, record: &UserRecord) -> Result<(), StateError> {
        // A user revoked before stays revoked, as in the node's store.
        self.update(
            &format!("{USERS}{}", record.name),
            |old: Option<UserRecord>| {
                Some(UserRecord {
                    revoked_unix: record.revoked_unix.or(old.and_then(|old| old.revoked_unix)),
                    ..record.clone()
                })
            },
        )?;
        Ok(())
    }

    fn revoke_user(&self, name: &str, now_unix: u64) -> Result<UserRecord, StateError> {
        let updated = self.update(&format!("{USERS}{name}"), |old: Option<UserRecord>| {
            let mut record = old.unwrap_or_else(|| UserRecord {
                name: name.to_string(),
                groups: Vec::new(),
                issued_unix: 0,
                not_after_unix: 0,
                revoked_unix: None,
            });
            record.revoked_unix = record.revoked_unix.or(Some(now_unix));
            Some(record)
        })?;
        updated.ok_or_else(|| boxed(std::io::Error::other("the user record vanished")))
    }

    fn issued_tokens(&self) -> Result<Vec<TokenRecord>, StateError> {
        let mut records: Vec<TokenRecord> = self
            .list::<TokenRecord>(TOKENS)?
            .into_iter()
            .map(|(_, record)| record)
            .collect();
        records.sort_by_key(|record| (record.issued_unix, record.id));
        Ok(records)
    }

    fn record_issued_token(&self, record: &TokenRecord, now_unix: u64) -> Result<(), StateError> {
        let mut writes = Vec::new();
        if self.tokens_pruned.due(now_unix) {
            for old in self.issued_tokens()? {
                if old.not_after_unix.saturating_add(KEEP_EXPIRED_SECS) < now_unix {
                    writes.push((token_key(&old.id).into_bytes(), None));
                }
            }
        }
        writes.push((
            token_key(&record.id).into_bytes(),
            Some(codec::encode(record).map_err(boxed)?),
        ));
        self.etcd.apply_all(writes).map_err(boxed)?;
        Ok(())
    }

    fn revoke_issued_token(&self, id: &[u8; 16]) -> Result<Option<TokenRecord>, StateError> {
        self.update(&token_key(id), |old: Option<TokenRecord>| {
            old.map(|mut record| {
                record.revoked = true;
                record
            })
        })
    }

    fn issuer_key(&self, relay: &str) -> Result<Option<[u8; 32]>, StateError> {
        RootState::issuer_key(&self.node, relay)
    }

    fn expect_new_issuer_key(&self, relay: &str, not_after_unix: u64) -> Result<(), StateError> {
        RootState::expect_new_issuer_key(&self.node, relay, not_after_unix)
    }

    fn next_token_key(&self) -> Result<Option<TokenKey>, StateError> {
        RootState::next_token_key(&self.node)
    }

    fn api_certificate(&self) -> Result<Option<ApiCertificate>, StateError> {
        self.sealed(API_CERTIFICATE)
    }

    fn previous_api_ca(&self) -> Result<Option<ApiAuthority>, StateError> {
        self.sealed(PREVIOUS_API_CA)
    }

    fn set_api_certificates(
        &self,
        certificate: &ApiCertificate,
        previous_ca: Option<&ApiAuthority>,
    ) -> Result<(), StateError> {
        let mut writes = vec![(
            API_CERTIFICATE.as_bytes().to_vec(),
            Some(self.seal(API_CERTIFICATE, certificate)?),
        )];
        writes.push((
            PREVIOUS_API_CA.as_bytes().to_vec(),
            previous_ca
                .map(|previous| self.seal(PREVIOUS_API_CA, previous))
                .transpose()?,
        ));
        self.etcd.apply_all(writes).map_err(boxed)?;
        Ok(())
    }
}

fn token_key(id: &[u8; 16]) -> String {
    format!("{TOKENS}{}", relaymesh_protocol::revocation::hex(id))
}

fn boxed(error: impl std::error::Error + Send + Sync + 'static) -> StateError {
    StateError(Box::new(error))
}
