//! relaymesh's tree logic, with no IO and no async: given what a relay knows
//! of its subtree, decide where things go.
//!
//! Everything here is a pure function of its inputs, so the relay daemon and
//! the testbed's large simulations (the relay core's, which calls these)
//! run exactly the same decisions. Start with
//! [`subtree`], which indexes a relay's subtree by the child each node lies
//! under, and [`reach()`], which says which children a slice entry concerns.
//! Placements are resolved hierarchically: [`selector`] matches labels,
//! [`aggregate`] summarises a subtree's clusters by label set, [`placement`]
//! is one relay's decision (which child fills how much of the bound), which
//! `relaymesh-core` makes for each relay, and [`model`] chains those
//! decisions over a whole tree in memory for property tests and
//! `relayctl explain`. [`summary`] is the algebra of the status that flows
//! back up, and [`rules`] the placements' own status rules (CEL) that feed
//! it. [`customization`] turns a placement's objects into one cluster's
//! copy at the leaf (templates and overrides).
//!
//! Deliberately absent: sockets, files, clocks and randomness. Callers pass
//! in `now` and anything random they need.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aggregate;
pub mod cluster_labels;
pub mod customization;
pub mod groups;
pub mod labels;
pub mod model;
pub mod placement;
pub mod reach;
pub mod rollout;
pub mod rules;
pub mod selector;
pub mod spec;
pub mod subtree;
pub mod summary;

pub use reach::{reach, Reach};
pub use subtree::{SubtreeError, SubtreeIndex};
