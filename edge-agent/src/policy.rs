//! The agent's apply policy: what it agrees to write to its cluster, decided
//! by the cluster's owner on the agent's own command line, never by the
//! tree above it.
//!
//! Placements come down through relays the agent does not control, so a
//! compromised relay (or a careless Placement, or any operator at the root)
//! must not be able to turn the agent's credentials against the cluster
//! itself. By default the agent refuses what reaches beyond a workload's
//! own namespace into how the whole cluster behaves — see [`Category`]:
//! cluster-scoped RBAC, admission control, aggregated APIs, the API
//! server's flow control, cluster-wide defaults, Pod Security labels,
//! RuntimeClasses, node and driver objects, PersistentVolumes,
//! certificates, Service address ranges, and anything in the `kube-system`,
//! `kube-public` and `kube-node-lease` namespaces. `edge-agent run --allow
//! CATEGORY` opens a category; CustomResourceDefinitions are allowed unless
//! `--deny crds` closes them.
//!
//! Independently of the categories, the agent never takes over an object it
//! did not create: an object that exists without relaymesh's marks is
//! refused unless its Placement says `spec.adopt: true` ([`takeover`]) *and*
//! the cluster's owner allowed adoption where the object is (`--allow-adopt
//! NAMESPACE`, [`AdoptionScope`]; nowhere by default). An adopted object is
//! remembered as such, and when it leaves its placement it is released (the
//! agent's label removed), never deleted ([`prune_action`]); so a Namespace
//! that existed before the agent is never deleted by it.
//!
//! A refused object is not applied; it counts as a failure of its placement
//! on this cluster, with the [`Refusal`] as the message that travels up to
//! the root's Placement status, and the rest of the bundle is still applied.
//! Everything here is pure: decisions in, decisions out.

mod adoption;
mod category;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

pub use self::adoption::{AdoptionScope, AdoptionScopeError, ALL_NAMESPACES, CLUSTER_SCOPED};
pub use self::category::{Category, POD_SECURITY_LABEL_PREFIX, SYSTEM_NAMESPACES};
use crate::applier::{CREATED_BY_LABEL, FIELD_MANAGER};
use crate::manifest::{ObjectRef, PART_OF_LABEL};

/// What `--allow adoption` and `--deny adoption` now answer: adoption was a
/// category, allowed by default, until each cluster's owner had to allow it
/// per namespace.
pub const ADOPTION_IS_NOT_A_CATEGORY: &str = "adoption is no longer a category: the agent \
adopts nothing unless --allow-adopt NAMESPACE allows it (so --deny adoption is the default; \
drop it), and --allow-adopt '*' allows it in every namespace";

/// Why the command line's policy is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A category was both allowed and denied.
    #[error("--allow {0} and --deny {0} contradict each other")]
    Contradiction(Category),
}

/// Why the agent refused to write one object. Its text is what the
/// placement's status says about the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The object falls into a category the policy does not allow.
    #[error(
        "refused by this agent's apply policy: {} is not allowed here ({})",
        category.description(),
        category.remedy()
    )]
    Category {
        /// The (first) category that is not allowed.
        category: Category,
    },
    /// The object exists and the agent did not create it.
    #[error("exists and is not managed by relaymesh; set spec.adopt: true to take it over")]
    NotManaged,
    /// The object exists, the agent did not create it, and its Placement
    /// asks to adopt it, but the cluster's owner did not allow adoption
    /// there.
    #[error(
        "exists and is not managed by relaymesh, and this agent does not allow {} (edge-agent run --allow-adopt {scope})",
        match scope {
            AdoptionScope::Namespace(name) => format!("adoption in namespace {name}"),
            _ => "adopting cluster-scoped objects".to_string(),
        }
    )]
    AdoptionNotAllowed {
        /// The scope `--allow-adopt` would have to name.
        scope: AdoptionScope,
    },
}

/// Which categories the agent allows, and where it may adopt.
/// [`Policy::default`] is the policy of an agent started without `--allow`,
/// `--deny` or `--allow-adopt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    allowed: BTreeSet<Category>,
    adoptable: BTreeSet<AdoptionScope>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allowed: Category::ALLOWED_BY_DEFAULT.into_iter().collect(),
            adoptable: BTreeSet::new(),
        }
    }
}

impl Policy {
    /// The default policy with the `allow` categories opened and the `deny`
    /// categories closed; naming a category in both is an error.
    pub fn new(allow: &[Category], deny: &[Category]) -> Result<Self, PolicyError> {
        if let Some(both) = allow.iter().find(|category| deny.contains(category)) {
            return Err(PolicyError::Contradiction(*both));
        }
        let mut policy = Self::default();
        policy.allowed.extend(allow.iter().copied());
        for category in deny {
            policy.allowed.remove(category);
        }
        Ok(policy)
    }

