//! At the root: the issuer key of every relay, as the root first recorded
//! it. Join tokens and candidate grants name these keys (never issuer
//! names), so a joining or failing-over node recognises its parent by key.
//!
//! A relay reports the hash of its issuer's SubjectPublicKeyInfo in its own
//! inventory record, as the label [`ISSUER_KEY_LABEL`]. The report climbs
//! through the relays above it, which could alter it; so the root keeps the
//! first key it hears for a name and refuses a later change (logged as an
//! integrity alarm), unless it issued a relay token for that name since
//! (a relay that joins again makes a new key): then the first different key
//! reported before that token expires replaces it; or unless the mesh CA
//! rotates, when every relay makes a new issuer key
//! (`pki::issuer_rotation`): then the first different key a relay reports
//! in that rotation replaces the old one, once. A relay that moves keeps
//! its issuer key ([`crate::pki::relay_keys_kept`]), so its record does not
//! change. What this cannot stop: a relay that was already compromised when
//! a relay below it joined can report a false key for it from the start
//! (it admitted that relay; docs/security.md, "Who may serve a child").

use std::collections::BTreeMap;

use relaymesh_protocol::{NodeRecord, Role};
use serde::{Deserialize, Serialize};

use super::{encode, Store, StoreError};

/// The label a relay's own inventory record carries: the SHA-256 of its
/// issuer's SubjectPublicKeyInfo, in hex.
pub const ISSUER_KEY_LABEL: &str = "relaymesh.dev/issuer-key";

/// The sled tree of recorded keys, keyed by relay name.
pub(super) const TREE: &str = "issuer_keys";
/// The sled tree of the relays whose key changed in a rotation of the mesh
/// CA, keyed by relay name, with the key hash of the CA the root signed
/// with then (the rotation it belongs to).
pub(super) const ROTATED: &str = "issuer_keys_rotated";

/// `labels` with [`ISSUER_KEY_LABEL`] set to `key` (a relay's own record;
/// the root has none: its children's certificates come from the mesh CA).
pub fn with_issuer_key_label(
    mut labels: BTreeMap<String, String>,
    key: Option<[u8; 32]>,
) -> BTreeMap<String, String> {
    if let Some(key) = key {
        labels.insert(ISSUER_KEY_LABEL.to_string(), hex(&key));
    }
    labels
}

/// The issuer key a record's label reports, if it carries a well-formed one.
pub fn reported_issuer_key(record: &NodeRecord) -> Option<[u8; 32]> {
    let text = record.labels.get(ISSUER_KEY_LABEL)?;
    if text.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (index, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(key)
}

/// What the root recorded for one relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    /// The key tokens and grants name.
    key: [u8; 32],
    /// Until when (Unix seconds) a different reported key replaces it: the
    /// expiry of the last relay token issued for the name; 0 if never.
    replaceable_until_unix: u64,
    /// The last different key refused, so the alarm is logged once.
    refused: Option<[u8; 32]>,
}

impl Store {
    /// The issuer key the root recorded for `relay`, if any.
    pub fn issuer_key(&self, relay: &str) -> Result<Option<[u8; 32]>, StoreError> {
        Ok(self
            .recorded_issuer_key(relay)?
            .map(|recorded| recorded.key))
    }

