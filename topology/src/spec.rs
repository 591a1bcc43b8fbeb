//! A Placement's spec, read from its JSON object and checked: the one
//! place that turns a Placement's JSON into types. The root reads a
//! Placement here at admission and when it rebuilds the Placement's entry;
//! agents read the same spec from the entry's body with the same code
//! (`placement`'s `customization` and `rollout`'s `rollout`).
//!
//! Errors name the field at fault as the API's `422 Invalid` does
//! (`spec.rollout.maxConcurrency`).

mod error;
mod placement;
pub mod rollout;

pub use error::PlacementError;
pub use placement::{
    customization, label_selector, selects, PlacementSpec, WorkloadTerm, MAX_OVERRIDES,
    RELAYMESH_GROUP,
};
