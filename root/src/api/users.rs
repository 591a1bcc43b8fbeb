//! The `UserCertificate` object: an admin asks the API CA to sign a user's
//! certificate request for one group, and gets the certificate back.
//!
//! A client POSTs `{"apiVersion":"relaymesh.dev/v1alpha1","kind":
//! "UserCertificate","metadata":{"name":"alice"},"spec":{"group":"viewers",
//! "request":"<PEM certificate request>","expirationSeconds":2592000}}` and
//! receives the object with `status.certificate` and `status.ca` (PEM). The
//! key stays wherever the request was made (`relayctl user create`).
//!
//! `GET .../usercertificates` lists the users the root issued to or revoked
//! (`UserCertificateList`, no certificates); `DELETE
//! .../usercertificates/NAME` revokes a user: the API refuses every
//! certificate naming it from then on (`401`), and the name is not issued
//! again.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::nodes::{check_type_meta, invalid, rfc3339, API_VERSION};
use super::ApiError;
use relaymesh_node::pki::{self, ApiAuthority};
use relaymesh_node::store::UserRecord;

/// The kind of a user certificate request.
const KIND: &str = "UserCertificate";

/// How long a user certificate lasts unless the request says otherwise.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Checks a `UserCertificate` request and signs it with `authority`; the
/// reply names `ca_pem` as the CAs to trust. Returns the reply and the
/// user to record. A name `revoked` says was revoked is refused: a new
/// certificate must not pass for the revoked user's.
pub(super) fn issue(
    authority: &ApiAuthority,
    ca_pem: &str,
    body: &[u8],
    revoked: impl Fn(&str) -> Option<u64>,
) -> Result<(Value, UserRecord), ApiError> {
    let mut object: Map<String, Value> = serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!("cannot decode the {KIND} object: {error}"))
    })?;
    check_type_meta(&object, KIND)?;
    super::schemas::refuse_unknown_fields(
        KIND,
        &super::schemas::user_certificate_request(),
        &object,
    )?;
    let name = object
        .get("metadata")
        .and_then(|metadata| metadata.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("metadata.name", "Required value"))?
        .to_string();
    relaymesh_protocol::name::validate(&name)
        .map_err(|error| invalid("metadata.name", format!("Invalid value: {name:?}: {error}")))?;
    if let Some(revoked_unix) = revoked(&name) {
        return Err(invalid(
            "metadata.name",
            format!(
                "Invalid value: {name:?}: the user was revoked at {}; a revoked name is not issued again, choose another",
                rfc3339(revoked_unix.saturating_mul(1000))
            ),
        ));
    }
    let spec = object
        .get("spec")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("spec", "Required value"))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("spec.group", "Required value"))?;
    super::policy::check_group(group).map_err(|message| invalid("spec.group", message))?;
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
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |at| u64::try_from(at.as_millis()).unwrap_or(u64::MAX));
    let expires_ms = now_ms.saturating_add(u64::try_from(validity.as_millis()).unwrap_or(u64::MAX));
    let record = UserRecord {
        name: name.clone(),
        groups: vec![group.clone()],
        issued_unix: now_ms / 1000,
        not_after_unix: expires_ms / 1000,
        revoked_unix: None,
    };
    tracing::info!(user = %name, %group, ?validity, "issued a user certificate");
    object.insert("apiVersion".into(), json!(API_VERSION));
    object.insert("kind".into(), json!(KIND));
    object.insert(
        "status".into(),
        json!({
            "certificate": pki::der_to_pem(&certificate, "CERTIFICATE"),
            "ca": ca_pem,
            "expirationTimestamp": rfc3339(expires_ms),
        }),
    );
    Ok((Value::Object(object), record))
}

/// What a revoked user is told, with the `401`.
pub(super) fn revoked_message(name: &str, revoked_unix: u64) -> String {
    format!(
        "user {name:?} was revoked by an admin at {}: its client certificates are no longer accepted",
        rfc3339(revoked_unix.saturating_mul(1000))
    )
}

/// One user as a `UserCertificate` object without a certificate: its
/// groups, its newest certificate's expiry, and `status.state` (`Valid`,
/// `Expired` or `Revoked`).
pub(super) fn user_object(record: &UserRecord) -> Value {
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| now.as_secs());
    user_object_at(record, now_unix)
}

fn user_object_at(record: &UserRecord, now_unix: u64) -> Value {
    let state = if record.revoked_unix.is_some() {
        "Revoked"
    } else if record.not_after_unix <= now_unix {
        "Expired"
    } else {
        "Valid"
    };
    let mut status = json!({"state": state});
    if record.not_after_unix > 0 {
        status["expirationTimestamp"] = json!(rfc3339(record.not_after_unix.saturating_mul(1000)));
    }
    if let Some(revoked_unix) = record.revoked_unix {
        status["revokedAt"] = json!(rfc3339(revoked_unix.saturating_mul(1000)));
    }
    let mut metadata = json!({"name": record.name});
    if record.issued_unix > 0 {
        metadata["creationTimestamp"] = json!(rfc3339(record.issued_unix.saturating_mul(1000)));
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {"groups": record.groups},
        "status": status,
    })
}

