//! Benchmarks: each writes `target/bench/NAME.json` ([`report`]) and one line
//! per figure to stdout; `testbed bench docs` turns the reports into
//! docs/benchmarks.md.

pub mod docs;
pub mod fanout;
pub mod placement;
pub mod report;
