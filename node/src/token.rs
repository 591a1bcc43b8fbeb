//! Join tokens: issuing them at the root and checking them at any relay.
//!
//! A token is `rmt4.<claims>.<signature>`: the bincode encoding of
//! [`TokenClaims`] (through [`relaymesh_protocol::codec`]) and an Ed25519
//! signature over exactly those bytes, both in unpadded base64url. The root
//! signs with the mesh's token key; every relay holds the public key, so any
//! of them can check a token without asking the root. The claims carry that
//! public key too ([`TokenClaims::token_key`]): a joining node, which holds
//! nothing else yet, checks the signature with it before it dials anything
//! ([`verify_as_joining_node`]).
//!
//! This module only reads and writes tokens. Whether a token admits a node
//! (its parent, mesh, single use) is [`crate::admission`]'s decision.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use relaymesh_protocol::limits::{MAX_ADDRESSES, MAX_TOKEN_LEN};
use relaymesh_protocol::parents::MAX_CANDIDATES;
use relaymesh_protocol::token::{TokenClaims, TOKEN_PREFIX};
use relaymesh_protocol::Role;
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};

/// The length of an Ed25519 signature.
const SIGNATURE_LEN: usize = 64;

/// Why a token could not be issued or was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is not a well-formed version-4 token (prefix, parts,
    /// base64, length or claims encoding).
    #[error("malformed join token: {0}")]
    Malformed(String),
    /// The signature does not verify with the mesh's token key: the token was
    /// altered or signed by another mesh.
    #[error("join token signature does not verify with this mesh's token key")]
    BadSignature,
    /// The signature does not verify with the token key the claims name:
    /// the token was altered after the root signed it (checked by the
    /// joining node before it dials).
    #[error("join token signature does not verify with the token key it names: the token was altered (its parent, address or keys changed); ask for a new one")]
    Altered,
    /// The token's lifetime has passed.
    #[error("join token expired at {expired_unix} (Unix seconds)")]
    Expired {
        /// When it stopped being valid, in seconds since the Unix epoch.
        expired_unix: u64,
    },
    /// The signing key is not an Ed25519 PKCS#8 key pair.
    #[error("the token signing key is not an Ed25519 PKCS#8 key pair")]
    BadSigningKey,
    /// The claims could not be encoded.
    #[error("cannot encode the token claims")]
    Encode(#[source] relaymesh_protocol::codec::CodecError),
    /// The token would be longer than the limit every relay enforces.
    #[error("the token would be {len} characters, more than the limit of {MAX_TOKEN_LEN}")]
    TooLong {
        /// The token's length.
        len: usize,
    },
}

/// The relay a token names as parent: its name, where to dial it, the
/// relays whose issuers lead to its certificate (see
/// [`TokenClaims::parent_issuers`]) and the key of its own issuer (see
/// [`TokenClaims::parent_issuer_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenParent {
    /// The parent's name.
    pub name: String,
    /// Its addresses.
    pub addresses: Vec<String>,
    /// The relays between the root and it, top-down, neither included.
    pub issuers: Vec<String>,
    /// SHA-256 of the SubjectPublicKeyInfo of its issuer (the mesh CA's for
    /// the root), as the root recorded it.
    pub issuer_key: [u8; 32],
}

/// New claims for `name` in `role` under `parent`, pinning the mesh CA
/// `ca_sha256`, valid for `ttl` from `now_unix`, with a fresh random id.
pub fn new_claims(
    name: &str,
    role: Role,
    parent: TokenParent,
    ca_sha256: [u8; 32],
    ttl: Duration,
    now_unix: u64,
) -> TokenClaims {
    TokenClaims {
        id: rand::random(),
        name: name.to_string(),
        role,
        parent: parent.name,
        parent_addresses: parent.addresses,
        parent_issuers: parent.issuers,
        ca_sha256,
        not_after_unix: now_unix.saturating_add(ttl.as_secs()),
        candidates: Vec::new(),
        token_key: [0; 32],
        parent_issuer_key: parent.issuer_key,
    }
}

/// Signs `claims` with the mesh's token key (Ed25519, PKCS#8 DER) and
/// returns the token text. The signed claims name that key's public half
/// as [`TokenClaims::token_key`], whatever `claims` held there.
pub fn issue(signing_key_pkcs8: &[u8], claims: &TokenClaims) -> Result<String, TokenError> {
    let key =
        Ed25519KeyPair::from_pkcs8(signing_key_pkcs8).map_err(|_| TokenError::BadSigningKey)?;
    let mut claims = claims.clone();
    claims.token_key = key
        .public_key()
        .as_ref()
        .try_into()
        .map_err(|_| TokenError::BadSigningKey)?;
    let claims_bytes = relaymesh_protocol::codec::encode(&claims).map_err(TokenError::Encode)?;
    let signature = key.sign(&claims_bytes);
    let token = format!(
        "{TOKEN_PREFIX}{}.{}",
        URL_SAFE_NO_PAD.encode(&claims_bytes),
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    );
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong { len: token.len() });
    }
    Ok(token)
}

