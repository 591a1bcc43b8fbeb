//! The joining side of `relay join` / `edge-agent join`: read the token, make
//! keys, dial the parent it names with the CA pinned, and turn the grant into
//! an identity. The private keys never leave this function's node.

use relaymesh_protocol::message::{JoinReply, JoinRequest, Open};
use relaymesh_protocol::{Role, PROTOCOL_VERSION};

use super::uplink::{connect_nearest, Endpoints};
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
    let claims = token::read_unverified(token)?;
    let parent = ParentConfig {
        name: claims.parent.clone(),
        addresses: claims.parent_addresses.clone(),
    };
    let keys = pki::new_node_keys(name, role)?;
    let request = JoinRequest {
        version: PROTOCOL_VERSION,
        token: token.to_string(),
        name: name.to_string(),
        role,
        tls_csr_der: keys.tls_csr_der.clone(),
        issuer_csr_der: keys.issuer_csr_der.clone(),
    };
    let unreachable = |source| JoinError::Unreachable {
        parent: parent.name.clone(),
        addresses: parent.addresses.join(", "),
        source,
    };
    let client = pki::quic_join_client_config(claims.ca_sha256, &claims.parent_issuers)?;
    let (connection, address) = connect_nearest(&parent, &client, endpoints)
        .await
        .map_err(unreachable)?;
    tracing::info!(parent = %parent.name, %address, "joining");
    let reply = exchange(&connection, request).await.map_err(unreachable)?;
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
            let identity = pki::identity_from_grant(name, role, keys, &grant)?;
            Ok(Joined { identity, parent })
        }
        JoinReply::Refused(refusal) => Err(JoinError::Refused {
            parent: parent.name,
            refusal,
        }),
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
