//! What a server adds to Kubernetes: its own kinds, its own paths, and who
//! may do what ([`Extension`]). relaymesh's root mounts Placements, the
//! tree's Clusters and Relays, join tokens and revocations this way; the
//! testbed's simulated clusters use [`Plain`], which adds nothing.

use crate::Denied;
use std::future::Future;

use hyper::{Method, Response};
use serde_json::Value;

use crate::attributes::Attributes;
use crate::http::ApiBody;
use crate::limits::{ApiLimit, WatchLimits};
use crate::objects::ObjectStore;
use crate::rbac::Rbac;
use crate::resources::Resource;
use crate::tls::User;
use crate::ApiError;

/// A path an [`Extension`] serves, as its [`Extension::route`] parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionRoute {
    /// Which of the extension's endpoints this is; the extension's own name.
    pub endpoint: &'static str,
    /// What the extension read from the path (an id, a namespace and name).
    pub arguments: Vec<String>,
    /// The methods the endpoint answers; others get `405` with `Allow`.
    pub methods: &'static [Method],
    /// What the request asks to do, for [`Extension::authorize`].
    pub attributes: Attributes,
    /// The largest body the endpoint reads; a larger one gets `413`.
    pub body_limit: usize,
}

/// One authenticated, authorized request on an [`ExtensionRoute`].
pub struct Call {
    /// The route, as [`Extension::route`] returned it.
    pub route: ExtensionRoute,
    /// The request's method (one of the route's).
    pub method: Method,
    /// The query string, if any.
    pub query: Option<String>,
    /// The request's body, read whole (at most the route's `body_limit`).
    pub body: Vec<u8>,
    /// Who asked.
    pub user: User,
    /// The server's object store.
    pub objects: ObjectStore,
}

/// What a server adds to the Kubernetes API. Every method has a default
/// that adds nothing, so `impl Extension for MyServer {}` is a plain
/// Kubernetes API server.
///
/// The synchronous methods are called from request handlers on the async
/// runtime, so they must answer from memory and not block.
pub trait Extension: Send + Sync + 'static {
    /// Kinds served beside the built-ins and the CRDs' (a CRD cannot shadow
    /// them). Called once, when the server starts.
    fn resources(&self) -> Vec<Resource> {
        Vec::new()
    }

    /// The objects of a read-only resource of [`Extension::resources`]
    /// ([`Resource::read_only`]), sorted by name. Watches on it compare
    /// this with what they sent, so it should be cheap.
    fn objects(&self, resource: &Resource) -> Vec<Value> {
        let _ = resource;
        Vec::new()
    }

    /// Why the read-only resources cannot be served now (`503`), or `None`
    /// (the default) when [`Extension::objects`] answers: a server whose
    /// views would be stale says so rather than serve them as current.
    fn views_unavailable(&self) -> Option<String> {
        None
    }

    /// A number that changes whenever [`Extension::objects`] of `resource`
    /// would, so a watch renders the objects only after a change; `None`
    /// (the default) when the extension cannot tell, and watches render and
    /// compare on every look.
    fn objects_version(&self, resource: &Resource) -> Option<u64> {
        let _ = resource;
        None
    }

    /// Why the API no longer accepts `user`, whose certificate the client
    /// CA signed (an admin revoked it), or `None`. Asked on every request
    /// that needs a user, so a revocation holds on connections already
    /// open; the reason goes out with the `401`. The default refuses no one.
    fn refuses_user(&self, user: &User) -> Option<String> {
        let _ = user;
        None
    }

    /// Whether `user` may do what `attributes` says; `Err` carries the
    /// reason for the `403` (or the `503` when the policy cannot be read),
    /// worded as kube-apiserver words it. The default
    /// lets every authenticated user do everything (kube-apiserver's
    /// `AlwaysAllow` mode), which only suits a server whose client CA signs
    /// nothing but its operators' certificates.
    fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
        let _ = (user, attributes);
        Ok(())
    }

    /// The RBAC authorizer, if [`Extension::authorize`] decides with one:
    /// writes of roles and bindings then pass its escalation check
    /// ([`Rbac::check_escalation`]). The default is none.
    fn rbac(&self) -> Option<&Rbac> {
        None
    }

    /// Whether `user` may store `object` of `resource` in `namespace`, as
    /// it will be stored (after any patch), beyond the verb they were
    /// allowed: for what an object's content reaches. Called on create,
    /// update and patch, dry runs included; `Err` carries the reason for
    /// the `403`. The default admits everything.
    fn admit_write(
        &self,
        user: &User,
        resource: &Resource,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<(), String> {
        let _ = (user, resource, namespace, object);
        Ok(())
    }

    /// The route of `path` if the extension serves it (checked before the
    /// Kubernetes paths, so an extension can take a path under its own API
    /// group); `method` is the request's, for the route's attributes.
    fn route(&self, method: &Method, path: &str) -> Option<ExtensionRoute> {
        let _ = (method, path);
        None
    }

    /// Answers a request on one of [`Extension::route`]'s routes.
    fn call(&self, call: Call) -> impl Future<Output = Result<Response<ApiBody>, ApiError>> + Send {
        async move {
            Err(ApiError::NotFound(format!(
                "nothing serves {}",
                call.route.endpoint
            )))
        }
    }

    /// How many watches may be open at once, per user and in all; one more
    /// gets `429 TooManyRequests`. Called once, when the server starts. The
    /// default is no limit, as in kube-apiserver.
    fn watch_limits(&self) -> WatchLimits {
        WatchLimits::UNLIMITED
    }

    /// API groups that belong to the extension's kinds alone: a
    /// CustomResourceDefinition in one is refused, and one stored before
    /// is not served (and deleting it deletes nothing else). Called once,
    /// when the server starts. The default reserves none.
    fn reserved_groups(&self) -> Vec<String> {
        Vec::new()
    }

    /// Counts a request the API refused for breaking `limit`. Must not
    /// block. The default counts nothing.
    fn count_limit_refusal(&self, limit: ApiLimit) {
        let _ = limit;
    }
}

/// An extension that adds nothing: a plain Kubernetes API server in which
/// every user the client CA vouches for may do everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Extension for Plain {}

/// A plain Kubernetes API server that authorizes as a cluster's does: RBAC
/// from its stored roles and bindings, `ServiceAccount` subjects included
/// ([`Rbac::with_service_accounts`]).
#[derive(Debug)]
pub struct RbacEnforced(Rbac);

impl RbacEnforced {
    /// RBAC over the roles and bindings in `objects`.
    pub fn new(objects: ObjectStore) -> Self {
        Self(Rbac::new(objects).with_service_accounts())
    }
}

impl Extension for RbacEnforced {
    fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
        self.0.authorize(user, attributes)
    }

    fn rbac(&self) -> Option<&Rbac> {
        Some(&self.0)
    }
}
