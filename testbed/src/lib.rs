//! The relaymesh testbed library: what the `testbed` binary uses to bring up
//! local trees.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
