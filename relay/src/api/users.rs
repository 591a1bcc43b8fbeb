//! The `UserCertificate` object: an admin asks the API CA to sign a user's
//! certificate request for one group, and gets the certificate back.
//!
//! A client POSTs `{"apiVersion":"relaymesh.dev/v1alpha1","kind":
//! "UserCertificate","metadata":{"name":"alice"},"spec":{"group":"viewers",
//! "request":"<PEM certificate request>","expirationSeconds":2592000}}` and
//! receives the object with `status.certificate` and `status.ca` (PEM). The
//! key stays wherever the request was made (`relayctl user create`).

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::nodes::{check_type_meta, invalid, rfc3339, API_VERSION};
use super::policy::GROUPS;
use super::ApiError;
use crate::pki::{self, ApiAuthority};

/// The kind of a user certificate request.
const KIND: &str = "UserCertificate";

/// How long a user certificate lasts unless the request says otherwise.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Checks a `UserCertificate` request and signs it with `authority`.
pub(super) fn issue(authority: &ApiAuthority, body: &[u8]) -> Result<Value, ApiError> {
    let mut object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {KIND} object: {error}"))
    })?;
    check_type_meta(&object, KIND)?;
    let name = object
        .get("metadata")
        .and_then(|metadata| metadata.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("metadata.name", "Required value"))?
        .to_string();
    relaymesh_protocol::name::validate(&name)
        .map_err(|error| invalid("metadata.name", format!("Invalid value: {name:?}: {error}")))?;
    let spec = object
        .get("spec")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("spec", "Required value"))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("spec.group", "Required value"))?;
    if !GROUPS.contains(&group) {
        return Err(invalid(
            "spec.group",
            format!("Unsupported value: {group:?}: supported values: \"viewers\", \"operators\", \"admins\""),
        ));
    }
    let request = spec
        .get("request")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("spec.request", "Required value"))?;
    let csr_der = csr_from_pem(request)?;
    let validity = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_VALIDITY,
        Some(value) => {
            let seconds = value
                .as_u64()
                .filter(|seconds| *seconds > 0)
                .ok_or_else(|| invalid("spec.expirationSeconds", "must be a positive integer"))?;
            let validity = Duration::from_secs(seconds);
            if validity > pki::MAX_USER_CERT_VALIDITY {
                return Err(invalid(
                    "spec.expirationSeconds",
                    format!(
                        "Invalid value: {seconds}: must be at most {}",
                        pki::MAX_USER_CERT_VALIDITY.as_secs()
                    ),
                ));
            }
            validity
        }
    };
    let group = group.to_string();
    let certificate = pki::sign_user_cert(authority, &csr_der, &name, &[&group], validity)
        .map_err(|error| invalid("spec.request", error.to_string()))?;
    let expires_ms = std::time::SystemTime::now()
        .checked_add(validity)
        .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |at| u64::try_from(at.as_millis()).unwrap_or(u64::MAX));
    tracing::info!(user = %name, %group, ?validity, "issued a user certificate");
    object.insert("apiVersion".into(), json!(API_VERSION));
    object.insert("kind".into(), json!(KIND));
    object.insert(
        "status".into(),
        json!({
            "certificate": pki::der_to_pem(&certificate, "CERTIFICATE"),
            "ca": pki::authority_pem(authority),
            "expirationTimestamp": rfc3339(expires_ms),
        }),
    );
    Ok(Value::Object(object))
}

/// The DER of a PEM `CERTIFICATE REQUEST`.
fn csr_from_pem(text: &str) -> Result<Vec<u8>, ApiError> {
    let mut reader = std::io::BufReader::new(text.as_bytes());
    match rustls_pemfile::read_one(&mut reader) {
        Ok(Some(rustls_pemfile::Item::Csr(der))) => Ok(der.to_vec()),
        _ => Err(invalid("spec.request", "must be a PEM CERTIFICATE REQUEST")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, group: &str) -> Value {
        let key = pki::new_user_key(name).expect("a key");
        json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "request": pki::der_to_pem(&key.csr_der, "CERTIFICATE REQUEST"),
            },
        })
    }

    #[test]
    fn signs_a_certificate_naming_the_user_and_group() {
        let authority = pki::create_api_authority().expect("a CA");
        let reply = issue(
            &authority,
            request("alice", "viewers").to_string().as_bytes(),
        )
        .expect("issued");
        let pem = reply["status"]["certificate"]
            .as_str()
            .expect("a certificate");
        let der = rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .expect("one")
            .expect("PEM");
        let user = relaymesh_apiserver::user_of(&der).expect("a user");
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["viewers".to_string()]);
    }

    #[test]
    fn refuses_unknown_groups_and_bad_requests() {
        let authority = pki::create_api_authority().expect("a CA");
        for (body, field) in [
            (request("alice", "system:masters"), "spec.group"),
            (request("Alice", "viewers"), "metadata.name"),
            (
                json!({"metadata": {"name": "a"}, "spec": {"group": "viewers", "request": "x"}}),
                "spec.request",
            ),
        ] {
            match issue(&authority, body.to_string().as_bytes()) {
                Err(ApiError::Invalid { field: got, .. }) => assert_eq!(got, field),
                other => panic!("expected Invalid {field}, got {other:?}"),
            }
        }
    }
}
