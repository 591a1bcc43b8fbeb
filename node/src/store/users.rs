//! The users the root's API CA signed certificates for, and which of them an
//! admin revoked, so `relayctl user list` can show them and the API refuses
//! a revoked user's certificates after a restart too.
//!
//! Only the root keeps these. A user is revoked by name: every certificate
//! naming that user is refused from then on, including ones the root never
//! recorded (issued before it kept this list, or `relay init`'s admin), and
//! the name is never issued again.

use serde::{Deserialize, Serialize};

use super::{encode, Store, StoreError};

/// The sled tree of users, keyed by name.
pub(super) const TREE: &str = "users";

/// A user of the root's API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    /// The user's name (the certificate's `CN`).
    pub name: String,
    /// The groups of the newest certificate issued to it (empty for a user
    /// revoked without the root having recorded one).
    pub groups: Vec<String>,
    /// When the newest certificate was issued (Unix seconds; 0 if none was
    /// recorded).
    pub issued_unix: u64,
    /// When the newest certificate expires (Unix seconds; 0 if none was
    /// recorded).
    pub not_after_unix: u64,
    /// When an admin revoked the user (Unix seconds), if one did.
    pub revoked_unix: Option<u64>,
}

impl Store {
    /// Records a certificate issued to `record.name`, replacing what was
    /// recorded for that user; a revoked user stays revoked.
    pub fn record_user(&self, record: &UserRecord) -> Result<(), StoreError> {
        let tree = self.journaled(TREE)?;
        let revoked_unix = match tree.get(record.name.as_bytes()).map_err(|e| self.sled(e))? {
            Some(value) => {
                let old: UserRecord = self.decode(record.name.as_bytes(), &value)?;
                old.revoked_unix
            }
            None => None,
        };
        let record = UserRecord {
            revoked_unix: record.revoked_unix.or(revoked_unix),
            ..record.clone()
        };
        tree.insert(record.name.as_bytes(), encode(&record)?)
            .map_err(|e| self.sled(e))?;
        self.flush()
    }

    /// Every user recorded, by name.
    pub fn users(&self) -> Result<Vec<UserRecord>, StoreError> {
        let tree = self.journaled(TREE)?;
        let mut records = Vec::new();
        for item in tree.iter() {
            let (key, value) = item.map_err(|e| self.sled(e))?;
            records.push(self.decode::<UserRecord>(&key, &value)?);
        }
        Ok(records)
    }

    /// Revokes user `name` at `now_unix` (recording it if it was not) and
    /// returns its record; a user revoked before keeps its first time.
    pub fn revoke_user(&self, name: &str, now_unix: u64) -> Result<UserRecord, StoreError> {
        let tree = self.journaled(TREE)?;
        let mut record = match tree.get(name.as_bytes()).map_err(|e| self.sled(e))? {
            Some(value) => self.decode::<UserRecord>(name.as_bytes(), &value)?,
            None => UserRecord {
                name: name.to_string(),
                groups: Vec::new(),
                issued_unix: 0,
                not_after_unix: 0,
                revoked_unix: None,
            },
        };
        if record.revoked_unix.is_none() {
            record.revoked_unix = Some(now_unix);
            tree.insert(name.as_bytes(), encode(&record)?)
                .map_err(|e| self.sled(e))?;
            self.flush()?;
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice(issued_unix: u64) -> UserRecord {
        UserRecord {
            name: "alice".into(),
            groups: vec!["viewers".into()],
            issued_unix,
            not_after_unix: issued_unix + 600,
            revoked_unix: None,
        }
    }

    #[test]
    fn a_revocation_survives_a_reopen_and_a_later_record() {
        let dir = tempfile::tempdir().expect("test");
        {
            let store = Store::create(dir.path()).expect("test");
            store.record_user(&alice(1_000)).expect("test");
            let revoked = store.revoke_user("alice", 2_000).expect("test");
            assert_eq!(revoked.revoked_unix, Some(2_000));
            assert_eq!(revoked.groups, ["viewers"]);
            // Revoking again keeps the first time.
            let again = store.revoke_user("alice", 3_000).expect("test");
            assert_eq!(again.revoked_unix, Some(2_000));
            // A user the root never recorded can be revoked too.
            let admin = store.revoke_user("old-admin", 2_500).expect("test");
            assert!(admin.groups.is_empty());
        }
        let store = Store::open_existing(dir.path()).expect("test");
        store.record_user(&alice(4_000)).expect("test");
        let users = store.users().expect("test");
        let names: Vec<(&str, Option<u64>)> = users
            .iter()
            .map(|user| (user.name.as_str(), user.revoked_unix))
            .collect();
        assert_eq!(names, [("alice", Some(2_000)), ("old-admin", Some(2_500))]);
        assert_eq!(users[0].issued_unix, 4_000);
    }
}
