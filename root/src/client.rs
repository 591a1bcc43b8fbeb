//! The client of the root's API that `relayctl` uses.
//!
//! A thin layer over reqwest: it makes the TLS configuration from
//! [`ClientCredentials`] (a kubeconfig's), calls the endpoints of
//! [`crate::api`], and turns `metav1.Status` replies into
//! [`ClientError::Api`], printed as kubectl prints them. [`tree`] shapes the
//! `Relay` and `Agent` objects into the tree `relayctl tree` shows.

use std::io::BufReader;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use relaymesh_protocol::{BundleId, Role};
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore};
use serde::Deserialize;
use serde_json::Value;

use crate::api::IssuedToken;
use crate::kubeconfig::ClientCredentials;

pub mod cluster;
pub mod manifests;
pub mod resources;
pub mod rollout;
pub mod settle;
pub mod status;
pub mod tree;
pub mod watch;

/// How long to wait for a TCP and TLS connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a small request (not a bundle upload) may take in all.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The path of relaymesh's API group and version.
const GROUP_PATH: &str = "/apis/relaymesh.dev/v1alpha1";

/// How many objects relayctl asks for per page of a list, as kubectl does
/// (the root refuses a list without `limit` past 10,000 objects).
const PAGE_SIZE: usize = 500;

/// A connection to the root's API.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    server: String,
}

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

impl Client {
    /// A client for the server and with the certificates of `credentials`.
    pub fn new(credentials: &ClientCredentials) -> Result<Client, ClientError> {
        let server = credentials.server.trim_end_matches('/').to_string();
        if !server.starts_with("https://") {
            return Err(ClientError::Credentials(format!(
                "the server URL {server:?} is not https://"
            )));
        }
        let mut tls = tls_config(credentials)?;
        // reqwest keeps a preconfigured config's ALPN as it is.
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(ClientError::Build)?;
        Ok(Client { http, server })
    }

    /// The server's `/version` (`version.Info`).
    pub async fn version(&self) -> Result<Value, ClientError> {
        self.get_json("/version").await
    }

    /// Every `Relay` object.
    pub async fn relays(&self) -> Result<Vec<Value>, ClientError> {
        self.list("relays").await
    }

    /// Every `Agent` object.
    pub async fn agents(&self) -> Result<Vec<Value>, ClientError> {
        self.list("agents").await
    }

