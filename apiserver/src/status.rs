//! `metav1.Status`: how every error leaves the API.
//!
//! kube-apiserver answers every failed request with a `Status` object whose
//! `reason` and `code` clients act on (kubectl prints `Error from server
//! (Reason): message`; kube-rs decodes it into an `ErrorResponse`). This module
//! maps an [`ApiError`] onto that shape and nothing else: it does no IO.

use serde::{Deserialize, Serialize};

use super::ApiError;

/// A `metav1.Status` object, as kube-apiserver writes it for failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// Always empty for errors.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// `Failure` (successes are answered with the object itself).
    pub status: String,
    /// A sentence for humans.
    pub message: String,
    /// The machine-readable `StatusReason` (`NotFound`, `Invalid`, ...).
    pub reason: String,
    /// What the failure was about, when the API knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code, repeated.
    pub code: u16,
}

/// `metav1.StatusDetails`: which field was wrong, for `Invalid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The causes; one per invalid field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// When to try again, in seconds, for `TooManyRequests`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`: one invalid field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// `FieldValueInvalid`, as kube-apiserver says for most validation errors.
    pub reason: String,
    /// What is wrong with the field.
    pub message: String,
    /// The field's JSON path, as `spec.name`.
    pub field: String,
}

impl Status {
    /// The `Status` that reports `error`.
    pub fn from_error(error: &ApiError) -> Self {
        if let ApiError::OverLimit { error, .. } = error {
            return Self::from_error(error);
        }
        let (code, reason) = code_and_reason(error);
        let details = match error {
            ApiError::Invalid { field, message } => Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: "FieldValueInvalid".to_string(),
                    message: message.clone(),
                    field: field.clone(),
                }],
                retry_after_seconds: None,
            }),
            ApiError::FieldConflicts { causes, .. } => Some(StatusDetails {
                causes: causes
                    .iter()
                    .map(|(manager, field)| StatusCause {
                        reason: "FieldManagerConflict".to_string(),
                        message: format!("conflict with {manager:?}"),
                        field: field.clone(),
                    })
                    .collect(),
                retry_after_seconds: None,
            }),
            ApiError::TooManyRequests {
                retry_after_seconds,
                ..
            } => Some(StatusDetails {
                causes: Vec::new(),
                retry_after_seconds: Some(*retry_after_seconds),
            }),
            _ => None,
        };
        Self {
            kind: "Status".to_string(),
            api_version: "v1".to_string(),
            metadata: serde_json::Map::new(),
            status: "Failure".to_string(),
            message: error.to_string(),
            reason: reason.to_string(),
            details,
            code,
        }
    }
}

/// The HTTP status code and `StatusReason` of an error, as kube-apiserver
/// pairs them (`k8s.io/apimachinery/pkg/api/errors`).
pub fn code_and_reason(error: &ApiError) -> (u16, &'static str) {
    match error {
        ApiError::BadRequest(_) => (400, "BadRequest"),
        ApiError::Unauthorized(_) => (401, "Unauthorized"),
        ApiError::Forbidden(_) => (403, "Forbidden"),
        ApiError::NotFound(_) => (404, "NotFound"),
        ApiError::MethodNotAllowed(_) => (405, "MethodNotAllowed"),
        ApiError::Conflict(_) | ApiError::FieldConflicts { .. } => (409, "Conflict"),
        ApiError::AlreadyExists(_) => (409, "AlreadyExists"),
        ApiError::Gone(_) => (410, "Expired"),
        ApiError::NotAcceptable(_) => (406, "NotAcceptable"),
        ApiError::UnsupportedMediaType(_) => (415, "UnsupportedMediaType"),
        ApiError::PayloadTooLarge(_) => (413, "RequestEntityTooLarge"),
        ApiError::Invalid { .. } => (422, "Invalid"),
        ApiError::TooManyRequests { .. } => (429, "TooManyRequests"),
        ApiError::Unavailable(_) => (503, "ServiceUnavailable"),
        ApiError::Timeout(_) => (504, "Timeout"),
        ApiError::Internal(_) | ApiError::TlsConfig(_) => (500, "InternalError"),
        ApiError::OverLimit { error, .. } => code_and_reason(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_has_kube_apiserver_shape() {
        let status = Status::from_error(&ApiError::Unauthorized("no client certificate".into()));
        let json = serde_json::to_value(&status).expect("a Status serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "no client certificate",
                "reason": "Unauthorized",
                "code": 401,
            })
        );
    }

    #[test]
    fn invalid_names_the_field() {
        let error = ApiError::Invalid {
            field: "spec.ttl".into(),
            message: "must be at most 24h".into(),
        };
        let status = Status::from_error(&error);
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert!(status.message.contains("spec.ttl"), "{}", status.message);
        let cause = &status.details.expect("Invalid has details").causes[0];
        assert_eq!(cause.field, "spec.ttl");
    }

    #[test]
    fn every_reason_pairs_with_its_code() {
        let cases = [
            (ApiError::BadRequest(String::new()), 400),
            (ApiError::Forbidden(String::new()), 403),
            (ApiError::NotFound(String::new()), 404),
            (ApiError::MethodNotAllowed(String::new()), 405),
            (ApiError::Conflict(String::new()), 409),
            (ApiError::PayloadTooLarge(String::new()), 413),
            (ApiError::Unavailable(String::new()), 503),
            (ApiError::Internal(String::new()), 500),
        ];
        for (error, code) in cases {
            assert_eq!(code_and_reason(&error).0, code, "{error:?}");
        }
    }

    #[test]
    fn too_many_requests_says_when_to_retry() {
        let status = Status::from_error(&ApiError::TooManyRequests {
            message: "too many watches".into(),
            retry_after_seconds: 1,
        });
        assert_eq!(
            (status.code, status.reason.as_str()),
            (429, "TooManyRequests")
        );
        let json = serde_json::to_value(&status).expect("serializes");
        assert_eq!(json["details"], serde_json::json!({"retryAfterSeconds": 1}));
    }
}
