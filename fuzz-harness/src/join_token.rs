//! Join tokens as text (`relaymesh_node::token`): what a joining node reads
//! from its command line and a parent checks before anything else. A token
//! that reads must verify (with the key that signed it) to the same claims,
//! and the claims of any token that reads must sign and verify again.

use relaymesh_node::token::{self, TokenError};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pkcs8, public) = crate::run_key();
    let unverified = token::read_unverified(text);
    // The fuzzer does not know this run's key: nothing it writes may verify.
    if let Ok(claims) = token::verify(text, public, 0) {
        panic!("a token nobody signed verified: {claims:?}");
    }
    let Ok(claims) = unverified else {
        return;
    };
    // Issuing names the signing key in the claims, whatever they held there.
    let mut expected = claims.clone();
    expected.token_key = public
        .as_slice()
        .try_into()
        .expect("an Ed25519 key is 32 bytes");
    match token::issue(pkcs8, &claims) {
        Ok(issued) => {
            let verified = token::verify(&issued, public, 0).expect("a token just issued verifies");
            assert_eq!(verified, expected);
            assert_eq!(token::read_unverified(&issued).expect("it reads"), expected);
        }
        Err(TokenError::TooLong { .. }) => {}
        Err(other) => panic!("claims that were read cannot be issued: {other}"),
    }
}
