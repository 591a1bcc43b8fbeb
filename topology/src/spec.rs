//! A Placement's spec, read from its JSON object and checked: the one
//! place that turns a Placement's JSON into types. Only the root reads a
//! Placement's JSON, when it admits it (the API's admission, and the
//! root's cache of admitted specs per generation). The slice entry carries
//! the typed [`relaymesh_protocol::PlacementBody`] written from it
//! ([`PlacementSpec::body`]), which agents read back ([`EntrySpec::read`]).
//!
//! Errors name the field at fault as the API's `422 Invalid` does
//! (`spec.rollout.maxConcurrency`).

mod body;
mod error;
mod placement;
pub mod rollout;

pub use body::EntrySpec;
pub use error::PlacementError;
pub use placement::{
    customization, label_selector, selects, PlacementSpec, WorkloadTerm, MAX_OVERRIDES,
    RELAYMESH_GROUP,
};