    /// This policy, also allowing adoption in `scopes` (`--allow-adopt`).
    pub fn allowing_adoption(mut self, scopes: impl IntoIterator<Item = AdoptionScope>) -> Self {
        self.adoptable.extend(scopes);
        self
    }

    /// Whether `category` is allowed.
    pub fn allows(&self, category: Category) -> bool {
        self.allowed.contains(&category)
    }

    /// Whether adoption is allowed in `scope` (from [`AdoptionScope::of`]).
    pub fn allows_adoption(&self, scope: &AdoptionScope) -> bool {
        self.adoptable.iter().any(|allowed| allowed.covers(scope))
    }

    /// The allowed categories, by name, for the startup log line.
    pub fn allowed_names(&self) -> String {
        let names: Vec<&str> = self
            .allowed
            .iter()
            .map(|category| category.name())
            .collect();
        names.join(",")
    }

    /// Where adoption is allowed, as `--allow-adopt` names it, for the
    /// startup log line; empty if nowhere.
    pub fn adoptable_names(&self) -> String {
        let names: Vec<String> = self.adoptable.iter().map(ToString::to_string).collect();
        names.join(",")
    }

    /// Whether the agent may write `reference` with `body` (as it would
    /// apply it), which lands in `namespace` (`None` for a cluster-scoped
    /// object).
    pub fn check(
        &self,
        reference: &ObjectRef,
        body: &Value,
        namespace: Option<&str>,
    ) -> Result<(), Refusal> {
        match Category::of(reference, body, namespace)
            .into_iter()
            .find(|category| !self.allows(*category))
        {
            Some(category) => Err(Refusal::Category { category }),
            None => Ok(()),
        }
    }

    /// Whether the agent may apply `reference`, landing in `namespace`,
    /// over its live object (`None`: there is none) for a placement that
    /// does or does not ask to `adopt`: [`takeover`], and an adoption only
    /// where this policy allows it.
    pub fn check_takeover(
        &self,
        reference: &ObjectRef,
        namespace: Option<&str>,
        live: Option<Ownership>,
        adopt: bool,
    ) -> Result<Takeover, Refusal> {
        match takeover(live, adopt)? {
            Takeover::Adopt => {
                let scope = AdoptionScope::of(reference, namespace);
                if self.allows_adoption(&scope) {
                    Ok(Takeover::Adopt)
                } else {
                    Err(Refusal::AdoptionNotAllowed { scope })
                }
            }
            decided => Ok(decided),
        }
    }
}

/// Who a live object belongs to, as far as the agent can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// It carries relaymesh's marks: an ApplySet part-of label naming one of
    /// this agent's placements, or the label on namespaces relaymesh
    /// created.
    Relaymesh,
    /// Someone else's.
    Foreign,
}

/// Who the object with `labels` belongs to; `applysets` are the ApplySet
/// ids of this agent's placements.
pub fn ownership(
    labels: Option<&BTreeMap<String, String>>,
    applysets: &BTreeSet<String>,
) -> Ownership {
    let Some(labels) = labels else {
        return Ownership::Foreign;
    };
    let member = labels
        .get(PART_OF_LABEL)
        .is_some_and(|id| applysets.contains(id));
    let created = labels.get(CREATED_BY_LABEL).map(String::as_str) == Some(FIELD_MANAGER);
    if member || created {
        Ownership::Relaymesh
    } else {
        Ownership::Foreign
    }
}

/// What applying an object does to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// It does not exist: the agent creates it.
    Create,
    /// The agent's own object: it is updated.
    Update,
    /// Someone else's, and the placement asks to adopt it: from now on it is
    /// the agent's, remembered as adopted.
    Adopt,
}

/// Whether the agent may apply over the live object (`None`: there is
/// none) of a placement that does or does not ask to `adopt`.
pub fn takeover(live: Option<Ownership>, adopt: bool) -> Result<Takeover, Refusal> {
    match (live, adopt) {
        (None, _) => Ok(Takeover::Create),
        (Some(Ownership::Relaymesh), _) => Ok(Takeover::Update),
        (Some(Ownership::Foreign), true) => Ok(Takeover::Adopt),
        (Some(Ownership::Foreign), false) => Err(Refusal::NotManaged),
    }
}

/// What pruning does to an object that left its placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneAction {
    /// The agent created it: it is deleted.
    Delete,
    /// The agent adopted it: it existed before, so it is only released
    /// (the agent's part-of label removed) and left in place. This is what
    /// keeps an adopted Namespace, and everything in it, alive.
    Release,
}

/// What pruning does to an object the agent did or did not adopt.
pub fn prune_action(adopted: bool) -> PruneAction {
    if adopted {
        PruneAction::Release
    } else {
        PruneAction::Delete
    }
}

#[cfg(test)]
mod tests;