/// Reads a token's claims without checking its signature or lifetime.
///
/// For tools that only show what a token says; a joining node uses
/// [`verify_as_joining_node`].
pub fn read_unverified(token: &str) -> Result<TokenClaims, TokenError> {
    let parts = split(token)?;
    decode_claims(&parts)
}

/// Checks a token's signature with the token key its own claims name
/// ([`TokenClaims::token_key`]) and returns its claims: what a joining node,
/// which holds no key of the mesh yet, can check before it dials anything.
///
/// It refuses a token altered after signing (another address, parent or
/// key) unless whoever altered it signed it again with a key of their own,
/// which the real parent refuses and the grant's token key exposes (see
/// docs/security.md, "Joining"). The lifetime is the admitting relay's to
/// check, by its clock.
pub fn verify_as_joining_node(token: &str) -> Result<TokenClaims, TokenError> {
    let parts = split(token)?;
    let claims = decode_claims(&parts)?;
    UnparsedPublicKey::new(&ED25519, &claims.token_key)
        .verify(&parts.claims, &parts.signature)
        .map_err(|_| TokenError::Altered)?;
    Ok(claims)
}

/// Checks a token's signature with the mesh's token key (Ed25519 public key)
/// and its lifetime, and returns its claims. A token is valid up to and
/// including its `not_after_unix` second.
pub fn verify(token: &str, public_key: &[u8], now_unix: u64) -> Result<TokenClaims, TokenError> {
    let parts = split(token)?;
    UnparsedPublicKey::new(&ED25519, public_key)
        .verify(&parts.claims, &parts.signature)
        .map_err(|_| TokenError::BadSignature)?;
    let claims = decode_claims(&parts)?;
    if now_unix > claims.not_after_unix {
        return Err(TokenError::Expired {
            expired_unix: claims.not_after_unix,
        });
    }
    Ok(claims)
}

/// A token's decoded parts, not yet checked.
struct Parts {
    claims: Vec<u8>,
    signature: Vec<u8>,
}

/// Checks the length and shape of a token and decodes its base64 parts.
fn split(token: &str) -> Result<Parts, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(malformed(format!(
            "{} characters, more than the limit of {MAX_TOKEN_LEN}",
            token.len()
        )));
    }
    let token = token.trim();
    let Some(body) = token.strip_prefix(TOKEN_PREFIX) else {
        if token.starts_with("rmt2.") || token.starts_with("rmt3.") {
            return Err(malformed(format!(
                "it is an older token that names no keys for its parent; ask for a new one (they start with {TOKEN_PREFIX:?})"
            )));
        }
        return Err(malformed(format!(
            "it does not start with {TOKEN_PREFIX:?}"
        )));
    };
    let Some((claims, signature)) = body.split_once('.') else {
        return Err(malformed("expected rmt4.<claims>.<signature>"));
    };
    if signature.contains('.') {
        return Err(malformed("expected rmt4.<claims>.<signature>"));
    }
    let claims = URL_SAFE_NO_PAD
        .decode(claims)
        .map_err(|e| malformed(format!("claims are not unpadded base64url: {e}")))?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|e| malformed(format!("signature is not unpadded base64url: {e}")))?;
    if signature.len() != SIGNATURE_LEN {
        return Err(malformed(format!(
            "signature is {} bytes, not {SIGNATURE_LEN}",
            signature.len()
        )));
    }
    Ok(Parts { claims, signature })
}

fn decode_claims(parts: &Parts) -> Result<TokenClaims, TokenError> {
    let undecodable =
        |e: relaymesh_protocol::codec::CodecError| malformed(format!("claims do not decode: {e}"));
    let claims: TokenClaims =
        relaymesh_protocol::codec::decode(&parts.claims).map_err(undecodable)?;
    if claims.candidates.len() > MAX_CANDIDATES {
        return Err(malformed(format!(
            "{} candidate parents, more than the limit of {MAX_CANDIDATES}",
            claims.candidates.len()
        )));
    }
    for parent in claims.parents() {
        if parent.addresses.len() > MAX_ADDRESSES {
            return Err(malformed(format!(
                "{} addresses for parent {:?}, more than the limit of {MAX_ADDRESSES}",
                parent.addresses.len(),
                parent.name
            )));
        }
    }
    Ok(claims)
}

