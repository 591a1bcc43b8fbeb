//! The agent's apply policy: what it agrees to write to its cluster, decided
//! by the cluster's operator on the agent's own command line, never by the
//! tree above it.
//!
//! Placements come down through relays the agent does not control, so a
//! compromised relay (or a careless Placement) must not be able to turn the
//! agent's credentials against the cluster itself. By default the agent
//! refuses the kinds of object that reach beyond a workload's own namespace
//! into the cluster's control plane — see [`Category`]: cluster-scoped RBAC,
//! admission control, aggregated APIs, and anything in the `kube-system`,
//! `kube-public` and `kube-node-lease` namespaces.
//! `edge-agent run --allow CATEGORY` opens a category;
//! CustomResourceDefinitions and adoption are allowed unless `--deny crds`
//! or `--deny adoption` closes them.
//!
//! Independently of the categories, the agent never takes over an object it
//! did not create: an object that exists without relaymesh's marks is
//! refused unless its Placement says `spec.adopt: true`
//! ([`takeover`]). An adopted object is remembered as such, and when it
//! leaves its placement it is released (the agent's label removed), never
//! deleted ([`prune_action`]); so a Namespace that existed before the agent
//! is never deleted by it.
//!
//! A refused object is not applied; it counts as a failure of its placement
//! on this cluster, with the [`Refusal`] as the message that travels up to
//! the root's Placement status, and the rest of the bundle is still applied.
//! Everything here is pure: decisions in, decisions out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::applier::{CREATED_BY_LABEL, FIELD_MANAGER};
use crate::manifest::{ObjectRef, PART_OF_LABEL};

/// The namespaces the `kube-system` category covers: those Kubernetes
/// itself creates and runs the cluster from.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// A category of objects the policy allows or refuses as a whole.
///
/// The doc comment of each variant is what `edge-agent run --help` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Category {
    /// ClusterRoles and ClusterRoleBindings (rbac.authorization.k8s.io):
    /// permissions across the whole cluster. Refused unless allowed.
    /// Namespaced Roles and RoleBindings are always allowed.
    ClusterRbac,
    /// Everything in admissionregistration.k8s.io: mutating and validating
    /// webhook configurations and admission policies with their bindings,
    /// which see or change every request to the cluster. Refused unless
    /// allowed. Also accepted as `webhooks`.
    #[value(alias = "webhooks")]
    Admission,
    /// APIServices (apiregistration.k8s.io), which route a whole API group
    /// to a service of their choosing. Refused unless allowed.
    AggregatedApis,
    /// Any object in the kube-system, kube-public or kube-node-lease
    /// namespaces, and those Namespaces themselves. Refused unless allowed.
    KubeSystem,
    /// CustomResourceDefinitions (apiextensions.k8s.io). Allowed unless
    /// `--deny crds`.
    Crds,
    /// Not a kind but an act: taking over an existing object that
    /// relaymesh did not create, when its Placement says `adopt: true`.
    /// Allowed unless `--deny adoption`, which keeps every Placement (and
    /// every relay on the way) from taking over anything.
    Adoption,
}

impl Category {
    /// Every category, in the order `--help` lists them.
    pub const ALL: [Self; 6] = [
        Self::ClusterRbac,
        Self::Admission,
        Self::AggregatedApis,
        Self::KubeSystem,
        Self::Crds,
        Self::Adoption,
    ];

    /// The categories a policy allows when the command line says nothing.
    pub const ALLOWED_BY_DEFAULT: [Self; 2] = [Self::Crds, Self::Adoption];

    /// The name `--allow` and `--deny` take.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClusterRbac => "cluster-rbac",
            Self::Admission => "admission",
            Self::AggregatedApis => "aggregated-apis",
            Self::KubeSystem => "kube-system",
            Self::Crds => "crds",
            Self::Adoption => "adoption",
        }
    }

    /// What the category holds, for refusal messages.
    pub fn description(self) -> &'static str {
        match self {
            Self::ClusterRbac => "cluster-scoped RBAC",
            Self::Admission => "admission control (webhooks and admission policies)",
            Self::AggregatedApis => "aggregated API registration",
            Self::KubeSystem => {
                "writing in the kube-system, kube-public and kube-node-lease namespaces"
            }
            Self::Crds => "CustomResourceDefinitions",
            Self::Adoption => "adopting existing objects",
        }
    }

    /// What the cluster's operator would change to allow the category.
    pub fn remedy(self) -> String {
        if Self::ALLOWED_BY_DEFAULT.contains(&self) {
            format!("the agent runs with --deny {self}")
        } else {
            format!("edge-agent run --allow {self}")
        }
    }

    /// The categories an object falls into, given the namespace it will
    /// land in (`None` for a cluster-scoped object). Most objects fall into
    /// none; an object must be allowed in every category it falls into.
    /// ([`Category::Adoption`] is never one: [`Policy::check_takeover`]
    /// decides it.)
    pub fn of(reference: &ObjectRef, namespace: Option<&str>) -> Vec<Self> {
        let mut categories = Vec::new();
        match (reference.group.as_str(), reference.kind.as_str()) {
            ("rbac.authorization.k8s.io", "ClusterRole" | "ClusterRoleBinding") => {
                categories.push(Self::ClusterRbac);
            }
            ("admissionregistration.k8s.io", _) => categories.push(Self::Admission),
            ("apiregistration.k8s.io", _) => categories.push(Self::AggregatedApis),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => categories.push(Self::Crds),
            _ => {}
        }
        let system_namespace = reference.group.is_empty()
            && reference.kind == "Namespace"
            && SYSTEM_NAMESPACES.contains(&reference.name.as_str());
        if system_namespace || namespace.is_some_and(|name| SYSTEM_NAMESPACES.contains(&name)) {
            categories.push(Self::KubeSystem);
        }
        categories
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
}

/// Which categories the agent allows. [`Policy::default`] is the policy of
/// an agent started without `--allow` or `--deny`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    allowed: BTreeSet<Category>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allowed: Category::ALLOWED_BY_DEFAULT.into_iter().collect(),
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

    /// Whether `category` is allowed.
    pub fn allows(&self, category: Category) -> bool {
        self.allowed.contains(&category)
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

    /// Whether the agent may write `reference`, which lands in `namespace`
    /// (`None` for a cluster-scoped object).
    pub fn check(&self, reference: &ObjectRef, namespace: Option<&str>) -> Result<(), Refusal> {
        match Category::of(reference, namespace)
            .into_iter()
            .find(|category| !self.allows(*category))
        {
            Some(category) => Err(Refusal::Category { category }),
            None => Ok(()),
        }
    }
}

impl Policy {
    /// Whether the agent may apply over the live object (`None`: there is
    /// none) of a placement that does or does not ask to `adopt`:
    /// [`takeover`], refused if this policy denies adoption.
    pub fn check_takeover(
        &self,
        live: Option<Ownership>,
        adopt: bool,
    ) -> Result<Takeover, Refusal> {
        match takeover(live, adopt)? {
            Takeover::Adopt if !self.allows(Category::Adoption) => Err(Refusal::Category {
                category: Category::Adoption,
            }),
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

/// Whether a placement's slice entry body (`{"metadata": …, "spec": …}`)
/// asks to adopt existing objects: only a JSON `true` at `spec.adopt` does.
pub fn adopt_requested(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|body| body.pointer("/spec/adopt").and_then(Value::as_bool))
        == Some(true)
}

#[cfg(test)]
mod tests;
