//! At the root: slice entries signed with the root's key and the next
//! serial (the serial rule is the core's, `relaymesh_core::seal`).

use relaymesh_core::Now;
use relaymesh_protocol::SliceEntry;

use super::Daemon;

impl Daemon {
    /// `entry` signed again with the root's key now and the next serial,
    /// even if its content is the one held (a rotation of the key).
    pub(super) fn reseal(&self, now: Now, mut entry: SliceEntry) -> Option<SliceEntry> {
        let serial = relaymesh_core::seal::next_serial(Some(&entry), now.unix_ms);
        let identity = self.shared.identity.get();
        let signing_key = identity.token_signing_key.as_deref()?;
        match relaymesh_core::seal::sign(signing_key, &mut entry, serial) {
            Ok(()) => Some(entry),
            Err(error) => {
                tracing::error!(key = %entry.key, %error, "cannot sign a slice entry again");
                None
            }
        }
    }

    /// Signs an entry the root decided ([`relaymesh_core::seal::seal_decided`]).
    ///
    /// An entry that cannot be signed is logged and left out: no node would
    /// accept it.
    pub(super) fn seal(&self, now: Now, entry: SliceEntry) -> Option<SliceEntry> {
        let held = self.core.entries().find(|held| held.key == entry.key);
        let key = entry.key.clone();
        let signed = match self.shared.identity.get().token_signing_key.as_deref() {
            Some(signing_key) => {
                relaymesh_core::seal::seal_decided(signing_key, held, entry, now.unix_ms)
            }
            None => Err(relaymesh_core::seal::SealError::BadSigningKey),
        };
        match signed {
            Ok(entry) => Some(entry),
            Err(error) => {
                tracing::error!(%key, %error, "cannot sign a slice entry; it is not sent");
                None
            }
        }
    }
}
