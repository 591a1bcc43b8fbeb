//! The client of the root's API that `relayctl` uses.
//!
//! A thin layer over reqwest: it makes the TLS configuration from
//! [`ClientCredentials`] (a kubeconfig's), calls the endpoints of
//! [`crate::api`], and turns `metav1.Status` replies into
//! [`ClientError::Api`], printed as kubectl prints them. [`tree`] shapes the
//! `Relay` and `Agent` objects into the tree `relayctl tree` shows.

use std::time::{Duration, UNIX_EPOCH};

use relaymesh_protocol::{BundleId, Role};
use serde_json::Value;

use crate::api::IssuedToken;
use crate::kubeconfig::ClientCredentials;

pub use error::ClientError;

pub mod cluster;
mod connect;
mod error;
pub mod manifests;
mod request;
pub mod resources;
pub mod rollout;
pub mod settle;
pub mod status;
pub mod tree;
pub mod watch;

/// How long a small request (not a bundle upload) may take in all.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The path of relaymesh's API group and version.
const GROUP_PATH: &str = "/apis/relaymesh.dev/v1alpha1";

/// A connection to the root's API.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    server: String,
}

impl Client {
    /// A client for the server and with the certificates of `credentials`.
    pub fn new(credentials: &ClientCredentials) -> Result<Client, ClientError> {
        let server = connect::server_url(credentials)?;
        let http = connect::http_client(credentials)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
