//! The root's own state, behind a trait: users, the tokens it issued, the
//! relays' issuer keys, the next token-signing key and the API's
//! certificates. The node's sled store is the embedded implementation;
//! [`EtcdState`] keeps users, tokens and the API's certificates (sealed
//! with [`SecretsKey`]) on etcd for a root whose objects are there. The
//! objects the API serves sit behind
//! `relaymesh_apiserver::objects::ObjectBackend`.
//!
//! What the root's loop itself keeps (its slice, its identity, the issuer
//! keys it records from the inventory) stays in the node's store.

mod etcd;
mod secrets;

pub use etcd::{EtcdState, STATE_PREFIX};
pub use secrets::{SecretsError, SecretsKey, SECRETS_KEY_FILE};

use relaymesh_node::pki::ApiAuthority;
use relaymesh_node::store::{ApiCertificate, Store, StoreError, TokenKey, TokenRecord, UserRecord};

/// The root's state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the root's state: {0}")]
pub struct StateError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl From<StoreError> for StateError {
    fn from(error: StoreError) -> Self {
        Self(Box::new(error))
    }
}

/// What the root's API reads and writes of its own state. Each write is
/// durable when it returns.
pub trait RootState: Send + Sync + 'static {
    /// Every user certificate the root issued, by name.
    fn users(&self) -> Result<Vec<UserRecord>, StateError>;
    /// Records a user certificate the root issued.
    fn record_user(&self, record: &UserRecord) -> Result<(), StateError>;
    /// Marks user `name` revoked at `now_unix`; its record.
    fn revoke_user(&self, name: &str, now_unix: u64) -> Result<UserRecord, StateError>;
    /// Every join token the root issued and still remembers, oldest first.
    fn issued_tokens(&self) -> Result<Vec<TokenRecord>, StateError>;
    /// Records a join token the root issued (forgetting long-expired ones).
    fn record_issued_token(&self, record: &TokenRecord, now_unix: u64) -> Result<(), StateError>;
    /// Marks token `id` revoked; its record, if the root issued it.
    fn revoke_issued_token(&self, id: &[u8; 16]) -> Result<Option<TokenRecord>, StateError>;
    /// The issuer key the root recorded for `relay`.
    fn issuer_key(&self, relay: &str) -> Result<Option<[u8; 32]>, StateError>;
    /// `relay` may join again with a new issuer key until `not_after_unix`.
    fn expect_new_issuer_key(&self, relay: &str, not_after_unix: u64) -> Result<(), StateError>;
    /// The next token-signing key, while it rotates.
    fn next_token_key(&self) -> Result<Option<TokenKey>, StateError>;
    /// The API's serving certificate and its CA.
    fn api_certificate(&self) -> Result<Option<ApiCertificate>, StateError>;
    /// The API CA before the current one, while it rotates.
    fn previous_api_ca(&self) -> Result<Option<ApiAuthority>, StateError>;
    /// Keeps the API's certificate and the CA before it in one write.
    fn set_api_certificates(
        &self,
        certificate: &ApiCertificate,
        previous_ca: Option<&ApiAuthority>,
    ) -> Result<(), StateError>;
}

/// The embedded default: the root node's own sled store.
impl RootState for Store {
    fn users(&self) -> Result<Vec<UserRecord>, StateError> {
        Ok(Store::users(self)?)
    }

    fn record_user(&self, record: &UserRecord) -> Result<(), StateError> {
        Ok(Store::record_user(self, record)?)
    }

    fn revoke_user(&self, name: &str, now_unix: u64) -> Result<UserRecord, StateError> {
        Ok(Store::revoke_user(self, name, now_unix)?)
    }

    fn issued_tokens(&self) -> Result<Vec<TokenRecord>, StateError> {
        Ok(Store::issued_tokens(self)?)
    }

    fn record_issued_token(&self, record: &TokenRecord, now_unix: u64) -> Result<(), StateError> {
        Ok(Store::record_issued_token(self, record, now_unix)?)
    }

    fn revoke_issued_token(&self, id: &[u8; 16]) -> Result<Option<TokenRecord>, StateError> {
        Ok(Store::revoke_issued_token(self, id)?)
    }

    fn issuer_key(&self, relay: &str) -> Result<Option<[u8; 32]>, StateError> {
        Ok(Store::issuer_key(self, relay)?)
    }

    fn expect_new_issuer_key(&self, relay: &str, not_after_unix: u64) -> Result<(), StateError> {
        Ok(Store::expect_new_issuer_key(self, relay, not_after_unix)?)
    }

    fn next_token_key(&self) -> Result<Option<TokenKey>, StateError> {
        Ok(Store::next_token_key(self)?)
    }

    fn api_certificate(&self) -> Result<Option<ApiCertificate>, StateError> {
        Ok(Store::api_certificate(self)?)
    }

    fn previous_api_ca(&self) -> Result<Option<ApiAuthority>, StateError> {
        Ok(Store::previous_api_ca(self)?)
    }

    fn set_api_certificates(
        &self,
        certificate: &ApiCertificate,
        previous_ca: Option<&ApiAuthority>,
    ) -> Result<(), StateError> {
        Ok(Store::set_api_certificates(self, certificate, previous_ca)?)
    }
}

#[cfg(test)]
mod tests {
    use relaymesh_protocol::Role;

    use super::*;

    /// The API reaches the root's state only through the trait: the sled
    /// default keeps users and tokens across a reopen, revoked ones marked.
    #[test]
    fn the_sled_store_keeps_users_and_tokens_through_the_trait() {
        let dir = tempfile::tempdir().expect("a directory");
        {
            let store = Store::create(dir.path()).expect("a store");
            let state: &dyn RootState = &store;
            let user = UserRecord {
                name: "alice".into(),
                groups: vec!["team-a".into()],
                issued_unix: 100,
                not_after_unix: 200,
                revoked_unix: None,
            };
            state.record_user(&user).expect("recorded");
            let token = TokenRecord {
                id: [7; 16],
                name: "edge-1".into(),
                role: Role::Agent,
                parent: "eu".into(),
                issued_unix: 100,
                not_after_unix: 200,
                revoked: false,
            };
            state.record_issued_token(&token, 150).expect("recorded");
            assert_eq!(
                state
                    .revoke_user("alice", 160)
                    .expect("revoked")
                    .revoked_unix,
                Some(160)
            );
            assert!(state.revoke_issued_token(&[7; 16]).expect("read").is_some());
            assert!(state.revoke_issued_token(&[8; 16]).expect("read").is_none());
        }
        let store = Store::open_existing(dir.path()).expect("reopened");
        let state: &dyn RootState = &store;
        let users = state.users().expect("users");
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].revoked_unix, Some(160));
        let tokens = state.issued_tokens().expect("tokens");
        assert_eq!(tokens.len(), 1);
        assert!(tokens[0].revoked);
    }
}
