//! Hard limits every decoder enforces before it allocates, and the names of
//! the limits nodes count their refusals by ([`Limit`]).
//!
//! The constants bound what a misbehaving or malicious peer can make a relay
//! hold in memory. Raising one is a protocol change: both sides must agree.

/// The largest frame payload on any stream, in bytes. Larger state (a big
/// snapshot, a full inventory) is sent as several frames.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// The largest opening frame of a stream (`Open`: a hello, a bundle request
/// or a join request), which a peer may send before it is authenticated: a
/// stranger must not make a relay allocate more than this.
pub const MAX_OPENING_FRAME_LEN: usize = 64 * 1024;

/// The length of a frame header: the payload length as a big-endian `u32`.
pub const FRAME_HEADER_LEN: usize = 4;

/// The largest bundle a relay accepts, in bytes. Bundles travel as raw bytes on
/// their own stream, not as frames.
pub const MAX_BUNDLE_LEN: u64 = 256 * 1024 * 1024;

/// The longest node name (a DNS-1123 label, as Kubernetes names nodes).
pub const MAX_NAME_LEN: usize = 63;

/// The most addresses a node may advertise or a token may carry.
pub const MAX_ADDRESSES: usize = 16;

/// The longest join token, in characters.
pub const MAX_TOKEN_LEN: usize = 4096;

/// The most slice entries or inventory records a relay puts in one frame; the
/// byte limit above applies as well.
pub const MAX_ITEMS_PER_FRAME: usize = 4096;

/// The most bundle streams a child keeps open at once on one connection. A
/// parent refuses a bundle request beyond it with `Unavailable` (and counts
/// the refusal as `bundle-streams-per-peer`), so one child cannot tie up a
/// parent's store reads and send buffers with thousands of transfers; a
/// child never asks for more, so the refusal only meets a misbehaving one.
pub const MAX_BUNDLE_STREAMS: usize = 16;

/// A limit a node enforces, by the name its counter has.
///
/// The names are part of the protocol: a node counts its refusals in its own
/// inventory record (`NodeRecord::limit_refusals`, keyed by
/// [`Limit::as_str`]), which climbs the tree, so every relay and the root's
/// API read the same names. Where each limit is enforced is the relay's
/// business (its `limits` module); variants are only ever appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Limit {
    /// Connections open at once, from everyone.
    Connections,
    /// Connections open at once from one source address.
    ConnectionsPerAddress,
    /// Joins in progress at once, from everyone.
    Joins,
    /// Joins per minute from one source address.
    JoinsPerAddress,
    /// Bundle streams open at once on one connection.
    BundleStreamsPerPeer,
    /// Inventory records one child may have this relay hold.
    InventoryRecordsPerChild,
    /// Placement status keys one child may report.
    StatusKeysPerChild,
    /// The size of an API request's body.
    ApiRequestBody,
    /// The operations of a JSON patch, and what its `copy` operations add.
    ApiJsonPatch,
    /// The objects a list without `limit` returns.
    ApiUnpagedList,
    /// API watches open at once, from everyone.
    ApiWatches,
    /// API watches one user has open at once.
    ApiWatchesPerUser,
    /// What one API watch queues for a client that does not read (counted
    /// when such a watch is ended).
    ApiWatchBuffer,
    /// TLS handshakes in progress at once, from everyone (counted when a
    /// new connection waited too long for its turn).
    Handshakes,
}

impl Limit {
    /// Every limit.
    pub const ALL: [Limit; 14] = [
        Limit::Connections,
        Limit::ConnectionsPerAddress,
        Limit::Joins,
        Limit::JoinsPerAddress,
        Limit::BundleStreamsPerPeer,
        Limit::InventoryRecordsPerChild,
        Limit::StatusKeysPerChild,
        Limit::ApiRequestBody,
        Limit::ApiJsonPatch,
        Limit::ApiUnpagedList,
        Limit::ApiWatches,
        Limit::ApiWatchesPerUser,
        Limit::ApiWatchBuffer,
        Limit::Handshakes,
    ];

    /// The counter's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connections => "connections",
            Self::ConnectionsPerAddress => "connections-per-address",
            Self::Joins => "joins",
            Self::JoinsPerAddress => "joins-per-address",
            Self::BundleStreamsPerPeer => "bundle-streams-per-peer",
            Self::InventoryRecordsPerChild => "inventory-records-per-child",
            Self::StatusKeysPerChild => "status-keys-per-child",
            Self::ApiRequestBody => "api-request-body",
            Self::ApiJsonPatch => "api-json-patch",
            Self::ApiUnpagedList => "api-unpaged-list",
            Self::ApiWatches => "api-watches",
            Self::ApiWatchesPerUser => "api-watches-per-user",
            Self::ApiWatchBuffer => "api-watch-buffer",
            Self::Handshakes => "handshakes",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
