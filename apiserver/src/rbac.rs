//! Role-based access control from the stored `rbac.authorization.k8s.io/v1`
//! objects, evaluated as kube-apiserver's RBAC authorizer evaluates them
//! ([`Rbac`]): a request is allowed when a rule of a role bound to the
//! user allows it.
//!
//! * ClusterRoleBindings grant their ClusterRole everywhere; a RoleBinding
//!   grants its Role, or a ClusterRole, within its own namespace only.
//! * Subjects are `User` (the certificate's common name) and `Group` (its
//!   organizations, and `system:authenticated`). `ServiceAccount` subjects
//!   match nobody: the root has no service account tokens.
//! * Rules match as upstream's do (`rules`): verbs, apiGroups, resources
//!   with `resource/subresource` and `*/subresource`, resourceNames,
//!   nonResourceURLs.
//! * Writes of roles and bindings are checked for escalation
//!   ([`Rbac::check_escalation`], in `escalation`): a user may only grant
//!   what they hold, unless allowed the `escalate` (roles) or `bind`
//!   (bindings) verb.
//!
//! Left out: ClusterRole aggregation (`aggregationRule` is stored but not
//! acted on), and kube-apiserver's `system:masters` bypass.
//!
//! The objects are read once and kept; the store's events (read without
//! waiting before each decision) drop the copy when one of them changes, so
//! a decision always sees every write that finished before it.

use crate::objects::BackendError;
use crate::Denied;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::broadcast::{self, error::TryRecvError};
use tracing::{debug, warn};

use crate::attributes::{forbidden, Attributes};
use crate::objects::{ObjectError, ObjectEvent, ObjectStore};
use crate::tls::User;

mod escalation;
mod rules;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The group every authenticated user is in, as in kube-apiserver.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Every built-in resource served, as (group, plural): what a default role
/// can enumerate where a `*` would reach too far.
pub fn builtin_resources() -> Vec<(&'static str, &'static str)> {
    crate::builtins::BUILTIN_KINDS
        .iter()
        .map(|kind| (kind.group, kind.plural))
        .collect()
}

/// Whether the objects of `kind` (in `group`; any group if `None`) are
/// namespaced, for a policy that asks what a selector of objects can
/// reach: from the built-in kinds and the stored CRDs. `None` when no
/// served kind matches, or when matching kinds disagree.
pub fn kind_is_namespaced(
    objects: &ObjectStore,
    group: Option<&str>,
    kind: &str,
) -> Result<Option<bool>, RbacError> {
    let wanted = |candidate: &str| group.is_none_or(|group| group == candidate);
    let mut scopes: Vec<bool> = crate::builtins::BUILTIN_KINDS
        .iter()
        .filter(|builtin| builtin.kind == kind && wanted(builtin.group))
        .map(|builtin| builtin.namespaced)
        .collect();
    let (definitions, _) =
        objects.list("apiextensions.k8s.io", "customresourcedefinitions", None)?;
    for definition in &definitions {
        let text = |pointer: &str| definition.pointer(pointer).and_then(Value::as_str);
        if text("/spec/names/kind") == Some(kind) && text("/spec/group").is_some_and(wanted) {
            scopes.push(text("/spec/scope") == Some("Namespaced"));
        }
    }
    Ok(match scopes.split_first() {
        Some((first, rest)) if rest.iter().all(|scope| scope == first) => Some(*first),
        _ => None,
    })
}

/// Why a role or binding cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RbacError {
    /// The store could not be read.
    #[error("cannot read the RBAC objects")]
    Store(#[from] ObjectError),
    /// A role or binding is not a valid object of its kind.
    #[error("{kind} {name:?} is malformed: {source}")]
    Malformed {
        /// The kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// What did not decode.
        #[source]
        source: serde_json::Error,
    },
}

/// The stored roles and bindings, as one decision reads them.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    /// By namespace, then name.
    roles: HashMap<String, HashMap<String, Vec<PolicyRule>>>,
    cluster_bindings: Vec<(String, ClusterRoleBinding)>,
    /// By namespace.
    bindings: HashMap<String, Vec<(String, RoleBinding)>>,
    /// `ServiceAccount` subjects are the users Kubernetes names after them
    /// ([`Rbac::with_service_accounts`]).
    service_accounts: bool,
}