    /// How each child of relay `relay` is doing with placement
    /// `namespace/name`, as that relay says (a `PlacementSubtree`).
    pub async fn subtree(
        &self,
        relay: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ClientError> {
        self.get_json(&format!(
            "/apis/relaymesh.dev/v1alpha1/relays/{relay}/placements/{namespace}/{name}"
        ))
        .await
    }

    /// The `Link` of node `name` (an agent, else a relay): its link to its
    /// parent as the parent measured it, asked down the tree.
    pub async fn link(&self, name: &str) -> Result<Value, ClientError> {
        let path = |plural| format!("/apis/relaymesh.dev/v1alpha1/{plural}/{name}/link");
        match self.get_json(&path("agents")).await {
            Err(ClientError::Api { code: 404, .. }) => {}
            other => return other,
        }
        self.get_json(&path("relays"))
            .await
            .map_err(|error| match error {
                ClientError::Api { code: 404, .. } => ClientError::Api {
                    code: 404,
                    reason: "NotFound".into(),
                    message: format!("no agent or relay {name:?} with a link (the root has none)"),
                },
                other => other,
            })
    }

    /// Asks the root for a join token for a node `name` with `role`, to join
    /// under the first of `parents` if any (the others are candidate
    /// parents), valid for `ttl`.
    pub async fn create_token(
        &self,
        name: &str,
        role: Role,
        parents: &[String],
        ttl: Duration,
    ) -> Result<IssuedToken, ClientError> {
        let mut spec = serde_json::json!({
            "name": name,
            "role": role.as_str(),
            "ttl": humantime::format_duration(ttl).to_string(),
        });
        if let Some((parent, candidates)) = parents.split_first() {
            spec["parent"] = Value::from(parent.as_str());
            if !candidates.is_empty() {
                spec["candidates"] = Value::from(candidates.to_vec());
            }
        }
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "JoinToken",
            "spec": spec,
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/jointokens")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        let reply: Value = self.send_json(request).await?;
        let status = &reply["status"];
        let token = status["token"]
            .as_str()
            .ok_or_else(|| ClientError::Decode("the JoinToken has no status.token".into()))?;
        let expiration = status["expirationTimestamp"].as_str().unwrap_or_default();
        let expires_unix = humantime::parse_rfc3339(expiration)
            .ok()
            .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
            .ok_or_else(|| {
                ClientError::Decode(format!(
                    "the JoinToken's status.expirationTimestamp {expiration:?} is not RFC 3339"
                ))
            })?
            .as_secs();
        Ok(IssuedToken {
            token: token.to_string(),
            expires_unix,
            // The reply names no candidates; the token carries them.
            candidates: Vec::new(),
        })
    }

    /// Has the API CA sign `csr_pem` as user `name` in `group`, valid for
    /// `valid_for`; returns the certificate and the API CA (both PEM).
    pub async fn create_user_certificate(
        &self,
        name: &str,
        group: &str,
        csr_pem: &str,
        valid_for: Duration,
    ) -> Result<(String, String), ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "UserCertificate",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "request": csr_pem,
                "expirationSeconds": valid_for.as_secs(),
            },
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/usercertificates")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        let reply: Value = self.send_json(request).await?;
        let field = |key: &str| {
            reply["status"][key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| {
                    ClientError::Decode(format!("the UserCertificate has no status.{key}"))
                })
        };
        Ok((field("certificate")?, field("ca")?))
    }

    /// Every user the root issued a certificate to or revoked
    /// (`UserCertificate` objects, without certificates).
    pub async fn users(&self) -> Result<Vec<Value>, ClientError> {
        self.list("usercertificates").await
    }

    /// Revokes user `name`: the API refuses its certificates from now on.
    /// Returns the user's `UserCertificate` object.
    pub async fn revoke_user(&self, name: &str) -> Result<Value, ClientError> {
        let request = self
            .http
            .delete(self.url(&format!("{GROUP_PATH}/usercertificates/{name}")))
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Uploads `bytes` as the bundle `name`; returns its id and size.
    pub async fn push_bundle(
        &self,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<(BundleId, u64), ClientError> {
        let request = self
            .http
            .post(self.url("/relaymesh/v1alpha1/bundles"))
            .query(&[("name", name)])
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes);
        let reply: Value = self.send_json(request).await?;
        let id = reply["id"]
            .as_str()
            .and_then(|id| id.parse::<BundleId>().ok())
            .ok_or_else(|| {
                ClientError::Decode(format!("the bundle reply has no valid id: {reply}"))
            })?;
        let size = reply["size"]
            .as_u64()
            .ok_or_else(|| ClientError::Decode(format!("the bundle reply has no size: {reply}")))?;
        Ok((id, size))
    }

    /// Every join token the root issued and remembers (`JoinToken`
    /// objects, without the tokens' text).
    pub async fn tokens(&self) -> Result<Vec<Value>, ClientError> {
        self.list("jointokens").await
    }

    /// Revokes the join token with `id` (32 hex digits, as `tokens` names
    /// them); returns the token's `JoinToken` object.
    pub async fn revoke_token(&self, id: &str) -> Result<Value, ClientError> {
        let request = self
            .http
            .delete(self.url(&format!("{GROUP_PATH}/jointokens/{id}")))
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Revokes node `name`; returns the `Revocation` object, whose status
    /// lists the tokens revoked with it and the nodes that left the tree.
    pub async fn revoke_node(&self, name: &str) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "Revocation",
            "spec": {"node": name},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/revocations")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// The API's serving certificate: the `APICertificateRotation` object.
    pub async fn api_cert_rotation(&self) -> Result<Value, ClientError> {
        let request = self
            .http
            .get(self.url(&format!("{GROUP_PATH}/apicertificaterotations")))
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Has the root serve its API with a new certificate; returns the
    /// `APICertificateRotation` object.
    pub async fn rotate_api_cert(&self) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "APICertificateRotation",
            "spec": {},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/apicertificaterotations")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Where the API CA stands: the `APICARotation` object.
    pub async fn api_ca_rotation(&self) -> Result<Value, ClientError> {
        let request = self
            .http
            .get(self.url(&format!("{GROUP_PATH}/apicarotations")))
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Takes a step of a rotation of the API CA (`"Start"` or `"Finish"`);
    /// returns the `APICARotation` object.
    pub async fn rotate_api_ca(&self, step: &str) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "APICARotation",
            "spec": {"step": step},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/apicarotations")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Where a rotation stands: `resource` is `meshcarotations` (the
    /// `MeshCARotation` object) or `tokenkeyrotations`
    /// (`TokenKeyRotation`).
    pub async fn trust_rotation(&self, resource: &str) -> Result<Value, ClientError> {
        let request = self
            .http
            .get(self.url(&format!("{GROUP_PATH}/{resource}")))
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Takes a step (`"Start"` or `"Finish"`) of the rotation `kind`
    /// (`MeshCARotation` or `TokenKeyRotation`) at `resource`; returns the
    /// object.
    pub async fn rotate_trust(
        &self,
        resource: &str,
        kind: &str,
        step: &str,
        force: bool,
    ) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": kind,
            "spec": {"step": step, "force": force},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/{resource}")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Moves agent `node` under relay `to`, with a join token valid for
    /// `ttl`; returns the `Move` object.
    pub async fn move_node(
        &self,
        node: &str,
        to: &str,
        ttl: Duration,
    ) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "Move",
            "spec": {"node": node, "to": to, "ttlSeconds": ttl.as_secs().max(1)},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/moves")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Sets and removes labels (`field` "set") or annotations (`field`
    /// "annotations") of cluster `cluster` at the root, with a
    /// `ClusterLabels` object; returns the object the root answers.
    pub async fn change_cluster(
        &self,
        cluster: &str,
        field: &str,
        set: &std::collections::BTreeMap<String, String>,
        remove: &[String],
    ) -> Result<Value, ClientError> {
        let spec = if field == "annotations" {
            serde_json::json!({"cluster": cluster, "annotations": {"set": set, "remove": remove}})
        } else {
            serde_json::json!({"cluster": cluster, "set": set, "remove": remove})
        };
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "ClusterLabels",
            "spec": spec,
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/clusterlabels")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Every `Cluster` object.
    pub async fn clusters(&self) -> Result<Vec<Value>, ClientError> {
        self.list("clusters").await
    }

    /// Cordons (`Cordoned`), drains (`Draining`) or uncordons
    /// (`Schedulable`) cluster `cluster`; returns the `Cordon` object.
    pub async fn cordon(&self, cluster: &str, state: &str) -> Result<Value, ClientError> {
        let body = serde_json::json!({
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "Cordon",
            "spec": {"cluster": cluster, "state": state},
        });
        let request = self
            .http
            .post(self.url(&format!("{GROUP_PATH}/cordons")))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send_json(request).await
    }

    /// Every move the root holds (`Move` objects).
    pub async fn moves(&self) -> Result<Vec<Value>, ClientError> {
        self.list("moves").await
    }

    /// Every revocation the root holds (`Revocation` objects).
    pub async fn revocations(&self) -> Result<Vec<Value>, ClientError> {
        self.list("revocations").await
    }

    async fn list(&self, resource: &str) -> Result<Vec<Value>, ClientError> {
        let mut list = self
            .get_pages(&format!("{GROUP_PATH}/{resource}"), None)
            .await?;
        match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => Ok(items),
            Some(Value::Null) | None => Ok(Vec::new()),
            Some(_) => Err(ClientError::Decode(format!(
                "the {resource} list's items are not a list"
            ))),
        }
    }

    /// Every page of the List (or, with a Table `accept`, the Table) at
    /// `path`, asked for [`PAGE_SIZE`] objects at a time and joined into the
    /// first page: the `items` (or `rows`) of the later ones appended, and
    /// no `continue` left.
    pub(crate) async fn get_pages(
        &self,
        path: &str,
        accept: Option<&'static str>,
    ) -> Result<Value, ClientError> {
        let mut joined: Option<Value> = None;
        let mut next: Option<String> = None;
        loop {
            let mut query = vec![("limit", PAGE_SIZE.to_string())];
            if let Some(token) = next.take() {
                query.push(("continue", token));
            }
            let mut request = self
                .http
                .get(self.url(path))
                .query(&query)
                .timeout(REQUEST_TIMEOUT);
            if let Some(accept) = accept {
                request = request.header("Accept", accept);
            }
            let mut page = self.send_json(request).await?;
            next = page["metadata"]["continue"]
                .as_str()
                .filter(|token| !token.is_empty())
                .map(str::to_string);
            let key = if page.get("rows").is_some() {
                "rows"
            } else {
                "items"
            };
            match joined.as_mut() {
                None => joined = Some(page),
                Some(first) => {
                    let more = match page.get_mut(key).map(Value::take) {
                        Some(Value::Array(more)) => more,
                        _ => Vec::new(),
                    };
                    if let Some(Value::Array(items)) = first.get_mut(key) {
                        items.extend(more);
                    }
                }
            }
            if next.is_none() {
                break;
            }
        }
        let mut joined = joined.unwrap_or(Value::Null);
        if let Some(Value::Object(metadata)) = joined.get_mut("metadata") {
            metadata.remove("continue");
        }
        Ok(joined)
    }

    async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        let request = self.http.get(self.url(path)).timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server)
    }

    /// Sends `request` and decodes a JSON reply, or the error it carries.
    async fn send_json(&self, request: reqwest::RequestBuilder) -> Result<Value, ClientError> {
        let response = request
            .send()
            .await
            .map_err(|source| ClientError::Unreachable {
                server: self.server.clone(),
                detail: innermost_cause(&source),
                source,
            })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|source| ClientError::Unreachable {
                server: self.server.clone(),
                detail: innermost_cause(&source),
                source,
            })?;
        if status.is_success() {
            return serde_json::from_slice(&body)
                .map_err(|error| ClientError::Decode(format!("the reply is not JSON: {error}")));
        }
        let code = status.as_u16();
        match serde_json::from_slice::<StatusReply>(&body) {
            Ok(reply) if reply.kind == "Status" => Err(ClientError::Api {
                code,
                reason: reply.reason,
                message: reply.message,
            }),
            _ => Err(ClientError::Api {
                code,
                reason: status
                    .canonical_reason()
                    .unwrap_or("Unknown")
                    .replace(' ', ""),
                message: String::from_utf8_lossy(&body).chars().take(200).collect(),
            }),
        }
    }
}

/// The rustls configuration for `credentials`: ring, the given CA (or no
/// verification at all if asked), and the client certificate if there is one.
fn tls_config(credentials: &ClientCredentials) -> Result<ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ClientError::Tls)?;
    let builder = if credentials.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipServerVerification { provider }))
    } else {
        let ca_pem = credentials.ca_pem.as_deref().ok_or_else(|| {
            ClientError::Credentials(format!(
                "no certificate-authority is given for {}, and relayctl uses no system roots",
                credentials.server
            ))
        })?;
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca_pem, "CA certificate")? {
            roots.add(cert).map_err(ClientError::Tls)?;
        }
        builder.with_root_certificates(roots)
    };
    match (&credentials.cert_pem, &credentials.key_pem) {
        (Some(cert_pem), Some(key_pem)) => {
            let chain = certificates(cert_pem, "client certificate")?;
            let key = rustls_pemfile::private_key(&mut BufReader::new(key_pem.as_bytes()))
                .map_err(|source| ClientError::Pem {
                    what: "client key",
                    source,
                })?
                .ok_or_else(|| {
                    ClientError::Credentials("the client key PEM holds no private key".into())
                })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(ClientError::Tls)
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(ClientError::Credentials(
            "a client certificate needs its key, and a key its certificate".into(),
        )),
    }
}

