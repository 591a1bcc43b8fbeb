//! What replicas of one root need beyond the object store: a lease that
//! makes one of them the leader, and writes that only the leader's
//! lease lets through (a deposed leader's are refused, never applied).
//! Blocking calls, like the rest of [`Etcd`].

use etcd_client::{Compare, CompareOp, DeleteOptions, PutOptions, Txn, TxnOp};

use super::{revision, signed, Etcd};
use crate::objects::BackendError;

/// One operation of [`Etcd::apply_guarded`].
#[derive(Debug, Clone)]
pub enum GuardedOp {
    /// Puts a value at a key.
    Put(Vec<u8>, Vec<u8>),
    /// Deletes every key that starts with a prefix.
    DeletePrefix(Vec<u8>),
    /// Deletes the keys from the first (included) to the second (not).
    DeleteRange(Vec<u8>, Vec<u8>),
}

impl Etcd {
    /// Applies `ops` in one transaction if `guard`'s key holds `guard`'s
    /// value, and says whether it did. Made again when the outcome is
    /// unknown: the ops must be idempotent.
    pub fn apply_guarded(
        &self,
        guard: (&[u8], &[u8]),
        ops: Vec<GuardedOp>,
    ) -> Result<bool, BackendError> {
        let compare = Compare::value(self.full(guard.0), CompareOp::Equal, guard.1.to_vec());
        let operations: Vec<TxnOp> = ops
            .into_iter()
            .map(|op| match op {
                GuardedOp::Put(key, value) => TxnOp::put(self.full(&key), value, None),
                GuardedOp::DeletePrefix(prefix) => {
                    TxnOp::delete(self.full(&prefix), Some(DeleteOptions::new().with_prefix()))
                }
                GuardedOp::DeleteRange(from, to) => TxnOp::delete(
                    self.full(&from),
                    Some(DeleteOptions::new().with_range(self.full(&to))),
                ),
            })
            .collect();
        let response = self.call(move |mut client| {
            let txn = Txn::new()
                .when([compare.clone()])
                .and_then(operations.clone());
            async move { client.txn(txn).await }
        })?;
        Ok(response.succeeded())
    }

    /// A new lease that lives `ttl_secs` unless kept alive; its id.
    pub fn grant_lease(&self, ttl_secs: u64) -> Result<i64, BackendError> {
        let ttl = signed(ttl_secs);
        let response =
            self.call(move |mut client| async move { client.lease_grant(ttl, None).await })?;
        Ok(response.id())
    }

    /// Puts `value` at `key`, bound to `lease`, unless the key exists;
    /// whether it did. The key is gone when the lease ends.
    pub fn claim(&self, key: &[u8], value: &[u8], lease: i64) -> Result<bool, BackendError> {
        let full = self.full(key);
        let value = value.to_vec();
        let response = self.call(move |mut client| {
            let txn = Txn::new()
                .when([Compare::create_revision(full.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    full.clone(),
                    value.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            async move { client.txn(txn).await }
        })?;
        Ok(response.succeeded())
    }

    /// Renews `lease` once; how many seconds it has left (0: it ended).
    pub fn keep_alive(&self, lease: i64) -> Result<u64, BackendError> {
        let response = self.call(move |mut client| async move {
            let (mut keeper, mut stream) = client.lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            stream.message().await
        })?;
        Ok(response.map_or(0, |answer| revision(answer.ttl())))
    }

    /// Ends `lease` now, and with it the keys bound to it.
    pub fn revoke_lease(&self, lease: i64) -> Result<(), BackendError> {
        self.call(move |mut client| async move { client.lease_revoke(lease).await })
            .map(drop)
    }
}
