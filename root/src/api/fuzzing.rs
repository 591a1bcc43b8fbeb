//! Entry points for the fuzz targets in `fuzz/` (docs/testing.md,
//! "Fuzzing") into relaymesh's own API paths; the Kubernetes API's are in
//! `relaymesh_apiserver::fuzzing`.
//!
//! Not an API: hidden from the docs, and changed together with the fuzz
//! targets.

use super::tokens::JoinToken;
use super::{ApiError, TokenRequest};

/// A `JoinToken` request body, decoded and checked as `POST
/// /apis/relaymesh.dev/v1alpha1/jointokens` does.
pub fn join_token_request(body: &[u8]) -> Result<TokenRequest, ApiError> {
    JoinToken::parse(body).map(|token| token.request)
}
