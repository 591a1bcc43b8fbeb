//! The root node's own state in etcd: the journal of the leader's store
//! (`relaymesh_node::store::journal`), sealed, as a checkpoint and a log.
//!
//! | key | holds |
//! |---|---|
//! | `r/head` | the checkpoint's generation, the log position it covers, the last log position |
//! | `r/c/GEN/PART` | the checkpoint: every key of the node's state |
//! | `r/l/SEQ/PART` | one flush's writes |
//!
//! - Every write goes in a transaction guarded by the leader key: a
//!   deposed leader's are refused, never applied.
//! - `r/head` moves in the transaction that writes a group's last part,
//!   so a group half written (the leader lost in between) is never read.
//! - Every value is sealed with the secrets key, under its own key's name.

use std::sync::{Arc, Mutex};

use relaymesh_apiserver::etcd::{Etcd, GuardedOp};
use relaymesh_apiserver::objects::BackendError;
use relaymesh_node::store::journal::{Mirror, MirrorError, Op};
use relaymesh_protocol::codec;

use super::election::LEADER_KEY;
use super::ReplicaError;
use crate::state::SecretsKey;

const HEAD_KEY: &[u8] = b"r/head";
const CHECKPOINT_PREFIX: &str = "r/c/";
const LOG_PREFIX: &str = "r/l/";

/// How large one part of a group may grow: far below etcd's request
/// limit (1.5 MiB by default), with room for one more write.
const PART_BYTES: usize = 512 * 1024;

/// How many log groups a checkpoint may be behind before the next is
/// written: a replica taking over reads at most this many.
const CHECKPOINT_EVERY: u64 = 256;

/// Where the mirror stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Head {
    /// The checkpoint's generation (0: none yet).
    pub generation: u64,
    /// The last log group the checkpoint holds.
    pub checkpoint: u64,
    /// The last log group written.
    pub seq: u64,
}

/// The leader's mirror in etcd.
pub struct EtcdMirror {
    etcd: Etcd,
    key: Arc<SecretsKey>,
    /// This replica's value of the leader key.
    me: Vec<u8>,
    head: Mutex<Head>,
}

impl EtcdMirror {
    /// The mirror of the leader `me`, which loaded `head`.
    pub fn new(etcd: Etcd, key: Arc<SecretsKey>, me: &str, head: Head) -> Self {
        Self {
            etcd,
            key,
            me: me.as_bytes().to_vec(),
            head: Mutex::new(head),
        }
    }

    /// Writes `ops` as parts under `prefix`, all but the last alone, the
    /// last with `then` in one transaction.
    fn write_parts(
        &self,
        prefix: &str,
        ops: &[Op],
        then: Vec<GuardedOp>,
    ) -> Result<(), MirrorError> {
        let parts = split(ops);
        let count = parts.len();
        for (index, part) in parts.into_iter().enumerate() {
            let key = format!("{prefix}{index:08x}");
            let encoded = codec::encode(&part).map_err(refused)?;
            let sealed = self.key.seal(&key, &encoded).map_err(refused)?;
            let mut txn = vec![GuardedOp::Put(key.into_bytes(), sealed)];
            if index + 1 == count {
                txn.extend(then.iter().cloned());
            }
            self.guarded(txn)?;
        }
        Ok(())
    }

    fn guarded(&self, ops: Vec<GuardedOp>) -> Result<(), MirrorError> {
        match self.etcd.apply_guarded((LEADER_KEY, &self.me), ops) {
            Ok(true) => Ok(()),
            Ok(false) => Err(MirrorError::Refused(
                "this replica is no longer the root's leader".into(),
            )),
            Err(BackendError::Unavailable(reason)) => Err(MirrorError::Unavailable(reason)),
            Err(error) => Err(refused(error)),
        }
    }

    /// Writes a checkpoint of `image` covering log group `seq`, moves the
    /// head to it and drops the previous checkpoint and the log it covers.
    pub fn checkpoint(&self, image: &[Op], seq: u64) -> Result<(), MirrorError> {
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        let next = Head {
            generation: head.generation + 1,
            checkpoint: seq,
            seq,
        };
        let encoded_head = codec::encode(&next).map_err(refused)?;
        let then = vec![
            GuardedOp::Put(HEAD_KEY.to_vec(), encoded_head),
            GuardedOp::DeletePrefix(checkpoint_prefix(head.generation).into_bytes()),
            GuardedOp::DeleteRange(
                LOG_PREFIX.as_bytes().to_vec(),
                log_prefix(seq + 1).into_bytes(),
            ),
        ];
        self.write_parts(&checkpoint_prefix(next.generation), image, then)?;
        *head = next;
        Ok(())
    }
}

