//! The relaymesh edge agent: the leaf of the tree, in front of one Kubernetes
//! cluster.
//!
//! Not built yet: it arrives with the edge-agent issue. The crate exists so
//! the workspace has the shape DESIGN.md describes.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
