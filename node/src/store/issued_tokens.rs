//! The join tokens the root issued, so an admin can list and revoke them.
//!
//! Only the root keeps these (a token's text is never stored: it is a
//! credential, shown once). Which tokens were used is recorded by the relay
//! that admitted the node; the root learns it from the node: every node
//! reports the id of the token it joined with in its own inventory record
//! ([`JOIN_TOKEN_LABEL`]), and the list shows a token as used by the node
//! of its name, role and parent that reports it.

use std::collections::BTreeMap;

use relaymesh_protocol::{NodeRecord, Role};
use serde::{Deserialize, Serialize};

use super::{encode, Store, StoreError};

/// The sled tree of issued tokens, keyed by token id.
pub(super) const TREE: &str = "issued_tokens";

/// How long a record is kept after its token expired, so `relayctl token
/// list` still shows recent ones as expired.
pub const KEEP_EXPIRED_SECS: u64 = 7 * 24 * 60 * 60;

/// How often, at most, issuing a token also forgets the records past
/// [`KEEP_EXPIRED_SECS`]: forgetting reads every record, and a root
/// issuing a token per joining cluster paid that on every one (O(tokens)
/// per join; issue 35's profile of 5,000 joins).
pub const PRUNE_EVERY_SECS: u64 = 60 * 60;

/// When expired token records were last forgotten, shared by the clones of
/// one store (or one etcd state): see [`PRUNE_EVERY_SECS`].
#[derive(Debug, Default)]
pub struct PruneGate(std::sync::atomic::AtomicU64);

impl PruneGate {
    /// Whether a prune is due at `now_unix` (the first always is, and a
    /// clock set back makes one due); if so, records it as done now.
    pub fn due(&self, now_unix: u64) -> bool {
        use std::sync::atomic::Ordering;
        let last = self.0.load(Ordering::Relaxed);
        let due = last == 0 || now_unix < last || now_unix >= last.saturating_add(PRUNE_EVERY_SECS);
        if due {
            self.0.store(now_unix.max(1), Ordering::Relaxed);
        }
        due
    }
}

/// The label of a node's own inventory record that names the token it
/// joined with (its id in hex).
pub const JOIN_TOKEN_LABEL: &str = "relaymesh.dev/join-token";

/// The label of a node's own inventory record that says when it joined,
/// in seconds since the Unix epoch: the `creationTimestamp` of its views at
/// the root (their AGE). The node says it of itself, so it is shown, never
/// trusted for anything else.
pub const JOINED_AT_LABEL: &str = "relaymesh.dev/joined-at";

/// `labels` with [`JOIN_TOKEN_LABEL`] set to `id` and [`JOINED_AT_LABEL`]
/// to now (set at join, in the node's configuration).
pub fn with_join_token_label(
    mut labels: BTreeMap<String, String>,
    id: &[u8; 16],
) -> BTreeMap<String, String> {
    labels.insert(
        JOIN_TOKEN_LABEL.to_string(),
        relaymesh_protocol::revocation::hex(id),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    labels.insert(JOINED_AT_LABEL.to_string(), now.to_string());
    labels
}

/// When the node of `record` joined, as it says ([`JOINED_AT_LABEL`]), in
/// milliseconds since the Unix epoch; `None` for nodes that joined before
/// nodes said it.
pub fn joined_at_ms(record: &NodeRecord) -> Option<u64> {
    let seconds: u64 = record.labels.get(JOINED_AT_LABEL)?.parse().ok()?;
    seconds.checked_mul(1000)
}

/// The node that reports it joined with token `record`: of the token's
/// name, role and parent, carrying its id in [`JOIN_TOKEN_LABEL`]. A node
/// can only say this of itself, and only of a token issued for its own
/// name under its own parent.
pub fn used_by<'a>(
    record: &TokenRecord,
    nodes: &'a [impl std::borrow::Borrow<NodeRecord>],
) -> Option<&'a NodeRecord> {
    let id = relaymesh_protocol::revocation::hex(&record.id);
    nodes
        .iter()
        .map(std::borrow::Borrow::borrow)
        .find(|node: &&NodeRecord| {
            node.name == record.name
                && node.role == record.role
                && node.parent.as_deref() == Some(record.parent.as_str())
                && node.labels.get(JOIN_TOKEN_LABEL) == Some(&id)
        })
}

/// A token the root issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The token's id.
    pub id: [u8; 16],
    /// The name the joining node gets.
    pub name: String,
    /// The role the joining node gets.
    pub role: Role,
    /// The relay that admits the node.
    pub parent: String,
    /// When the root issued it (Unix seconds).
    pub issued_unix: u64,
    /// When it expires (Unix seconds).
    pub not_after_unix: u64,
    /// Whether an admin revoked it.
    pub revoked: bool,
}

