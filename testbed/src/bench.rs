//! Benchmarks. In memory: a tree of real relay cores on the core crate's
//! simulated network ([`simulation`], [`placement`]). With real
//! connections: relay processes and hollow agents ([`fanout`]), and the
//! same fanout against peers: a kubectl loop ([`peers`]) and NATS with leaf
//! nodes ([`nats`]). The API's decoders against deep nesting, in process
//! and at a root under load ([`decode`]). Each writes
//! `target/bench/NAME.json` ([`report`]) and one line per figure to stdout;
//! `testbed bench docs` turns the reports into docs/benchmarks.md.

pub mod decode;
pub mod docs;
pub mod failover;
pub mod fanin;
pub mod fanout;
pub mod fleet;
pub mod latency;
pub mod nats;
pub mod peers;
pub mod placement;
pub mod report;
pub mod root;
pub mod simulation;
pub mod sled_churn;
pub mod store;
pub mod stored;
pub mod storm;
pub mod window;
