//! The joining side of `relay join` / `edge-agent join`: check the token's
//! signature with the token key it names (an altered token is refused
//! before anything is dialed), make keys, dial the parent it names with the
//! CA and the parent's issuer key pinned, and turn the grant into an
//! identity. The private keys never leave this function's node.

use relaymesh_protocol::message::{JoinReply, JoinRequest, Open};
use relaymesh_protocol::{Role, MIN_PROTOCOL_VERSION};

use super::uplink::{connect_nearest_of, Endpoints};
use super::{expect_frame, write_frame, LinkError};
use crate::config::ParentConfig;
use crate::identity::Identity;
use crate::pki::{self, PkiError};
use crate::token::{self, TokenError};

/// Why joining failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The token could not be read.
    #[error("join token: {0}")]
    Token(#[from] TokenError),
    /// Keys or certificates could not be made or checked.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The parent could not be reached, or the link failed.
    #[error("cannot reach parent {parent:?} at {addresses}: {source}")]
    Unreachable {
        /// The parent's name.
        parent: String,
        /// The addresses tried.
        addresses: String,
        /// What failed.
        #[source]
        source: LinkError,
    },
    /// The parent refused the join.
    #[error("parent {parent:?} refused the join: {refusal}")]
    Refused {
        /// The parent's name.
        parent: String,
        /// Its reason.
        refusal: relaymesh_protocol::Refusal,
    },
}

/// A node that has joined: its identity and the parent to dial from now on.
#[derive(Debug)]
pub struct Joined {
    /// The node's new identity.
    pub identity: Identity,
    /// Its parent.
    pub parent: ParentConfig,
    /// Every relay the token let it join (the parent among them), when it
    /// named more than one: the node fails over among them (see
    /// [`relaymesh_protocol::parents`]).
    pub candidates: Vec<relaymesh_protocol::CandidateParent>,
    /// The id of the token it joined with, which it reports in its own
    /// inventory record (see [`crate::store::with_join_token_label`]).
    pub token_id: [u8; 16],
}

/// Joins the mesh as `name` with `role`, using `token`.
pub async fn join(token: &str, name: &str, role: Role) -> Result<Joined, JoinError> {
    join_from(token, name, role, &mut Endpoints::default()).await
}

/// [`join`], dialing from `endpoints` (the testbed's hollow agents share one).
pub async fn join_from(
    token: &str,
    name: &str,
    role: Role,
    endpoints: &mut Endpoints,
) -> Result<Joined, JoinError> {
    join_with(
        token,
        name,
        role,
        pki::new_node_keys(name, role)?,
        endpoints,
    )
    .await
}

/// Joins the parent a move's `token` names as the node `identity` is: a
/// relay keeps its keys, so that it moves with its subtree (the
/// certificates it issued stay valid; see [`pki::relay_keys_kept`]); an
/// agent makes new ones.
pub async fn join_moving(
    token: &str,
    identity: &Identity,
    endpoints: &mut Endpoints,
) -> Result<Joined, JoinError> {
    let keys = match identity.role {
        Role::Relay => pki::relay_keys_kept(identity)?,
        _ => pki::new_node_keys(&identity.name, identity.role)?,
    };
    join_with(token, &identity.name, identity.role, keys, endpoints).await
}