fn certificates(
    pem: &str,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = rustls_pemfile::certs(&mut BufReader::new(pem.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ClientError::Pem { what, source })?;
    if certs.is_empty() {
        return Err(ClientError::Credentials(format!(
            "the {what} PEM holds no certificate"
        )));
    }
    Ok(certs)
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

/// kubectl's `insecure-skip-tls-verify`: any server certificate is accepted,
/// but the handshake signatures are still checked.
#[derive(Debug)]
struct SkipServerVerification {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for SkipServerVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    relaymesh_node::verify_handshake_signatures!();
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

    #[test]
    fn refuses_unusable_credentials() {
        let mut credentials = ClientCredentials {
            server: "http://root:6443".into(),
            insecure_skip_tls_verify: true,
            ..ClientCredentials::default()
        };
        assert!(matches!(
            Client::new(&credentials),
            Err(ClientError::Credentials(_))
        ));
        credentials.server = "https://root:6443".into();
        assert!(Client::new(&credentials).is_ok());
        credentials.insecure_skip_tls_verify = false;
        assert!(matches!(
            Client::new(&credentials),
            Err(ClientError::Credentials(_))
        ));
        credentials.ca_pem = Some("not PEM".into());
        assert!(matches!(
            Client::new(&credentials),
            Err(ClientError::Credentials(_))
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn innermost_cause_prefers_the_io_kind() {
        let io = std::io::Error::from_raw_os_error(111);
        let cause = innermost_cause(&io);
        assert_eq!(cause, std::io::ErrorKind::ConnectionRefused.to_string());
    }
}