/// `object` as the RBAC kind `T`.
fn decode<T: DeserializeOwned>(kind: &'static str, object: &Value) -> Result<T, RbacError> {
    serde_json::from_value(object.clone()).map_err(|source| RbacError::Malformed {
        kind,
        name: name_of(object),
        source,
    })
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn namespace_of(object: &Value) -> String {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Policy {
    /// Reads every role and binding in `objects`. One that does not decode
    /// grants nothing and is logged.
    pub fn load(objects: &ObjectStore) -> Result<Self, RbacError> {
        let mut policy = Self::default();
        let read = |plural: &str| -> Result<Vec<Value>, RbacError> {
            Ok(objects.list(GROUP, plural, None)?.0)
        };
        let skip = |error: RbacError| warn!(%error, "RBAC object skipped: it grants nothing");
        for object in read("clusterroles")? {
            match decode::<ClusterRole>("ClusterRole", &object) {
                Ok(role) => {
                    policy
                        .cluster_roles
                        .insert(name_of(&object), role.rules.unwrap_or_default());
                }
                Err(error) => skip(error),
            }
        }
        for object in read("roles")? {
            match decode::<Role>("Role", &object) {
                Ok(role) => {
                    policy
                        .roles
                        .entry(namespace_of(&object))
                        .or_default()
                        .insert(name_of(&object), role.rules.unwrap_or_default());
                }
                Err(error) => skip(error),
            }
        }
        for object in read("clusterrolebindings")? {
            match decode::<ClusterRoleBinding>("ClusterRoleBinding", &object) {
                Ok(binding) => policy.cluster_bindings.push((name_of(&object), binding)),
                Err(error) => skip(error),
            }
        }
        for object in read("rolebindings")? {
            match decode::<RoleBinding>("RoleBinding", &object) {
                Ok(binding) => policy
                    .bindings
                    .entry(namespace_of(&object))
                    .or_default()
                    .push((name_of(&object), binding)),
                Err(error) => skip(error),
            }
        }
        Ok(policy)
    }

    /// The rules of the role `role_ref` names, for a binding in
    /// `namespace` (a Role is looked up there); `None` if there is no such
    /// role.
    fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<&[PolicyRule]> {
        if role_ref.api_group != GROUP {
            return None;
        }
        match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name).map(Vec::as_slice),
            "Role" => self
                .roles
                .get(namespace)?
                .get(&role_ref.name)
                .map(Vec::as_slice),
            _ => None,
        }
    }

    /// Every rule `user` holds in `namespace` (`None`: at the cluster
    /// scope): from ClusterRoleBindings, and in a namespace also from its
    /// RoleBindings.
    pub fn rules_for(&self, user: &User, namespace: Option<&str>) -> Vec<PolicyRule> {
        let mut held = Vec::new();
        self.visit(user, namespace, |_, rules| {
            held.extend_from_slice(rules);
            false
        });
        held
    }

    /// Calls `visit` with each binding that applies to `user` in
    /// `namespace` and its role's rules, until it returns true.
    fn visit(
        &self,
        user: &User,
        namespace: Option<&str>,
        mut visit: impl FnMut(Grant<'_>, &[PolicyRule]) -> bool,
    ) -> bool {
        for (name, binding) in &self.cluster_bindings {
            if applies(binding.subjects.as_deref(), user, self.service_accounts) {
                if let Some(rules) = self.role_rules(&binding.role_ref, "") {
                    let grant = Grant {
                        binding: name,
                        namespace: None,
                        role: &binding.role_ref,
                    };
                    if visit(grant, rules) {
                        return true;
                    }
                }
            }
        }
        let Some(namespace) = namespace.filter(|namespace| !namespace.is_empty()) else {
            return false;
        };
        for (name, binding) in self.bindings.get(namespace).into_iter().flatten() {
            if applies(binding.subjects.as_deref(), user, self.service_accounts) {
                if let Some(rules) = self.role_rules(&binding.role_ref, namespace) {
                    let grant = Grant {
                        binding: name,
                        namespace: Some(namespace),
                        role: &binding.role_ref,
                    };
                    if visit(grant, rules) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Which binding allows `user` to do what `attributes` say, worded as
    /// kube-apiserver words it in a `SelfSubjectAccessReview`; `None` if
    /// none does.
    pub fn allowed_by(&self, user: &User, attributes: &Attributes) -> Option<String> {
        let namespace = match attributes {
            Attributes::Resource { namespace, .. } => namespace.as_deref(),
            _ => None,
        };
        let mut reason = None;
        self.visit(user, namespace, |grant, rules| {
            let allows = rules
                .iter()
                .any(|rule| rules::rule_allows(attributes, rule));
            if allows {
                reason = Some(grant.describe(user));
            }
            allows
        });
        reason
    }
}

/// A binding that applies to a user.
struct Grant<'a> {
    binding: &'a str,
    namespace: Option<&'a str>,
    role: &'a RoleRef,
}

impl Grant<'_> {
    /// `RBAC: allowed by RoleBinding "x/team-a" of ClusterRole "y" to User "alice"`.
    fn describe(&self, user: &User) -> String {
        let binding = match self.namespace {
            Some(namespace) => format!("RoleBinding \"{}/{namespace}\"", self.binding),
            None => format!("ClusterRoleBinding {:?}", self.binding),
        };
        format!(
            "RBAC: allowed by {binding} of {} {:?} to User {:?}",
            self.role.kind, self.role.name, user.name
        )
    }
}

/// Whether one of `subjects` is `user` or one of its groups (kube-apiserver's
/// `appliesTo`). A ServiceAccount is nobody, unless `service_accounts`:
/// then it is the user `system:serviceaccount:NAMESPACE:NAME`, as
/// Kubernetes names it.
fn applies(subjects: Option<&[Subject]>, user: &User, service_accounts: bool) -> bool {
    subjects.unwrap_or_default().iter().any(|subject| {
        let core = subject.api_group.as_deref().unwrap_or(GROUP);
        match subject.kind.as_str() {
            "User" if core == GROUP || core.is_empty() => subject.name == user.name,
            "Group" if core == GROUP || core.is_empty() => {
                subject.name == AUTHENTICATED || user.groups.contains(&subject.name)
            }
            "ServiceAccount" if service_accounts => {
                subject.namespace.as_deref().is_some_and(|namespace| {
                    user.name == format!("system:serviceaccount:{namespace}:{}", subject.name)
                })
            }
            _ => false,
        }
    })
}

/// The RBAC authorizer of one object store, with the roles and bindings
/// kept in memory between changes.
pub struct Rbac {
    objects: ObjectStore,
    cache: Mutex<Cache>,
    service_accounts: bool,
}

struct Cache {
    events: broadcast::Receiver<ObjectEvent>,
    /// The store's history starting over (changes lost under a replicated
    /// store): the kept copy cannot be trusted then.
    restarts: tokio::sync::watch::Receiver<u64>,
    policy: Option<Arc<Policy>>,
}

impl std::fmt::Debug for Rbac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rbac").finish_non_exhaustive()
    }
}

impl Rbac {
    /// The authorizer of the roles and bindings stored in `objects`.
    pub fn new(objects: ObjectStore) -> Self {
        let events = objects.subscribe();
        let restarts = objects.restarts();
        Self {
            objects,
            cache: Mutex::new(Cache {
                events,
                restarts,
                policy: None,
            }),
            service_accounts: false,
        }
    }

    /// This authorizer with `ServiceAccount` subjects bound to the users
    /// Kubernetes names after them (`system:serviceaccount:NS:NAME`), as a
    /// cluster's API server does. The root leaves them nobody: it has no
    /// service accounts, and a binding copied from a cluster must grant
    /// nothing there.
    pub fn with_service_accounts(mut self) -> Self {
        self.service_accounts = true;
        // A policy kept so far was read without them.
        if let Ok(cache) = self.cache.get_mut() {
            cache.policy = None;
        }
        self
    }

    /// The roles and bindings as stored now: the kept copy, unless an
    /// event since says one changed.
    pub fn policy(&self) -> Result<Arc<Policy>, RbacError> {
        // A poisoned lock only means a panic elsewhere; the cache is
        // rebuilt from the store either way.
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            match cache.events.try_recv() {
                Ok(event) if event.key.group == GROUP => cache.policy = None,
                Ok(_) => {}
                Err(TryRecvError::Lagged(_)) => cache.policy = None,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if cache.restarts.has_changed().unwrap_or(false) {
            cache.restarts.mark_unchanged();
            cache.policy = None;
        }
        if let Some(policy) = &cache.policy {
            return Ok(policy.clone());
        }
        // Events sent from here on drop this copy at the next decision.
        let mut policy = Policy::load(&self.objects)?;
        policy.service_accounts = self.service_accounts;
        let policy = Arc::new(policy);
        debug!(
            cluster_roles = policy.cluster_roles.len(),
            bindings = policy.cluster_bindings.len(),
            "RBAC policy loaded"
        );
        cache.policy = Some(policy.clone());
        Ok(policy)
    }

    /// Whether `user` may do what `attributes` say; `Err` carries the
    /// reason for the 403, as kube-apiserver words it.
    pub fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
        let policy = self.policy().map_err(|error| match &error {
            // Nothing was decided: the client may try again.
            RbacError::Store(ObjectError::Storage(BackendError::Unavailable(reason))) => {
                Denied::Unavailable(format!("storage unavailable: {reason}"))
            }
            _ => Denied::Forbidden(format!("{}: RBAC: {error}", forbidden(user, attributes))),
        })?;
        match policy.allowed_by(user, attributes) {
            Some(_) => Ok(()),
            None => Err(Denied::Forbidden(forbidden(user, attributes))),
        }
    }
}

#[cfg(test)]
mod tests;
