//! The HTTP pieces every handler shares: the reply body type, JSON and
//! error replies, and reading a request body under a size limit. A leaf:
//! it knows requests and replies, not routes or resources.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde::Serialize;

use super::protobuf;
use super::status::Status;
use super::ApiError;
use crate::limits::ApiLimit;

/// The body of every reply: whole JSON documents or a watch's stream.
pub type ApiBody = UnsyncBoxBody<Bytes, Infallible>;

/// The largest JSON body the API reads: kube-apiserver's limit for every
/// request but a bundle push (its `MaxRequestBodyBytes`, 3 MiB), so what
/// kubectl sends a Kubernetes cluster it can send here. Patches, creates and
/// updates go through it alike.
pub const MAX_JSON_BODY: u64 = 3 * 1024 * 1024;

/// Reads a whole body, refusing it with 413 as soon as it is known to be
/// larger than `limit`, before reading further.
pub(crate) async fn read_body(mut body: Incoming, limit: u64) -> Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::OverLimit {
        limit: ApiLimit::RequestBody,
        error: Box::new(ApiError::PayloadTooLarge(format!(
            "Request entity too large: the request body is larger than the limit of {limit} bytes"
        ))),
    };
    let announced = body.size_hint().lower();
    if announced > limit {
        return Err(too_large());
    }
    // Trust the announced length only so far: it costs the client nothing.
    let capacity = usize::try_from(announced.min(MAX_JSON_BODY)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::BadRequest(format!("cannot read the request body: {error}"))
        })?;
        if let Ok(data) = frame.into_data() {
            if (bytes.len() + data.len()) as u64 > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// A JSON reply.
pub fn json_reply(
    status: StatusCode,
    body: &impl Serialize,
) -> Result<Response<ApiBody>, ApiError> {
    let bytes = serde_json::to_vec(body)
        .map_err(|error| ApiError::Internal(format!("cannot encode the reply: {error}")))?;
    Ok(reply(status, "application/json", bytes))
}

/// The `metav1.Status` reply to `error`.
pub(super) fn error_reply(error: &ApiError) -> Response<ApiBody> {
    let status = Status::from_error(error);
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // A Status of strings and numbers always serializes; fall back to an
    // empty body rather than panic if that ever changes.
    let bytes = serde_json::to_vec(&status).unwrap_or_default();
    let mut response = reply(code, "application/json", bytes);
    if let Some(seconds) = status
        .details
        .and_then(|details| details.retry_after_seconds)
    {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A reply of `content_type` holding `bytes`.
pub fn reply(status: StatusCode, content_type: &'static str, bytes: Vec<u8>) -> Response<ApiBody> {
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `response` in Kubernetes protobuf when the request's `accept` prefers it
/// and the reply is a whole JSON object that has a protobuf form (a
/// built-in kind, its list, or a `Status`), as kube-apiserver negotiates;
/// otherwise unchanged. Streams (watches) are left as they are.
pub(super) async fn negotiate(response: Response<ApiBody>, accept: &str) -> Response<ApiBody> {
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes() == b"application/json");
    let whole = response.body().size_hint().exact().is_some();
    if !is_json || !whole || !protobuf::wants_protobuf(accept) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    let encoded = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|object| protobuf::encode(&object).ok());
    let mut response = match encoded {
        Some(encoded) => {
            let mut response =
                Response::from_parts(parts, Full::new(Bytes::from(encoded)).boxed_unsync());
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(protobuf::MEDIA_TYPE));
            response
        }
        // No protobuf form (a custom resource, relaymesh's kinds): JSON,
        // which every client that asks for protobuf also takes.
        None => Response::from_parts(parts, Full::new(bytes).boxed_unsync()),
    };
    response
        .headers_mut()
        .insert(hyper::header::VARY, HeaderValue::from_static("Accept"));
    response
}
