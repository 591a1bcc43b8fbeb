//! Benchmarks of the tree logic, run in memory with the relays' own code:
//! a tree of real relay cores on the core crate's simulated network.

pub mod fleet;
pub mod placement;
pub mod simulation;
