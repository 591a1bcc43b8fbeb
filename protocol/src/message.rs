//! Every message that crosses a link.
//!
//! The child dials and opens every stream. Its first frame on a stream is an
//! [`Open`] naming the stream's purpose:
//!
//! * the **control** stream (one per connection): [`Hello`] then a stream of
//!   [`UpMessage`]s, answered by a stream of [`DownMessage`]s that starts with
//!   [`DownMessage::Welcome`] (or [`DownMessage::Refused`]);
//! * a **bundle** fetch: [`BundleRequest`], answered by one [`BundleReply`]
//!   frame and, if found, the bundle's raw bytes until the stream ends;
//! * a **join**, the only stream allowed on a connection without a client
//!   certificate: [`JoinRequest`], answered by one [`JoinReply`];
//! * a **renewal** of the node's certificate: [`RenewRequest`], answered by
//!   one [`RenewReply`].

use serde::{Deserialize, Serialize};

use crate::query::{Answer, Query};
use crate::{BundleId, InventoryUpdate, Refusal, Role, SliceChange, SliceEntry, StatusUpdate};

/// The first frame of every stream a child opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Open {
    /// Opens the control stream.
    Control(Hello),
    /// Asks for one bundle.
    Bundle(BundleRequest),
    /// Asks to join the mesh with a token.
    Join(JoinRequest),
    /// Asks the parent to sign the node's TLS key again, before its
    /// certificate expires.
    Renew(RenewRequest),
}

/// A child's greeting on the control stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The oldest protocol version the child speaks.
    pub min_version: u16,
    /// The newest protocol version the child speaks.
    pub max_version: u16,
    /// Where the child's copy of the parent's slice stands, if it has one.
    pub resume: Option<Resume>,
}

/// A point in a parent's slice history that a child has durably applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// The parent's epoch: a random number chosen when the parent's store was
    /// created, so revisions of a wiped and re-created parent never match.
    pub epoch: u64,
    /// The newest revision the child applied and acknowledged.
    pub revision: u64,
}

/// The parent's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version both sides now speak.
    pub version: u16,
    /// The parent's name.
    pub parent: String,
    /// The parent's epoch (see [`Resume::epoch`]).
    pub epoch: u64,
    /// The names from the root down to the parent, root first, so a relay
    /// knows which slice entries that name an ancestor concern it.
    pub ancestors: Vec<String>,
}

/// What a child sends its parent on the control stream after [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpMessage {
    /// Everything up to `revision` is durable at the child.
    Ack {
        /// The parent's revision the child has durably applied.
        revision: u64,
    },
    /// A change of the child's subtree inventory.
    Inventory(InventoryUpdate),
    /// A keep-alive the parent answers with [`DownMessage::Pong`].
    Ping {
        /// Echoed back.
        nonce: u64,
    },
    /// A change of the placement status of the child's subtree.
    Status(StatusUpdate),
    /// The answer to the parent's [`DownMessage::Query`] with the same id.
    Answer {
        /// The query's id, as the parent numbered it.
        id: u64,
        /// The answer.
        answer: Answer,
    },
    /// The child leaves this parent for `to` on the root's order (a
    /// [`crate::Move`]): the parent forgets it, its subtree and its status
    /// at once and closes the link.
    Leaving {
        /// The relay the child moves to.
        to: String,
    },
}

/// What a parent sends a child on the control stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DownMessage {
    /// The answer to [`Hello`]: always the first message.
    Welcome(Welcome),
    /// Changes from `base` (exclusive) to `revision` (inclusive). The child
    /// applies them only if `base` is where it stands.
    Delta {
        /// The revision the changes start after.
        base: u64,
        /// The revision reached once applied.
        revision: u64,
        /// The changes, in order.
        changes: Vec<SliceChange>,
    },
    /// A piece of the whole slice at `revision`, which replaces the child's
    /// copy once the piece with `last` set has arrived.
    Snapshot {
        /// The revision the snapshot shows.
        revision: u64,
        /// Entries of this piece.
        entries: Vec<SliceEntry>,
        /// This is the first piece.
        first: bool,
        /// This is the last piece.
        last: bool,
    },
    /// The answer to [`UpMessage::Ping`].
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// The parent ends the link for this reason.
    Refused(Refusal),
    /// A question about `node`, which lies in the child's subtree (or is the
    /// child), to be answered with an [`UpMessage::Answer`] of the same id.
    Query {
        /// Chosen by the parent; unique among its queries in flight.
        id: u64,
        /// The node asked about.
        node: String,
        /// What is asked.
        query: Query,
    },
    /// The names from the root down to the parent changed while the link
    /// stayed up (a relay above moved with its subtree): the same list as
    /// [`Welcome::ancestors`], which the child passes on to its own
    /// children.
    Ancestors(Vec<String>),
}