    /// Records the issuer keys the relays among `records` report: a relay
    /// heard of for the first time, or one a relay token was issued for
    /// since, gets the key it reports; so does one that reports its first
    /// new key while the mesh CA rotates (`rotating`: the key hash of the
    /// CA the root signs with); any other change is refused and logged
    /// once. Whether a recorded key changed.
    pub fn record_issuer_keys(
        &self,
        records: &[impl std::borrow::Borrow<NodeRecord>],
        now_unix: u64,
        rotating: Option<[u8; 32]>,
    ) -> Result<bool, StoreError> {
        let tree = self.journaled(TREE)?;
        let rotated = self.journaled(ROTATED)?;
        let mut changed = false;
        let mut replaced = false;
        let records = records.iter().map(std::borrow::Borrow::borrow);
        for record in records.filter(|record: &&NodeRecord| record.role == Role::Relay) {
            let Some(reported) = reported_issuer_key(record) else {
                continue;
            };
            let held = self.recorded_issuer_key(&record.name)?;
            let held_key = held.as_ref().map(|held| held.key);
            let first_in_rotation = match rotating {
                Some(ca) if rotated_in(record, &ca) => {
                    let during = rotated
                        .get(record.name.as_bytes())
                        .map_err(|e| self.sled(e))?;
                    during.as_deref() != Some(ca.as_slice())
                }
                _ => false,
            };
            let next = match held {
                None => Recorded {
                    key: reported,
                    replaceable_until_unix: 0,
                    refused: None,
                },
                Some(held) if held.key == reported => continue,
                Some(held) if now_unix <= held.replaceable_until_unix => {
                    tracing::info!(relay = %record.name, key = %hex(&reported), "a relay that joined again reports a new issuer key");
                    Recorded {
                        key: reported,
                        replaceable_until_unix: 0,
                        refused: None,
                    }
                }
                Some(held) if first_in_rotation => {
                    let ca = rotating.unwrap_or_default();
                    tracing::info!(relay = %record.name, key = %hex(&reported), previous = %hex(&held.key), "a relay rotated its issuer key with the mesh CA");
                    rotated
                        .insert(record.name.as_bytes(), ca.as_slice())
                        .map_err(|e| self.sled(e))?;
                    Recorded {
                        key: reported,
                        replaceable_until_unix: held.replaceable_until_unix,
                        refused: None,
                    }
                }
                Some(held) if held.refused == Some(reported) => continue,
                Some(held) => {
                    tracing::error!(relay = %record.name, recorded = %hex(&held.key), reported = %hex(&reported), "integrity alarm: a relay's issuer key was reported changed without a new token; tokens and grants keep naming the recorded key");
                    Recorded {
                        refused: Some(reported),
                        ..held
                    }
                }
            };
            tree.insert(record.name.as_bytes(), encode(&next)?)
                .map_err(|e| self.sled(e))?;
            changed = true;
            replaced |= held_key.is_some_and(|key| key != next.key);
        }
        if changed {
            self.flush()?;
        }
        Ok(replaced)
    }

    /// The root issued a relay token for `relay`, valid until
    /// `not_after_unix`: the relay may join again with a new issuer key.
    pub fn expect_new_issuer_key(
        &self,
        relay: &str,
        not_after_unix: u64,
    ) -> Result<(), StoreError> {
        let Some(mut recorded) = self.recorded_issuer_key(relay)? else {
            return Ok(());
        };
        recorded.replaceable_until_unix = recorded.replaceable_until_unix.max(not_after_unix);
        self.journaled(TREE)?
            .insert(relay.as_bytes(), encode(&recorded)?)
            .map_err(|e| self.sled(e))?;
        self.flush()
    }

    fn recorded_issuer_key(&self, relay: &str) -> Result<Option<Recorded>, StoreError> {
        let tree = self.journaled(TREE)?;
        let Some(value) = tree.get(relay.as_bytes()).map_err(|e| self.sled(e))? else {
            return Ok(None);
        };
        self.decode(relay.as_bytes(), &value).map(Some)
    }
}

/// Whether `record` says its issuer rotated in the rotation whose CA key
/// hash is `ca` ([`relaymesh_core::ISSUER_ROTATED_LABEL`]).
fn rotated_in(record: &NodeRecord, ca: &[u8; 32]) -> bool {
    record.labels.get(relaymesh_core::ISSUER_ROTATED_LABEL) == Some(&crate::pki::short_key(ca))
}