fn malformed(reason: impl Into<String>) -> TokenError {
    TokenError::Malformed(reason.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn key_pair() -> (Vec<u8>, Vec<u8>) {
        let pkcs8 =
            Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).expect("generate key");
        let public = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
            .expect("parse key")
            .public_key()
            .as_ref()
            .to_vec();
        (pkcs8.as_ref().to_vec(), public)
    }

    fn claims() -> TokenClaims {
        new_claims(
            "edge-1",
            Role::Agent,
            TokenParent {
                name: "eu".into(),
                addresses: vec!["10.0.0.1:7443".into(), "eu.example:7443".into()],
                issuers: Vec::new(),
                issuer_key: [5; 32],
            },
            [7; 32],
            Duration::from_secs(3600),
            NOW,
        )
    }

    #[test]
    fn round_trip() {
        let (signing, public) = key_pair();
        let claims = claims();
        let token = issue(&signing, &claims).expect("issue");
        assert!(token.starts_with("rmt4."));
        let read = verify(&token, &public, NOW).expect("verify");
        assert_eq!(read.token_key.as_slice(), public.as_slice());
        let claims = TokenClaims {
            token_key: read.token_key,
            ..claims
        };
        assert_eq!(read, claims);
        assert_eq!(read_unverified(&token).expect("read"), claims);
        assert_eq!(claims.not_after_unix, NOW + 3600);
        // Valid through its last second.
        assert!(verify(&token, &public, NOW + 3600).is_ok());
    }

    #[test]
    fn candidates_travel_and_are_bounded() {
        let (signing, public) = key_pair();
        let mut claims = claims();
        claims.candidates = vec![relaymesh_protocol::CandidateParent {
            name: "us".into(),
            addresses: vec!["10.0.0.2:7443".into()],
            issuers: Vec::new(),
            issuer_key: [2; 32],
        }];
        let token = issue(&signing, &claims).expect("issue");
        let read = verify(&token, &public, NOW).expect("verify");
        claims.token_key = read.token_key;
        assert_eq!(read, claims);
        assert!(read.admits_under("eu") && read.admits_under("us") && !read.admits_under("ap"));
        let names: Vec<String> = read.parents().into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["eu", "us"]);

        claims.candidates = vec![claims.candidates[0].clone(); MAX_CANDIDATES + 1];
        let token = issue(&signing, &claims).expect("issue");
        match verify(&token, &public, NOW) {
            Err(TokenError::Malformed(reason)) => assert!(reason.contains("candidate"), "{reason}"),
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    /// Tokens that name issuers instead of keys are refused, with why.
    #[test]
    fn a_token_of_an_older_version_is_refused() {
        let (signing, public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        let older = token.replacen("rmt4.", "rmt3.", 1);
        match verify(&older, &public, NOW) {
            Err(TokenError::Malformed(reason)) => {
                assert!(reason.contains("older token"), "{reason}")
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    /// The joining node checks the signature with the key the token names:
    /// an address changed on the way is refused before anything is dialed.
    #[test]
    fn a_joining_node_refuses_a_token_altered_after_signing() {
        let (signing, public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        let read = verify_as_joining_node(&token).expect("an intact token");
        assert_eq!(read.token_key.as_slice(), public.as_slice());
        assert_eq!(read, verify(&token, &public, NOW).expect("verify"));

        let mut altered = read.clone();
        altered.parent_addresses = vec!["203.0.113.9:7443".into()];
        let (_, signature) = token.rsplit_once('.').expect("a signature");
        let bytes = relaymesh_protocol::codec::encode(&altered).expect("encode");
        let altered = format!(
            "{TOKEN_PREFIX}{}.{signature}",
            URL_SAFE_NO_PAD.encode(bytes)
        );
        assert!(matches!(
            verify_as_joining_node(&altered),
            Err(TokenError::Altered)
        ));
        assert!(matches!(
            verify(&altered, &public, NOW),
            Err(TokenError::BadSignature)
        ));
    }

    #[test]
    fn ids_are_random() {
        assert_ne!(claims().id, claims().id);
    }

    #[test]
    fn tampered_signature_is_refused() {
        let (signing, public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        let (head, signature) = token.rsplit_once('.').expect("has a signature");
        let mut signature = URL_SAFE_NO_PAD.decode(signature).expect("base64");
        signature[0] ^= 1;
        let tampered = format!("{head}.{}", URL_SAFE_NO_PAD.encode(signature));
        assert!(matches!(
            verify(&tampered, &public, NOW),
            Err(TokenError::BadSignature)
        ));
    }

    #[test]
    fn tampered_claims_are_refused() {
        let (signing, public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        let mut other = claims();
        other.name = "edge-2".into();
        let forged = issue(&key_pair().0, &other).expect("issue");
        // Claims of one token with the signature of the other.
        let (_, signature) = token.rsplit_once('.').expect("signature");
        let (forged_head, _) = forged.rsplit_once('.').expect("claims");
        let spliced = format!("{forged_head}.{signature}");
        assert!(matches!(
            verify(&spliced, &public, NOW),
            Err(TokenError::BadSignature)
        ));
    }

    #[test]
    fn other_key_is_refused() {
        let (signing, _) = key_pair();
        let (_, other_public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        assert!(matches!(
            verify(&token, &other_public, NOW),
            Err(TokenError::BadSignature)
        ));
    }

    #[test]
    fn expired_is_refused() {
        let (signing, public) = key_pair();
        let token = issue(&signing, &claims()).expect("issue");
        match verify(&token, &public, NOW + 3601) {
            Err(TokenError::Expired { expired_unix }) => assert_eq!(expired_unix, NOW + 3600),
            other => panic!("expected Expired, got {other:?}"),
        }
    }

    /// Clock skew (docs/reliability.md): a token's lifetime is set by the
    /// issuer's clock (the root's, at `relayctl token create`) and checked
    /// against the admitting relay's. A relay 10 minutes ahead of the root
    /// takes 10 minutes off every token it admits; one 10 minutes behind
    /// adds them. Only a token whose lifetime is shorter than the skew is
    /// refused at once; the default of an hour has room for it.
    #[test]
    fn ten_minutes_of_skew_move_a_tokens_expiry_by_as_much() {
        const SKEW: u64 = 10 * 60;
        let (signing, public) = key_pair();
        let hour = issue(&signing, &claims()).expect("issue");
        assert!(
            verify(&hour, &public, NOW + SKEW).is_ok(),
            "an hour's token, admitted 10 min ahead"
        );
        assert!(
            verify(&hour, &public, NOW - SKEW).is_ok(),
            "and 10 min behind"
        );
        assert!(verify(&hour, &public, NOW + 3600 - SKEW).is_ok());
        assert!(
            verify(&hour, &public, NOW + SKEW + 3600).is_err(),
            "10 min early, as the relay sees it"
        );

        let mut short = claims();
        short.not_after_unix = NOW + 5 * 60;
        let five_minutes = issue(&signing, &short).expect("issue");
        assert!(
            matches!(
                verify(&five_minutes, &public, NOW + SKEW),
                Err(TokenError::Expired { .. })
            ),
            "a token shorter than the skew is expired on arrival"
        );
    }

    #[test]
    fn garbage_is_malformed() {
        let (_, public) = key_pair();
        for garbage in [
            "",
            "rmt4.",
            "rmt4..",
            "hello",
            "rmt4.AAAA.AAAA",
            "rmt4.!!!.AAAA",
            "rmt4.AAAA",
            "rmt4.AAAA.AAAA.AAAA",
        ] {
            assert!(
                matches!(verify(garbage, &public, NOW), Err(TokenError::Malformed(_))),
                "{garbage:?}"
            );
            assert!(
                matches!(read_unverified(garbage), Err(TokenError::Malformed(_))),
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn signed_garbage_claims_are_malformed() {
        let (signing, public) = key_pair();
        let key = Ed25519KeyPair::from_pkcs8(&signing).expect("key");
        let bytes = b"not bincode claims";
        let token = format!(
            "rmt4.{}.{}",
            URL_SAFE_NO_PAD.encode(bytes),
            URL_SAFE_NO_PAD.encode(key.sign(bytes).as_ref())
        );
        assert!(matches!(
            verify(&token, &public, NOW),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn oversized_is_malformed_before_decoding() {
        let (_, public) = key_pair();
        let token = format!("rmt4.{}.AAAA", "A".repeat(MAX_TOKEN_LEN));
        match verify(&token, &public, NOW) {
            Err(TokenError::Malformed(reason)) => assert!(reason.contains("limit"), "{reason}"),
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn oversized_claims_are_not_issued() {
        let (signing, _) = key_pair();
        let mut claims = claims();
        claims.parent_addresses = vec!["a".repeat(200); 16];
        assert!(matches!(
            issue(&signing, &claims),
            Err(TokenError::TooLong { .. })
        ));
    }

    #[test]
    fn bad_signing_key_is_refused() {
        assert!(matches!(
            issue(b"not a key", &claims()),
            Err(TokenError::BadSigningKey)
        ));
    }
}
