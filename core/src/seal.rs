//! The root's signature on slice entries: the root signs each entry it
//! decides, every relay and agent checks it before storing or forwarding.
//!
//! The key is the root's Ed25519 key that also signs join tokens; every
//! node receives its public half in its join grant. The signed message
//! starts with a context string of its own
//! ([`SliceEntry::signed_message`]), so a token signature never verifies as
//! an entry signature or the other way round.

use relaymesh_protocol::SliceEntry;
use ring::signature::{Ed25519KeyPair, UnparsedPublicKey, ED25519};

/// Why an entry could not be signed or was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The signing key is not an Ed25519 PKCS#8 key.
    #[error("the root's signing key cannot be read")]
    BadSigningKey,
    /// The system's random number generator failed while making a key.
    #[error("cannot generate a signing key: the system's random number generator failed")]
    KeyGeneration,
    /// The entry cannot be encoded for signing (it is too large).
    #[error("cannot encode slice entry {key:?} for its signature: {reason}")]
    Encode {
        /// The entry's key.
        key: String,
        /// The codec's reason.
        reason: String,
    },
    /// The signature does not verify with the root's public key.
    #[error("slice entry {key:?} (serial {serial}) does not carry a valid signature of the root")]
    BadSignature {
        /// The entry's key.
        key: String,
        /// The serial it claims.
        serial: u64,
    },
}

/// Signs `entry` with the root's key (PKCS#8 DER), as version `serial`.
pub fn sign(
    signing_key_pkcs8: &[u8],
    entry: &mut SliceEntry,
    serial: u64,
) -> Result<(), SealError> {
    let key =
        Ed25519KeyPair::from_pkcs8(signing_key_pkcs8).map_err(|_| SealError::BadSigningKey)?;
    entry.serial = serial;
    let message = message(entry)?;
    entry.signature = key.sign(&message).as_ref().to_vec();
    Ok(())
}

/// The serial of a new version of an entry the root decided, whose held
/// version is `held`: above the held one's and at least the current Unix
/// time in milliseconds (`now_unix_ms`), so serials keep growing across
/// restarts and removals (an entry decided again after a removal starts
/// above any version a node may still hold). The one home of this rule.
pub fn next_serial(held: Option<&SliceEntry>, now_unix_ms: u64) -> u64 {
    held.map_or(0, |held| held.serial.saturating_add(1))
        .max(now_unix_ms)
}

/// `entry` as the root signs what it decided, with `held` its version now:
/// the held version itself if it says the same (so deciding it again
/// changes nothing downstream), else `entry` signed with the
/// [`next_serial`].
pub fn seal_decided(
    signing_key_pkcs8: &[u8],
    held: Option<&SliceEntry>,
    mut entry: SliceEntry,
    now_unix_ms: u64,
) -> Result<SliceEntry, SealError> {
    if let Some(held) = held.filter(|held| same_content(held, &entry)) {
        return Ok(held.clone());
    }
    sign(
        signing_key_pkcs8,
        &mut entry,
        next_serial(held, now_unix_ms),
    )?;
    Ok(entry)
}

/// Checks that `entry` carries the root's signature, with the root's public
/// key (32 bytes).
pub fn verify(root_key: &[u8], entry: &SliceEntry) -> Result<(), SealError> {
    let message = message(entry)?;
    UnparsedPublicKey::new(&ED25519, root_key)
        .verify(&message, &entry.signature)
        .map_err(|_| SealError::BadSignature {
            key: entry.key.clone(),
            serial: entry.serial,
        })
}

/// Whether two entries say the same thing, signatures aside: the root keeps
/// an unchanged entry's serial and signature instead of signing it again.
pub fn same_content(a: &SliceEntry, b: &SliceEntry) -> bool {
    a.key == b.key && a.target == b.target && a.bundles == b.bundles && a.body == b.body
}

fn message(entry: &SliceEntry) -> Result<Vec<u8>, SealError> {
    entry.signed_message().map_err(|error| SealError::Encode {
        key: entry.key.clone(),
        reason: error.to_string(),
    })
}

