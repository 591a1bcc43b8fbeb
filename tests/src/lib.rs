//! Helpers for relaymesh's end-to-end tests: start real `relay` processes on
//! loopback, run `relayctl`, and wait for the tree to settle.