/// Every user as a `UserCertificateList`.
pub(super) fn user_list(records: &[UserRecord]) -> Value {
    let items: Vec<Value> = records.iter().map(user_object).collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "UserCertificateList",
        "metadata": {},
        "items": items,
    })
}

/// The DER of a PEM `CERTIFICATE REQUEST`.
fn csr_from_pem(text: &str) -> Result<Vec<u8>, ApiError> {
    let mut reader = std::io::BufReader::new(text.as_bytes());
    match rustls_pemfile::read_one(&mut reader) {
        Ok(Some(rustls_pemfile::Item::Csr(der))) => Ok(der.to_vec()),
        _ => Err(invalid("spec.request", "must be a PEM CERTIFICATE REQUEST")),
    }
}

/// The API CA that signs user certificates now, and the CAs a new
/// kubeconfig trusts: both the old and the new one while the root rotates
/// its API CA (`relayctl rotate api-ca`), so the kubeconfig keeps working
/// when the API switches its serving certificate to the new one.
#[derive(Clone)]
pub struct ApiAuthorities(std::sync::Arc<std::sync::RwLock<Authorities>>);

struct Authorities {
    signing: ApiAuthority,
    trusted_pem: String,
}

impl ApiAuthorities {
    /// `signing` signs; kubeconfigs trust `trusted_der` (CA certificates).
    pub fn new(signing: ApiAuthority, trusted_der: &[Vec<u8>]) -> Self {
        Self(std::sync::Arc::new(std::sync::RwLock::new(Authorities {
            signing,
            trusted_pem: pem_bundle(trusted_der),
        })))
    }

    /// From the next request on, `signing` signs and kubeconfigs trust
    /// `trusted_der`.
    pub fn set(&self, signing: ApiAuthority, trusted_der: &[Vec<u8>]) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Authorities {
            signing,
            trusted_pem: pem_bundle(trusted_der),
        };
    }

    /// The CA that signs user certificates now.
    pub fn signing(&self) -> ApiAuthority {
        self.read().signing.clone()
    }

    /// What a kubeconfig's `certificate-authority-data` holds now (PEM).
    pub fn trusted_pem(&self) -> String {
        self.read().trusted_pem.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Authorities> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// CA certificates as one PEM text, as kubeconfigs hold a bundle.
fn pem_bundle(cas_der: &[Vec<u8>]) -> String {
    cas_der
        .iter()
        .map(|der| pki::der_to_pem(der, "CERTIFICATE"))
        .collect()
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
        let ca_pem = pki::authority_pem(&authority);
        let (reply, record) = issue(
            &authority,
            &ca_pem,
            request("alice", "viewers").to_string().as_bytes(),
            |_| None,
        )
        .expect("issued");
        assert_eq!(record.name, "alice");
        assert_eq!(record.groups, ["viewers"]);
        assert!(record.not_after_unix > record.issued_unix);
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
    fn a_revoked_name_is_not_issued_again() {
        let authority = pki::create_api_authority().expect("a CA");
        let body = request("alice", "viewers").to_string();
        match issue(&authority, "", body.as_bytes(), |name| {
            (name == "alice").then_some(1_000)
        }) {
            Err(ApiError::Invalid { field, message }) => {
                assert_eq!(field, "metadata.name");
                assert!(message.contains("revoked"), "{message}");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_user_says_whether_it_is_valid_expired_or_revoked() {
        let mut record = UserRecord {
            name: "alice".into(),
            groups: vec!["viewers".into()],
            issued_unix: 1_000,
            not_after_unix: 2_000,
            revoked_unix: None,
        };
        assert_eq!(user_object_at(&record, 1_500)["status"]["state"], "Valid");
        assert_eq!(user_object_at(&record, 2_000)["status"]["state"], "Expired");
        record.revoked_unix = Some(1_200);
        let object = user_object_at(&record, 1_500);
        assert_eq!(object["status"]["state"], "Revoked");
        assert_eq!(object["status"]["revokedAt"], "1970-01-01T00:20:00Z");
        assert_eq!(object["spec"]["groups"], json!(["viewers"]));
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
            match issue(&authority, "", body.to_string().as_bytes(), |_| None) {
                Err(ApiError::Invalid { field: got, .. }) => assert_eq!(got, field),
                other => panic!("expected Invalid {field}, got {other:?}"),
            }
        }
    }
}