/// A fresh Ed25519 key pair for the root: (PKCS#8 DER, public key). The
/// daemon keeps its key with its identity; [`crate::simulation`] and tests
/// make one with this.
pub fn generate_key() -> Result<(Vec<u8>, Vec<u8>), SealError> {
    use ring::signature::KeyPair as _;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .map_err(|_| SealError::KeyGeneration)?
        .as_ref()
        .to_vec();
    let public = Ed25519KeyPair::from_pkcs8(&pkcs8)
        .map_err(|_| SealError::BadSigningKey)?
        .public_key()
        .as_ref()
        .to_vec();
    Ok((pkcs8, public))
}

/// A fresh key pair for tests.
#[cfg(test)]
pub(crate) fn test_key() -> (Vec<u8>, Vec<u8>) {
    generate_key().expect("a key")
}

#[cfg(test)]
mod tests {
    use relaymesh_protocol::{BundleId, Target};

    use super::*;

    fn entry() -> SliceEntry {
        SliceEntry {
            key: "placement/shop/web".into(),
            target: Target::Subtrees(vec!["eu".into()]),
            bundles: vec![BundleId::of(b"bundle")],
            body: b"{}".to_vec(),
            serial: 0,
            signature: Vec::new(),
        }
    }

    #[test]
    fn a_decided_entry_keeps_its_version_unless_it_changed_and_serials_only_grow() {
        let (key, public) = generate_key().expect("a key");
        let first = seal_decided(&key, None, entry(), 1_000).expect("signed");
        assert_eq!(first.serial, 1_000);
        verify(&public, &first).expect("the root's signature");
        let same = seal_decided(&key, Some(&first), entry(), 5_000).expect("signed");
        assert_eq!(same, first, "the same content keeps its version");
        let changed = SliceEntry {
            body: b"{\"changed\": true}".to_vec(),
            ..entry()
        };
        // A clock gone back still gives a later serial.
        let next = seal_decided(&key, Some(&first), changed, 10).expect("signed");
        assert_eq!(next.serial, 1_001);
        verify(&public, &next).expect("the root's signature");
        assert_eq!(next_serial(None, 7), 7);
    }

    #[test]
    fn a_signed_entry_verifies_and_any_change_breaks_it() {
        let (private, public) = test_key();
        let mut signed = entry();
        sign(&private, &mut signed, 7).expect("signed");
        assert_eq!(signed.serial, 7);
        verify(&public, &signed).expect("verifies");

        let mut altered = Vec::new();
        let mut body = signed.clone();
        body.body = b"{\"evil\":1}".to_vec();
        altered.push(body);
        let mut bundle = signed.clone();
        bundle.bundles = vec![BundleId::of(b"other")];
        altered.push(bundle);
        let mut target = signed.clone();
        target.target = Target::Everywhere;
        altered.push(target);
        let mut serial = signed.clone();
        serial.serial = 8;
        altered.push(serial);
        let mut key = signed.clone();
        key.key = "placement/shop/other".into();
        altered.push(key);
        let mut unsigned = signed.clone();
        unsigned.signature.clear();
        altered.push(unsigned);
        for entry in altered {
            assert!(matches!(
                verify(&public, &entry),
                Err(SealError::BadSignature { .. })
            ));
        }
        // Another key's signature does not pass either.
        let (_, other) = test_key();
        assert!(verify(&other, &signed).is_err());
    }

    #[test]
    fn a_token_signature_is_no_entry_signature() {
        let (private, public) = test_key();
        let key = Ed25519KeyPair::from_pkcs8(&private).expect("key");
        let mut forged = entry();
        // Sign the bare encoding, without the context string.
        let message = forged.signed_message().expect("encodes");
        let bare = &message[b"relaymesh slice entry v1\0".len()..];
        forged.signature = key.sign(bare).as_ref().to_vec();
        assert!(verify(&public, &forged).is_err());
    }
}
