//! Hard limits every decoder enforces before it allocates.
//!
//! They bound what a misbehaving or malicious peer can make a relay hold in
//! memory. Raising one is a protocol change: both sides must agree.

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
