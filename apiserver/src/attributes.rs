//! What a request asks to do, in Kubernetes' terms ([`Attributes`]), and
//! how a refusal of it is worded ([`forbidden`]). Plain data: the
//! [`crate::Extension`] trait, the authorizers and the routes all speak it,
//! and it imports none of them.

use crate::tls::User;

/// What a request asks to do, in Kubernetes' terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// A verb on a resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
        /// `deletecollection`.
        verb: String,
        /// The API group (empty for the core group).
        group: String,
        /// The resource's plural.
        resource: String,
        /// The subresource, if any.
        subresource: Option<String>,
        /// The namespace, for namespaced requests.
        namespace: Option<String>,
        /// The object's name, for requests on one object (not a list or
        /// a create), as RBAC's `resourceNames` match it.
        name: Option<String>,
    },
    /// A verb on a path outside the resources (only asked in a
    /// `SelfSubjectAccessReview`: the paths served are [`Self::Discovery`]).
    NonResource {
        /// The lowercase HTTP method: `get`, `post`, ...
        verb: String,
        /// The path, as `/healthz`.
        path: String,
    },
    /// Discovery, version and OpenAPI documents.
    Discovery,
    /// A review of the caller's own identity or rights.
    SelfReview,
}

/// Why `user` may not do what `attributes` say, as kube-apiserver words a
/// refusal: `deployments.apps "web" is forbidden: User "alice" cannot
/// delete resource "deployments" in API group "apps" in the namespace
/// "shop"`.
pub(crate) fn forbidden(user: &User, attributes: &Attributes) -> String {
    match attributes {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let qualified = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let named = match name {
                Some(name) => format!("{qualified} {name:?}"),
                None => qualified,
            };
            let full = match subresource {
                Some(subresource) => format!("{resource}/{subresource}"),
                None => resource.clone(),
            };
            let scope = match namespace {
                Some(namespace) => format!("in the namespace {namespace:?}"),
                None => "at the cluster scope".to_string(),
            };
            format!(
                "{named} is forbidden: User {:?} cannot {verb} resource {full:?} in API group {group:?} {scope}",
                user.name
            )
        }
        Attributes::NonResource { verb, path } => {
            format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            )
        }
        Attributes::Discovery | Attributes::SelfReview => {
            format!("forbidden: User {:?} cannot do this", user.name)
        }
    }
}

/// Why a request was not authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// The policy does not allow it: a `403` with the reason, worded as
    /// kube-apiserver words it.
    Forbidden(String),
    /// The policy could not be read (its store out of reach): a `503`,
    /// since nothing was decided.
    Unavailable(String),
}

impl Denied {
    /// The reason, as the answer says it.
    pub fn reason(&self) -> &str {
        match self {
            Self::Forbidden(reason) | Self::Unavailable(reason) => reason,
        }
    }
}

impl From<String> for Denied {
    fn from(reason: String) -> Self {
        Self::Forbidden(reason)
    }
}

impl From<&str> for Denied {
    fn from(reason: &str) -> Self {
        Self::Forbidden(reason.to_string())
    }
}

impl From<Denied> for crate::ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::Forbidden(reason) => Self::Forbidden(reason),
            Denied::Unavailable(reason) => Self::Unavailable(reason),
        }
    }
}
