//! The root's signature on slice entries (`relaymesh_core::seal`): what
//! every relay and agent checks before it stores, forwards or applies an
//! entry from its parent. Nothing the fuzzer writes may verify under this
//! run's key; an entry that decodes must, once signed, verify, and any
//! change to what the signature covers must make it fail again.

use relaymesh_core::seal;
use relaymesh_protocol::codec::decode;
use relaymesh_protocol::{SliceEntry, Target};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Ok(mut entry) = decode::<SliceEntry>(data) else {
        return;
    };
    let (pkcs8, public) = crate::run_key();
    // The fuzzer does not know this run's key.
    assert!(
        seal::verify(public, &entry).is_err(),
        "an entry nobody signed verified: {entry:?}"
    );
    let serial = entry.serial;
    if seal::sign(pkcs8, &mut entry, serial).is_err() {
        return; // too large to encode
    }
    seal::verify(public, &entry).expect("an entry just signed verifies");
    // A relay may fill in a placement's quota; nothing else.
    if let Target::Placement(target) = &mut entry.target {
        target.quota = None;
        seal::verify(public, &entry).expect("the quota is not signed");
    }
    let mut altered = entry.clone();
    altered.body.push(0);
    assert!(seal::verify(public, &altered).is_err());
    let mut altered = entry.clone();
    altered.serial = altered.serial.wrapping_add(1);
    assert!(seal::verify(public, &altered).is_err());
    let mut altered = entry.clone();
    altered.key.push('x');
    assert!(seal::verify(public, &altered).is_err());
    let mut altered = entry;
    altered.bundles.push(relaymesh_protocol::BundleId::of(b"x"));
    assert!(seal::verify(public, &altered).is_err());
}
