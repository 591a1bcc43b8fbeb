//! The API group and version names that relaymesh's routes, kinds and
//! object views must agree on. They live in a leaf of their own so that
//! every part of the API can name them without importing another part.
//!
//! relaymesh's own group, `relaymesh.dev`, is
//! [`RELAYMESH_GROUP`](crate::placement::RELAYMESH_GROUP): the placement
//! code names it too.

/// relaymesh's API version within its group.
pub(super) const VERSION: &str = "v1alpha1";

/// The SIG-Multicluster API group of ClusterProfiles.
pub(super) const MULTICLUSTER_GROUP: &str = "multicluster.x-k8s.io";