impl Mirror for EtcdMirror {
    fn ship(&self, ops: &[Op], image: &dyn Fn() -> Vec<Op>) -> Result<(), MirrorError> {
        let seq = {
            let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
            let next = Head {
                seq: head.seq + 1,
                ..*head
            };
            let encoded = codec::encode(&next).map_err(refused)?;
            self.write_parts(
                &log_prefix(next.seq),
                ops,
                vec![GuardedOp::Put(HEAD_KEY.to_vec(), encoded)],
            )?;
            *head = next;
            next
        };
        if seq.seq - seq.checkpoint >= CHECKPOINT_EVERY {
            // The image may hold writes of the next group already; they
            // are in its log too, and applying them twice is harmless.
            self.checkpoint(&image(), seq.seq)?;
        }
        Ok(())
    }
}

/// The node's state as the mirror holds it: the checkpoint, then the log
/// after it, in order; `None` if nothing was mirrored yet.
pub fn load(etcd: &Etcd, key: &SecretsKey) -> Result<Option<(Head, Vec<Op>)>, ReplicaError> {
    let Some((value, _)) = etcd.get_value(HEAD_KEY)? else {
        return Ok(None);
    };
    let head: Head = codec::decode(&value).map_err(|source| ReplicaError::Corrupt {
        key: "r/head".into(),
        reason: source.to_string(),
    })?;
    let mut ops = Vec::new();
    let (parts, _) = etcd.range(checkpoint_prefix(head.generation).as_bytes(), None)?;
    for (part_key, value, _) in parts {
        ops.extend(open_part(key, &part_key, &value)?);
    }
    let (log, _) = etcd.range(LOG_PREFIX.as_bytes(), None)?;
    for (part_key, value, _) in log {
        let seq = std::str::from_utf8(&part_key[LOG_PREFIX.len()..])
            .ok()
            .and_then(|rest| rest.get(..16))
            .and_then(|digits| u64::from_str_radix(digits, 16).ok());
        // Groups after the head are a leader's unfinished last flush.
        if seq.is_some_and(|seq| seq > head.checkpoint && seq <= head.seq) {
            ops.extend(open_part(key, &part_key, &value)?);
        }
    }
    Ok(Some((head, ops)))
}

fn open_part(key: &SecretsKey, part_key: &[u8], value: &[u8]) -> Result<Vec<Op>, ReplicaError> {
    let name = String::from_utf8_lossy(part_key).into_owned();
    let corrupt = |reason: String| ReplicaError::Corrupt {
        key: name.clone(),
        reason,
    };
    let plain = key
        .open(&name, value)
        .map_err(|error| corrupt(error.to_string()))?;
    codec::decode(&plain).map_err(|error| corrupt(error.to_string()))
}

fn refused(error: impl std::fmt::Display) -> MirrorError {
    MirrorError::Refused(error.to_string())
}

fn checkpoint_prefix(generation: u64) -> String {
    format!("{CHECKPOINT_PREFIX}{generation:016x}/")
}

fn log_prefix(seq: u64) -> String {
    format!("{LOG_PREFIX}{seq:016x}/")
}

/// `ops` in parts of at most [`PART_BYTES`] (and one write more), in
/// order; one empty part for no ops, so a checkpoint always has one.
fn split(ops: &[Op]) -> Vec<Vec<Op>> {
    let mut parts = vec![Vec::new()];
    let mut bytes = 0;
    for op in ops {
        let len = op.key.len() + op.value.as_ref().map_or(0, Vec::len) + op.tree.len();
        if bytes + len > PART_BYTES && !parts.last().is_some_and(Vec::is_empty) {
            parts.push(Vec::new());
            bytes = 0;
        }
        bytes += len;
        if let Some(part) = parts.last_mut() {
            part.push(op.clone());
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(n: usize, len: usize) -> Op {
        Op {
            tree: "state".into(),
            key: n.to_be_bytes().to_vec(),
            value: Some(vec![0; len]),
        }
    }

    #[test]
    fn parts_keep_order_and_stay_small() {
        let ops: Vec<Op> = (0..40).map(|n| op(n, 64 * 1024)).collect();
        let parts = split(&ops);
        assert!(parts.len() > 1, "{}", parts.len());
        for part in &parts {
            let bytes: usize = part
                .iter()
                .map(|op| op.value.as_ref().map_or(0, Vec::len))
                .sum();
            assert!(bytes <= PART_BYTES + 64 * 1024, "{bytes}");
        }
        assert_eq!(parts.concat(), ops);
        assert_eq!(split(&[]), vec![Vec::<Op>::new()]);
    }
}