/// Asks the parent for one bundle by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRequest {
    /// The bundle wanted.
    pub id: BundleId,
}

/// The parent's answer to [`BundleRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BundleReply {
    /// The bundle follows as `len` raw bytes.
    Found {
        /// The bundle's id.
        id: BundleId,
        /// How many bytes follow.
        len: u64,
    },
    /// The parent does not hold the bundle (any more).
    Missing {
        /// The bundle's id.
        id: BundleId,
    },
    /// The request was refused.
    Refused(Refusal),
}

/// A joining node's request for a certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    /// A protocol version the joining node speaks: its oldest
    /// ([`crate::MIN_PROTOCOL_VERSION`]), which a parent one release behind
    /// speaks too. The join's own messages are those of that version; the
    /// link's version is chosen later, in the `Hello`.
    pub version: u16,
    /// The join token, as printed by `relayctl token create`.
    pub token: String,
    /// The name the node asks for; it must be the token's.
    pub name: String,
    /// The role the node asks for; it must be the token's.
    pub role: Role,
    /// A PKCS#10 request (DER) for the node's TLS certificate, signed with the
    /// node's own key, which never leaves the node.
    pub tls_csr_der: Vec<u8>,
    /// For a relay: a PKCS#10 request (DER) for the relay's issuing CA, with
    /// which it admits its own children.
    pub issuer_csr_der: Option<Vec<u8>>,
}

/// The parent's answer to [`JoinRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JoinReply {
    /// The node is admitted.
    Accepted(JoinGrant),
    /// The node is refused.
    Refused(Refusal),
}

/// What an admitted node receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinGrant {
    /// The mesh CA's certificate (DER), the trust anchor of every link.
    pub ca_cert_der: Vec<u8>,
    /// The node's TLS certificate (DER) followed by the issuing chain up to,
    /// not including, the mesh CA.
    pub tls_chain_der: Vec<Vec<u8>>,
    /// For a relay: its issuing CA certificate followed by the chain up to,
    /// not including, the mesh CA.
    pub issuer_chain_der: Option<Vec<Vec<u8>>>,
    /// The public key that verifies join tokens (Ed25519), so the node can
    /// admit children with tokens the root signs.
    pub token_key: Vec<u8>,
    /// The parent's name.
    pub parent: String,
}

/// A node's request for a new TLS certificate for the key it already has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewRequest {
    /// A PKCS#10 request (DER) signed with the node's current TLS key; the
    /// name and role come from the certificate the connection presented.
    pub tls_csr_der: Vec<u8>,
    /// For a relay that re-parented to a candidate parent: a request for
    /// the issuer key it has, which the new parent signs too, so that the
    /// relay's subtree chains through its new place (the certificates the
    /// relay issued stay valid: the key is the same).
    pub issuer_csr_der: Option<Vec<u8>>,
}

/// The parent's answer to [`RenewRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RenewReply {
    /// The new certificate (DER) followed by the issuing chain up to, not
    /// including, the mesh CA.
    Renewed {
        /// The chain, leaf first.
        tls_chain_der: Vec<Vec<u8>>,
        /// The relay's issuer certificate followed by the same chain above
        /// it, when the request asked for it.
        issuer_chain_der: Option<Vec<Vec<u8>>>,
        /// While the parent's issuer key rotates: its new issuer
        /// certificate signed by its old key, which vouches for the new
        /// key that signed `tls_chain_der` to a child the old one signed.
        successor_der: Option<Vec<u8>>,
    },
    /// The request was refused.
    Refused(Refusal),
}