impl Store {
    /// Records a token the root issued, and forgets records of tokens that
    /// expired more than a week before `now_unix`.
    pub fn record_issued_token(
        &self,
        record: &TokenRecord,
        now_unix: u64,
    ) -> Result<(), StoreError> {
        let tree = self.journaled(TREE)?;
        if self.tokens_pruned.due(now_unix) {
            for old in self.issued_tokens()? {
                if old.not_after_unix.saturating_add(KEEP_EXPIRED_SECS) < now_unix {
                    tree.remove(old.id).map_err(|e| self.sled(e))?;
                }
            }
        }
        tree.insert(record.id, encode(record)?)
            .map_err(|e| self.sled(e))?;
        self.flush()
    }

    /// Every token the root issued and still remembers, oldest first.
    pub fn issued_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let tree = self.journaled(TREE)?;
        let mut records = Vec::new();
        for item in tree.iter() {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            records.push(self.decode::<TokenRecord>(&key, &value)?);
        }
        records.sort_by_key(|record| (record.issued_unix, record.id));
        Ok(records)
    }

    /// Marks token `id` revoked; returns its record (`None` if the root
    /// never issued it or has forgotten it).
    pub fn revoke_issued_token(&self, id: &[u8; 16]) -> Result<Option<TokenRecord>, StoreError> {
        let tree = self.journaled(TREE)?;
        let Some(value) = tree.get(id).map_err(|e| self.sled(e))? else {
            return Ok(None);
        };
        let mut record: TokenRecord = self.decode(id, &value)?;
        if !record.revoked {
            record.revoked = true;
            tree.insert(id, encode(&record)?)
                .map_err(|e| self.sled(e))?;
            self.flush()?;
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u8, not_after_unix: u64) -> TokenRecord {
        TokenRecord {
            id: [id; 16],
            name: format!("edge-{id}"),
            role: Role::Agent,
            parent: "root".into(),
            issued_unix: not_after_unix - 600,
            not_after_unix,
            revoked: false,
        }
    }

    #[test]
    fn a_node_says_when_it_joined() {
        let labels = with_join_token_label(BTreeMap::new(), &[1; 16]);
        let record = NodeRecord {
            name: "edge-1".into(),
            role: Role::Agent,
            parent: Some("eu".into()),
            labels: labels.into(),
            addresses: Vec::new(),
            version: String::new(),
            link: None,
            capacity: BTreeMap::new(),
            refused_entries: 0,
            limit_refusals: BTreeMap::new(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as u64;
        let joined = joined_at_ms(&record).expect("stamped");
        assert!(joined <= now && now - joined < 60_000, "{joined} vs {now}");
        let mut garbled = record;
        garbled
            .labels
            .insert(JOINED_AT_LABEL.into(), "yesterday".into());
        assert_eq!(joined_at_ms(&garbled), None);
    }

    #[test]
    fn records_survive_a_reopen_and_old_ones_are_forgotten() {
        let dir = tempfile::tempdir().expect("test");
        let now = 10_000_000;
        {
            let store = Store::create(dir.path()).expect("test");
            store
                .record_issued_token(&record(1, now + 600), now)
                .expect("test");
            store
                .record_issued_token(&record(2, now + 1200), now)
                .expect("test");
            let revoked = store
                .revoke_issued_token(&[1; 16])
                .expect("test")
                .expect("test");
            assert!(revoked.revoked);
            assert!(store.revoke_issued_token(&[9; 16]).expect("test").is_none());
        }
        let store = Store::open_existing(dir.path()).expect("test");
        let records = store.issued_tokens().expect("test");
        assert_eq!(records.len(), 2);
        assert!(records[0].revoked && !records[1].revoked);

        // A week and a day later, issuing one more forgets both.
        let later = now + 1200 + KEEP_EXPIRED_SECS + 1;
        store
            .record_issued_token(&record(3, later + 600), later)
            .expect("test");
        let ids: Vec<[u8; 16]> = store
            .issued_tokens()
            .expect("test")
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, vec![[3; 16]]);
    }

    #[test]
    fn expired_records_are_forgotten_at_most_hourly() {
        let store = Store::temporary("tokens").expect("test");
        let now = 10_000_000;
        store
            .record_issued_token(&record(1, now + 600), now)
            .expect("test");
        // A week after record 1 expired, and more than an hour after the
        // last prune: one is due, and forgets it.
        let past_week = now + 600 + KEEP_EXPIRED_SECS + 1;
        store
            .record_issued_token(&record(2, past_week + 600), past_week)
            .expect("test");
        let kept = |store: &Store| {
            store
                .issued_tokens()
                .expect("test")
                .iter()
                .map(|r| r.id[0])
                .collect::<Vec<u8>>()
        };
        assert_eq!(kept(&store), vec![2]);
        let gate = PruneGate::default();
        assert!(gate.due(100), "the first is due");
        assert!(!gate.due(100 + PRUNE_EVERY_SECS - 1));
        assert!(gate.due(100 + PRUNE_EVERY_SECS));
        assert!(gate.due(50), "a clock set back");
    }
}
