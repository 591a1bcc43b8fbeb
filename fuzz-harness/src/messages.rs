//! Every message type of the wire contract: arbitrary bytes decoded as each
//! top-level message a link carries (the opening frames, the control
//! stream's messages both ways, bundle, join and renewal requests and
//! replies) and the types inside them that are stored or forwarded on their
//! own (slice entries and changes, revocations, inventory and status
//! updates, token claims). A successful decode must round-trip
//! (`check_round_trip`).

use crate::check_round_trip;
use relaymesh_protocol::message::{
    BundleReply, BundleRequest, DownMessage, Hello, JoinGrant, JoinReply, JoinRequest, Open,
    RenewReply, RenewRequest, Resume, UpMessage, Welcome,
};
use relaymesh_protocol::token::TokenClaims;
use relaymesh_protocol::{
    InventoryUpdate, NodeRecord, PlacementTarget, Refusal, Revocation, SliceChange, SliceEntry,
    StatusUpdate, Target,
};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    // Opening frames and the control stream.
    check_round_trip::<Open>(data);
    check_round_trip::<Hello>(data);
    check_round_trip::<Resume>(data);
    check_round_trip::<Welcome>(data);
    check_round_trip::<UpMessage>(data);
    check_round_trip::<DownMessage>(data);
    // Bundle fetches and joins.
    check_round_trip::<BundleRequest>(data);
    check_round_trip::<BundleReply>(data);
    check_round_trip::<JoinRequest>(data);
    check_round_trip::<JoinReply>(data);
    check_round_trip::<JoinGrant>(data);
    check_round_trip::<RenewRequest>(data);
    check_round_trip::<RenewReply>(data);
    check_round_trip::<TokenClaims>(data);
    // What the messages carry, stored and forwarded on its own.
    check_round_trip::<SliceEntry>(data);
    check_round_trip::<Revocation>(data);
    check_round_trip::<SliceChange>(data);
    check_round_trip::<Target>(data);
    check_round_trip::<PlacementTarget>(data);
    check_round_trip::<InventoryUpdate>(data);
    check_round_trip::<NodeRecord>(data);
    check_round_trip::<StatusUpdate>(data);
    check_round_trip::<Refusal>(data);
}
