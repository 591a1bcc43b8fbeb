//! Decoding the object in a request body (JSON, YAML, or protobuf), and
//! the error a body that cannot be decoded gets. Routes outside `crud`
//! decode bodies the same way, so the answers match.

use serde_json::Value;

use crate::body::{self, BodyError};
use crate::collection::too_deep_error;
use crate::protobuf::{self, ProtobufError};
use crate::ApiError;

/// [`decode`] on tokio's blocking pool. A body of the largest size nested
/// to the depth limit takes seconds to decode as YAML; on the API's async
/// workers three such bodies held `/healthz` for 6 s on 2 cores (`testbed
/// bench decode`, issue 29). Aside, they only share the CPU.
pub(super) async fn decode_aside(body: Vec<u8>, content_type: &str) -> Result<Value, ApiError> {
    let content_type = content_type.to_string();
    tokio::task::spawn_blocking(move || decode(&body, &content_type))
        .await
        .map_err(|error| ApiError::Internal(format!("decoding the body failed: {error}")))?
}

/// The object in a create or update body: JSON, YAML, or the protobuf of
/// the few kinds kubectl's typed commands send.
pub(crate) fn decode(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") {
        let mut object = protobuf::decode(body).map_err(|error| match error {
            ProtobufError::UnknownKind { .. } => ApiError::UnsupportedMediaType(error.to_string()),
            _ => ApiError::BadRequest(error.to_string()),
        })?;
        // client-go writes a status of zero values (`observedGeneration:
        // 0`) for a new object; kubectl wait would read it as stale.
        if object.get("status").is_some_and(is_zero) {
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
        }
        crate::depth::check_value(&object).map_err(too_deep_error)?;
        return Ok(object);
    }
    if content_type.contains("cbor") {
        return Err(ApiError::UnsupportedMediaType(
            "CBOR bodies are not supported; send JSON".into(),
        ));
    }
    // YAML only when the content type says so: a JSON body that fails is
    // not tried again as YAML (whose parse of deep nesting is slow).
    let decoded = if body::is_yaml(content_type) {
        body::yaml(body)
    } else {
        body::json(body)
    };
    decoded.map_err(body_error)
}

/// The answer to a body that cannot be decoded: 422 naming the path when
/// it is too deep, else 400.
pub(crate) fn body_error(error: BodyError) -> ApiError {
    match error {
        BodyError::TooDeep(too_deep) => too_deep_error(too_deep),
        other => ApiError::BadRequest(format!("cannot decode the object: {other}")),
    }
}

/// Whether `value` holds nothing but zero values (`""`, `0`, `false`,
/// empty lists and maps).
pub(super) fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.iter().all(is_zero),
        Value::Object(fields) => fields.values().all(is_zero),
    }
}
