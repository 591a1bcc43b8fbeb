//! Where the cluster's owner lets the agent adopt: `edge-agent run
//! --allow-adopt NAMESPACE…`.
//!
//! A Placement's `spec.adopt: true` asks to take over objects that exist
//! without relaymesh's marks; the agent agrees only where its own command
//! line says so. Nothing is adoptable by default.

use std::fmt;
use std::str::FromStr;

use crate::manifest::ObjectRef;

/// The `--allow-adopt` value for every namespace.
pub const ALL_NAMESPACES: &str = "*";

/// The `--allow-adopt` value for cluster-scoped objects other than
/// Namespaces. It cannot be a namespace's name (those have no `:`).
pub const CLUSTER_SCOPED: &str = ":cluster";

/// One `--allow-adopt` value: where adoption is allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdoptionScope {
    /// The objects in this namespace, and the Namespace itself.
    Namespace(String),
    /// The objects in every namespace, and every Namespace (`*`).
    AllNamespaces,
    /// Cluster-scoped objects other than Namespaces: CRDs, classes, and
    /// whatever else the categories let through (`:cluster`).
    ClusterScoped,
}

impl AdoptionScope {
    /// Where adopting `reference`, landing in `namespace` (`None` for a
    /// cluster-scoped object), needs the owner's consent: a Namespace and
    /// the objects in it count as that namespace.
    pub fn of(reference: &ObjectRef, namespace: Option<&str>) -> Self {
        if reference.group.is_empty() && reference.kind == "Namespace" {
            return Self::Namespace(reference.name.clone());
        }
        match namespace {
            Some(namespace) => Self::Namespace(namespace.to_string()),
            None => Self::ClusterScoped,
        }
    }

    /// Whether this allowed scope covers `wanted` (a scope from
    /// [`AdoptionScope::of`]).
    pub fn covers(&self, wanted: &AdoptionScope) -> bool {
        match (self, wanted) {
            (Self::AllNamespaces, Self::Namespace(_)) => true,
            (allowed, wanted) => allowed == wanted,
        }
    }
}

impl fmt::Display for AdoptionScope {
    /// As `--allow-adopt` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Namespace(name) => f.write_str(name),
            Self::AllNamespaces => f.write_str(ALL_NAMESPACES),
            Self::ClusterScoped => f.write_str(CLUSTER_SCOPED),
        }
    }
}

/// Why an `--allow-adopt` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is neither a namespace name, {ALL_NAMESPACES:?} (every namespace) nor {CLUSTER_SCOPED:?} (cluster-scoped objects): {reason}")]
pub struct AdoptionScopeError {
    /// The value given.
    pub value: String,
    /// Why it is not a namespace name.
    pub reason: String,
}

impl FromStr for AdoptionScope {
    type Err = AdoptionScopeError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            ALL_NAMESPACES => Ok(Self::AllNamespaces),
            CLUSTER_SCOPED => Ok(Self::ClusterScoped),
            name => match relaymesh_protocol::name::validate(name) {
                Ok(()) => Ok(Self::Namespace(name.to_string())),
                Err(error) => Err(AdoptionScopeError {
                    value: value.to_string(),
                    reason: error.to_string(),
                }),
            },
        }
    }
}
