//! Join tokens as text (`relaymesh_relay::token`): what a joining node reads
//! from its command line and a parent checks before anything else. A token
//! that reads must verify (with the key that signed it) to the same claims,
//! and the claims of any token that reads must sign and verify again.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use relaymesh_relay::token::{self, TokenError};
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};

/// A token key pair for the whole run: (PKCS#8, public key).
fn key() -> &'static (Vec<u8>, Vec<u8>) {
    static KEY: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    KEY.get_or_init(|| {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("its own key");
        (pkcs8.as_ref().to_vec(), pair.public_key().as_ref().to_vec())
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pkcs8, public) = key();
    let unverified = token::read_unverified(text);
    // The fuzzer does not know this run's key: nothing it writes may verify.
    if let Ok(claims) = token::verify(text, public, 0) {
        panic!("a token nobody signed verified: {claims:?}");
    }
    let Ok(claims) = unverified else {
        return;
    };
    match token::issue(pkcs8, &claims) {
        Ok(issued) => {
            let verified = token::verify(&issued, public, 0).expect("a token just issued verifies");
            assert_eq!(verified, claims);
            assert_eq!(token::read_unverified(&issued).expect("it reads"), claims);
        }
        Err(TokenError::TooLong { .. }) => {}
        Err(other) => panic!("claims that were read cannot be issued: {other}"),
    }
});