fn hex(key: &[u8; 32]) -> String {
    crate::pki::hex(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(name: &str, key: Option<[u8; 32]>) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            role: Role::Relay,
            parent: Some("root".into()),
            labels: with_issuer_key_label(BTreeMap::new(), key).into(),
            addresses: Vec::new(),
            version: String::new(),
            link: None,
            capacity: BTreeMap::new(),
            refused_entries: 0,
            limit_refusals: BTreeMap::new(),
        }
    }

    /// The first report is kept; a relay above cannot change it later, only
    /// a join the root issued a token for.
    #[test]
    fn the_first_key_stays_until_a_relay_token_is_issued() {
        let store = Store::temporary("issuer-keys").expect("store");
        assert_eq!(store.issuer_key("eu-west").expect("read"), None);
        store
            .record_issuer_keys(
                &[relay("eu-west", Some([1; 32])), relay("us", None)],
                100,
                None,
            )
            .expect("record");
        assert_eq!(store.issuer_key("eu-west").expect("read"), Some([1; 32]));
        assert_eq!(store.issuer_key("us").expect("read"), None);

        store
            .record_issuer_keys(&[relay("eu-west", Some([2; 32]))], 200, None)
            .expect("record");
        assert_eq!(store.issuer_key("eu-west").expect("read"), Some([1; 32]));

        store.expect_new_issuer_key("eu-west", 300).expect("token");
        store
            .record_issuer_keys(&[relay("eu-west", Some([1; 32]))], 250, None)
            .expect("record");
        store
            .record_issuer_keys(&[relay("eu-west", Some([3; 32]))], 400, None)
            .expect("record");
        assert_eq!(
            store.issuer_key("eu-west").expect("read"),
            Some([1; 32]),
            "after the token expired"
        );
        store.expect_new_issuer_key("eu-west", 500).expect("token");
        store
            .record_issuer_keys(&[relay("eu-west", Some([3; 32]))], 450, None)
            .expect("record");
        assert_eq!(store.issuer_key("eu-west").expect("read"), Some([3; 32]));
        store
            .record_issuer_keys(&[relay("eu-west", Some([4; 32]))], 460, None)
            .expect("record");
        assert_eq!(
            store.issuer_key("eu-west").expect("read"),
            Some([3; 32]),
            "one new key per token"
        );
    }

    /// While the mesh CA rotates, a relay that says its issuer rotated in
    /// that rotation gets its first new key recorded; no second one.
    #[test]
    fn a_rotation_of_the_mesh_ca_replaces_each_key_once() {
        let store = Store::temporary("issuer-keys-rotation").expect("store");
        let rotated = |key: [u8; 32], ca: [u8; 32]| {
            let mut record = relay("eu", Some(key));
            record.labels.insert(
                relaymesh_core::ISSUER_ROTATED_LABEL.into(),
                crate::pki::short_key(&ca),
            );
            record
        };
        let (first_ca, second_ca) = ([7; 32], [8; 32]);
        assert!(!store
            .record_issuer_keys(&[relay("eu", Some([1; 32]))], 100, None)
            .expect("record"));
        // Not rotating, or rotated in another rotation: refused.
        for rotating in [None, Some(second_ca)] {
            assert!(!store
                .record_issuer_keys(&[rotated([2; 32], first_ca)], 110, rotating)
                .expect("record"));
            assert_eq!(store.issuer_key("eu").expect("read"), Some([1; 32]));
        }
        assert!(store
            .record_issuer_keys(&[rotated([2; 32], first_ca)], 120, Some(first_ca))
            .expect("record"));
        assert_eq!(store.issuer_key("eu").expect("read"), Some([2; 32]));
        assert!(!store
            .record_issuer_keys(&[rotated([3; 32], first_ca)], 130, Some(first_ca))
            .expect("record"));
        assert_eq!(
            store.issuer_key("eu").expect("read"),
            Some([2; 32]),
            "one new key per rotation"
        );
        assert!(store
            .record_issuer_keys(&[rotated([4; 32], second_ca)], 140, Some(second_ca))
            .expect("record"));
        assert_eq!(store.issuer_key("eu").expect("read"), Some([4; 32]));
    }

    #[test]
    fn a_label_reads_back_and_garbage_is_ignored() {
        let record = relay("eu", Some([0xab; 32]));
        assert_eq!(reported_issuer_key(&record), Some([0xab; 32]));
        let mut garbage = record.clone();
        garbage
            .labels
            .insert(ISSUER_KEY_LABEL.into(), "zz".repeat(32));
        assert_eq!(reported_issuer_key(&garbage), None);
    }
}
