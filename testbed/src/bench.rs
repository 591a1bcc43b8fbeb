//! Benchmarks of the tree logic, run in memory with the relays' own code.

pub mod placement;
