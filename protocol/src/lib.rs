//! The relaymesh wire contract: every message that crosses a link between a
//! parent relay and a child (relay or edge agent), how it is framed, and the
//! limits every decoder enforces.
//!
//! This crate does no IO and knows nothing of QUIC, sled or tokio. The
//! transport in `relaymesh-relay` reads and writes [`codec`] frames on QUIC
//! streams; everything that decides what to send lives in the relay's sans-IO
//! core.
//!
//! Start reading at [`message`]: a child opens every stream with an
//! [`message::Open`] frame that says what the stream is for (the control
//! stream, a bundle fetch, or a join), then the two sides exchange the
//! messages of that stream.
//!
//! Compatibility rules (see `docs/protocol.md`): the encoding is bincode 2,
//! which encodes an enum variant by position, so variants and struct fields are
//! only ever appended, and anything else needs a new [`PROTOCOL_VERSION`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bundle_encoding;
pub mod bundle_id;
pub mod cluster_labels;
pub mod codec;
pub mod error;
pub mod inventory;
pub mod label_set;
pub mod limits;
pub mod message;
pub mod moves;
pub mod name;
pub mod parents;
pub mod placement;
pub mod query;
pub mod revocation;
pub mod slice;
pub mod status;
pub mod token;
pub mod trust;

pub use bundle_id::BundleId;
pub use cluster_labels::ClusterLabels;
pub use error::{ErrorCode, Refusal};
pub use inventory::{InventoryUpdate, LinkStatus, NodeRecord, Role};
pub use label_set::LabelSet;
pub use moves::{Move, MoveState};
pub use parents::{CandidateParent, Parents};
pub use placement::body::PlacementBody;
pub use placement::{
    LabelRequirement, LabelSelector, PlacementTarget, Quota, SelectorOperator, Wave, UNLABELLED,
};
pub use revocation::Revocation;
pub use slice::{SliceChange, SliceEntry, Target};
pub use status::{
    AppliedRevision, FailingCluster, Number, ObjectStatus, PhaseCounts, PlacementStatus, Ranked,
    RevisionCounts, RevisionGroup, RuleSummary, StatusUpdate, Summary,
};
pub use trust::MeshTrust;

/// The newest protocol version this build speaks. The child offers a range in
/// its `Hello`; the parent answers with the version both will use.
pub const PROTOCOL_VERSION: u16 = 13;

/// The oldest protocol version this build still speaks. Version 2 appended
/// the bundle-serve counters to `LinkStatus`; version 3 added the root's
/// signature to `SliceEntry` and integrity alarms to `NodeRecord`; version 4
/// added the limit refusal counters to `NodeRecord` (and a parent refuses
/// more than [`limits::MAX_BUNDLE_STREAMS`] bundle streams at once); version
/// 5 added queries routed down to one node ([`query`]) and the failing
/// clusters, status-rule summaries and single-cluster object statuses of a
/// `PlacementStatus`; version 6 added a rollout's [`Wave`] to
/// `PlacementTarget` and the per-revision counts of a `PlacementStatus`;
/// version 7 added [`query::Query::Split`] (how a relay split a placement,
/// for `relayctl explain`); version 8 added the issuer request and answer
/// of a renewal ([`message::RenewRequest::issuer_csr_der`]), with which a
/// relay that re-parented has its new parent sign its issuer; version 9
/// added the issuer key of a candidate parent
/// ([`parents::CandidateParent::issuer_key`]) and `rmt4.` join tokens,
/// which name keys where older ones named issuers; version 10 added the
/// clusters per applied revision of every placement
/// ([`status::PlacementStatus::applied_revisions`]); version 11 added the
/// parent's cross-signed new issuer to a renewal's answer
/// ([`message::RenewReply::Renewed`]'s `successor_der`), while its issuer
/// key rotates; version 12 carries a placement entry's body as a typed
/// [`PlacementBody`] where it was the Placement's JSON. Nothing older is
/// spoken: version 12 is the first release's (v0.1.0). Version 13 changed
/// no message: its nodes read bundles compressed with zstd
/// ([`bundle_encoding`]), which a root sends only when told to (`relay run
/// --bundle-encoding zstd`). From version 12 on, a
/// release keeps this at or below the previous release's
/// [`PROTOCOL_VERSION`], so a node works with a parent and children one
/// release behind (docs/production.md, "Version skew").
pub const MIN_PROTOCOL_VERSION: u16 = 12;

/// The QUIC ALPN identifier of version 1 of the relaymesh protocol.
pub const ALPN: &[u8] = b"relaymesh/1";

#[cfg(test)]
mod version_skew {
    use super::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

    /// The protocol version of the previous release (`git tag`): raise it
    /// when a release that changed [`PROTOCOL_VERSION`] is tagged.
    const PREVIOUS_RELEASE: u16 = 12;

    #[test]
    fn this_build_speaks_the_previous_releases_protocol() {
        assert!(
            (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&PREVIOUS_RELEASE),
            "a node must speak its neighbours' protocol one release behind"
        );
    }
}
