//! Why a call to the root's API failed, and how a failure reads: a
//! `metav1.Status` reply as kubectl prints it, an unreachable server by the
//! one cause an operator can act on. A leaf, so every part of the client can
//! name [`ClientError`] without the parts naming each other.

use serde::Deserialize;

/// Why a call to the API failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The credentials cannot be used as given.
    #[error("{0}")]
    Credentials(String),
    /// A PEM block of the credentials cannot be decoded.
    #[error("cannot decode the {what} PEM")]
    Pem {
        /// `CA certificate`, `client certificate` or `client key`.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the certificates or key.
    #[error("cannot configure TLS")]
    Tls(#[source] rustls::Error),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client")]
    Build(#[source] reqwest::Error),
    /// The request did not get an answer: the server is down, unreachable, or
    /// failed the TLS handshake.
    #[error("cannot reach the root at {server}: {detail}")]
    Unreachable {
        /// The server's URL.
        server: String,
        /// The innermost cause, for a one-line message.
        detail: String,
        /// The full cause.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error.
    #[error("Error from server ({reason}): {message}")]
    Api {
        /// The HTTP status code.
        code: u16,
        /// The `metav1.Status` reason, as `Forbidden`.
        reason: String,
        /// The server's explanation.
        message: String,
    },
    /// The server's answer is not what the API promises.
    #[error("unexpected answer from the server: {0}")]
    Decode(String),
}

/// The lenient view of a `metav1.Status` reply.
#[derive(Deserialize)]
struct StatusReply {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

impl ClientError {
    /// `server` gave no answer (or only part of one) because of `source`.
    pub(super) fn unreachable(server: &str, source: reqwest::Error) -> ClientError {
        ClientError::Unreachable {
            server: server.to_string(),
            detail: innermost_cause(&source),
            source,
        }
    }

    /// The error an unsuccessful reply with `status` and `body` carries: its
    /// `metav1.Status`, else (a body that is not one) the status's reason
    /// and the start of the body.
    pub(super) fn from_reply(status: reqwest::StatusCode, body: &[u8]) -> ClientError {
        let code = status.as_u16();
        match serde_json::from_slice::<StatusReply>(body) {
            Ok(reply) if reply.kind == "Status" => ClientError::Api {
                code,
                reason: reply.reason,
                message: reply.message,
            },
            _ => ClientError::Api {
                code,
                reason: status
                    .canonical_reason()
                    .unwrap_or("Unknown")
                    .replace(' ', ""),
                message: String::from_utf8_lossy(body).chars().take(200).collect(),
            },
        }
    }
}

/// The message of the deepest error in `error`'s chain ("connection
/// refused"), without the layers reqwest and hyper wrap around it.
fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    if let Some(io) = innermost.downcast_ref::<std::io::Error>() {
        if io.raw_os_error().is_some() {
            // "Connection refused (os error 111)" says less than the kind.
            return io.kind().to_string();
        }
    }
    if error
        .downcast_ref::<reqwest::Error>()
        .is_some_and(reqwest::Error::is_timeout)
    {
        return "timed out".to_string();
    }
    innermost.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_like_kubectl() {
        let error = ClientError::Api {
            code: 403,
            reason: "Forbidden".into(),
            message: "relay/eu is not allowed".into(),
        };
        assert_eq!(
            error.to_string(),
            "Error from server (Forbidden): relay/eu is not allowed"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn innermost_cause_prefers_the_io_kind() {
        let io = std::io::Error::from_raw_os_error(111);
        let cause = innermost_cause(&io);
        assert_eq!(cause, std::io::ErrorKind::ConnectionRefused.to_string());
    }
}