async fn join_with(
    token: &str,
    name: &str,
    role: Role,
    keys: pki::NodeKeys,
    endpoints: &mut Endpoints,
) -> Result<Joined, JoinError> {
    // Before any packet leaves: a token altered on its way (another
    // address, parent or key) no longer verifies with the key it names.
    let claims = token::verify_as_joining_node(token)?;
    // The oldest version this node speaks, not the newest: a parent one
    // release behind refuses a version it does not know, and the join's
    // messages have not changed since it (found when version 13 came).
    let request = JoinRequest {
        version: MIN_PROTOCOL_VERSION,
        token: token.to_string(),
        name: name.to_string(),
        role,
        tls_csr_der: keys.tls_csr_der.clone(),
        issuer_csr_der: keys.issuer_csr_der.clone(),
    };
    let mut left = claims.parents();
    let candidates = if left.len() > 1 {
        left.clone()
    } else {
        Vec::new()
    };
    // The nearest that admits the node: every candidate is dialed at once
    // and the first handshake decides; one that refuses is left out of the
    // next round.
    loop {
        let mut dials = Vec::new();
        for candidate in &left {
            let client = pki::quic_join_client_config(claims.ca_sha256, candidate.issuer_key)?;
            dials.push((parent_config(candidate), client));
        }
        let unreachable = |source| JoinError::Unreachable {
            parent: left
                .iter()
                .map(|candidate| candidate.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            addresses: left
                .iter()
                .flat_map(|candidate| candidate.addresses.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(", "),
            source,
        };
        let (connection, address, parent) = connect_nearest_of(&dials, endpoints)
            .await
            .map_err(unreachable)?;
        tracing::info!(parent = %parent.name, %address, rtt = ?connection.rtt(), "joining");
        let reply = exchange(&connection, request.clone())
            .await
            .map_err(|source| JoinError::Unreachable {
                parent: parent.name.clone(),
                addresses: parent.addresses.join(", "),
                source,
            })?;
        connection.close(0u32.into(), b"joined");
        match reply {
            JoinReply::Accepted(grant) => {
                // The TLS handshake already required the pinned CA in the
                // parent's chain; the grant must name that same CA.
                if pki::sha256(&grant.ca_cert_der) != claims.ca_sha256 {
                    return Err(JoinError::Pki(PkiError::GrantMismatch {
                        reason: "the granted CA is not the one the token pins".into(),
                    }));
                }
                // And the mesh's token key must be the one that signed the
                // token: a token signed again by someone else is exposed.
                if grant.token_key.as_slice() != claims.token_key.as_slice() {
                    return Err(JoinError::Pki(PkiError::GrantMismatch {
                        reason: "the granted token key is not the one that signed the token".into(),
                    }));
                }
                let identity = pki::identity_from_grant(name, role, keys, &grant)?;
                return Ok(Joined {
                    identity,
                    parent,
                    candidates,
                    token_id: claims.id,
                });
            }
            JoinReply::Refused(refusal) => {
                left.retain(|candidate| candidate.name != parent.name);
                if left.is_empty() {
                    return Err(JoinError::Refused {
                        parent: parent.name,
                        refusal,
                    });
                }
                tracing::warn!(parent = %parent.name, %refusal, "a candidate parent refused the join; trying the next nearest");
            }
        }
    }
}

/// How to dial a candidate parent.
pub fn parent_config(candidate: &relaymesh_protocol::CandidateParent) -> ParentConfig {
    ParentConfig {
        name: candidate.name.clone(),
        addresses: candidate.addresses.clone(),
    }
}

async fn exchange(
    connection: &quinn::Connection,
    request: JoinRequest,
) -> Result<JoinReply, LinkError> {
    let (mut send, mut recv) = connection.open_bi().await?;
    write_frame(&mut send, &Open::Join(request)).await?;
    let _ = send.finish();
    expect_frame(&mut recv).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A token for an agent under the root, to be dialed at `address`.
    fn token_to(address: std::net::SocketAddr) -> String {
        let root = pki::create_mesh("root", &[]).expect("mesh").identity;
        let claims = token::new_claims(
            "edge-1",
            Role::Agent,
            token::TokenParent {
                name: "root".into(),
                addresses: vec!["192.0.2.1:7443".into()],
                issuers: Vec::new(),
                issuer_key: pki::public_key_sha256(&root.ca_cert_der).expect("a key"),
            },
            pki::sha256(&root.ca_cert_der),
            Duration::from_secs(600),
            crate::daemon::unix_ms() / 1000,
        );
        let signed = token::issue(
            root.token_signing_key.as_deref().expect("the root signs"),
            &claims,
        )
        .expect("issue");
        // The claims as signed, with the address changed, and the
        // signature over the original ones.
        let mut altered = token::read_unverified(&signed).expect("read");
        altered.parent_addresses = vec![address.to_string()];
        let (_, signature) = signed.rsplit_once('.').expect("a signature");
        let bytes = relaymesh_protocol::codec::encode(&altered).expect("encode");
        use base64::Engine as _;
        format!(
            "{}{}.{signature}",
            relaymesh_protocol::token::TOKEN_PREFIX,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        )
    }

    /// Issue 29, finding 3: a token whose parent address was changed on
    /// its way is refused before a single packet is sent there.
    #[tokio::test]
    async fn an_altered_token_is_refused_before_anything_is_dialed() {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = socket.local_addr().expect("address");
        let error = join(&token_to(address), "edge-1", Role::Agent)
            .await
            .expect_err("an altered token");
        assert!(
            matches!(error, JoinError::Token(TokenError::Altered)),
            "{error}"
        );
        assert!(error.to_string().contains("altered"), "{error}");
        let mut buffer = [0u8; 1500];
        assert!(
            matches!(
                socket.try_recv_from(&mut buffer),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock
            ),
            "the altered address heard nothing"
        );
    }
}
