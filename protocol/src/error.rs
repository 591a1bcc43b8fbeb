//! Error codes that cross the wire, so a refused peer learns why.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a peer refused a request. Codes are only ever appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A frame could not be decoded or broke a limit.
    Malformed,
    /// No protocol version is spoken by both sides.
    UnsupportedVersion,
    /// The peer presented no certificate where one is required.
    Unauthenticated,
    /// The peer's identity does not allow what it asked.
    Forbidden,
    /// The join token is malformed or its signature does not verify.
    TokenInvalid,
    /// The join token's lifetime has passed.
    TokenExpired,
    /// The join token was already used.
    TokenReused,
    /// The join token names another node, role, parent or mesh.
    TokenMismatch,
    /// The requested item does not exist here.
    NotFound,
    /// The request is larger than a limit allows.
    TooLarge,
    /// The peer cannot serve the request now; retry later.
    Unavailable,
    /// An unexpected failure on the refusing side.
    Internal,
    /// The root revoked the peer's certificate or token (see
    /// [`crate::revocation`]).
    Revoked,
    /// The peer moved to another parent on the root's order (see
    /// [`crate::moves`]).
    Moved,
    /// The peer's certificate has expired: a connection made with it may
    /// only renew it, within the parent's grace period.
    CertificateExpired,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Malformed => "malformed",
            Self::UnsupportedVersion => "unsupported protocol version",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::TokenInvalid => "invalid token",
            Self::TokenExpired => "token expired",
            Self::TokenReused => "token already used",
            Self::TokenMismatch => "token does not match",
            Self::NotFound => "not found",
            Self::TooLarge => "too large",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal error",
            Self::Revoked => "revoked",
            Self::Moved => "moved",
            Self::CertificateExpired => "certificate expired",
        };
        f.write_str(text)
    }
}

/// A refusal: a code for programs and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refusal {
    /// What kind of refusal.
    pub code: ErrorCode,
    /// What went wrong, for an operator.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
