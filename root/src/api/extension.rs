//! [`Relaymesh`], what the Kubernetes API server is given to serve
//! relaymesh: it joins relaymesh's kinds, routes and handlers to the
//! daemon's backend and to the RBAC objects the root stores. Each part's
//! work is done in its own module; this one only says which part answers
//! which of the API server's questions.

use std::sync::Arc;

use hyper::{Method, Response};
use relaymesh_apiserver::http::ApiBody;
use relaymesh_apiserver::objects::ObjectStore;
use relaymesh_apiserver::rbac::Rbac;
use relaymesh_apiserver::{
    ApiError, ApiLimit, Attributes, Call, Denied, Extension, ExtensionRoute, Resource, User,
};
use serde_json::Value;

use super::admission::unknown_names;
use super::backend::Backend;
use super::groups::MULTICLUSTER_GROUP;
use super::inventory::{self, View};
use super::limits::counted_as;
use super::resources::own_resources;
use super::users::{self, ApiAuthorities};
use super::{handlers, policy, routing};
use crate::placement::RELAYMESH_GROUP;

/// relaymesh's kinds and paths on the Kubernetes API server, for the
/// root: what `backend` knows of the tree, and the API CA that signs user
/// certificates.
pub struct Relaymesh<B> {
    backend: Arc<B>,
    authorities: ApiAuthorities,
    rbac: Rbac,
    objects: ObjectStore,
    specs: crate::placement::Specs,
}

impl<B: Backend> Relaymesh<B> {
    /// The extension serving `backend`'s tree; `authorities` sign user
    /// certificates; requests are authorized with the RBAC objects stored
    /// in `objects`; Placements' specs are read through `specs`.
    pub fn new(
        backend: Arc<B>,
        authorities: ApiAuthorities,
        objects: ObjectStore,
        specs: crate::placement::Specs,
    ) -> Self {
        Self {
            backend,
            authorities,
            rbac: Rbac::new(objects.clone()),
            objects,
            specs,
        }
    }
}

impl<B: Backend> Extension for Relaymesh<B> {
    fn resources(&self) -> Vec<Resource> {
        let backend = Arc::clone(&self.backend);
        own_resources(self.specs.clone(), move |names| {
            unknown_names(&backend.inventory().records, names)
        })
    }

    fn objects(&self, resource: &Resource) -> Vec<Value> {
        let view = match (resource.group(), resource.plural()) {
            (RELAYMESH_GROUP, "clusters") => View::Clusters,
            (RELAYMESH_GROUP, "relays") => View::Relays,
            (RELAYMESH_GROUP, "agents") => View::Agents,
            (MULTICLUSTER_GROUP, "clusterprofiles") => View::ClusterProfiles,
            _ => return Vec::new(),
        };
        inventory::objects(view, &self.backend.inventory())
    }

    fn views_unavailable(&self) -> Option<String> {
        self.backend.standby()
    }

    fn objects_version(&self, resource: &Resource) -> Option<u64> {
        let views = [RELAYMESH_GROUP, MULTICLUSTER_GROUP];
        views
            .contains(&resource.group())
            .then(|| self.backend.inventory().version)
    }

    fn refuses_user(&self, user: &User) -> Option<String> {
        let revoked_unix = self.backend.user_revoked(&user.name)?;
        Some(users::revoked_message(&user.name, revoked_unix))
    }

    fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
        // The dashboard's files are the same for everyone and hold no
        // data; what it shows is read with the user's own rights.
        if let Attributes::NonResource { verb, path } = attributes {
            if verb == "get" && crate::dashboard::is_asset_path(path) {
                return Ok(());
            }
        }
        self.rbac.authorize(user, attributes)
    }

    fn rbac(&self) -> Option<&Rbac> {
        Some(&self.rbac)
    }

    fn admit_write(
        &self,
        user: &User,
        resource: &Resource,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<(), String> {
        if (resource.group(), resource.plural()) == (RELAYMESH_GROUP, "placements") {
            return policy::admit_placement(&self.rbac, &self.objects, user, namespace, object);
        }
        Ok(())
    }

    fn watch_limits(&self) -> relaymesh_apiserver::WatchLimits {
        self.backend.watch_limits()
    }

    /// relaymesh.dev is relaymesh's alone: a CRD there would sit beside
    /// (or be hidden by) the built-in handlers, and clients would see two
    /// definitions.
    fn reserved_groups(&self) -> Vec<String> {
        vec![RELAYMESH_GROUP.to_string()]
    }

    fn route(&self, method: &Method, path: &str) -> Option<ExtensionRoute> {
        routing::route(method, path)
    }

    async fn call(&self, call: Call) -> Result<Response<ApiBody>, ApiError> {
        if let Some(reason) = self.backend.standby() {
            return Err(ApiError::Unavailable(reason));
        }
        handlers::call(&*self.backend, &self.authorities, &self.specs, call).await
    }

    fn count_limit_refusal(&self, limit: ApiLimit) {
        self.backend.count_limit_refusal(counted_as(limit));
    }
}

#[cfg(test)]
mod tests {
    use relaymesh_node::daemon::root_services::Inventory;
    use relaymesh_protocol::BundleId;
    use serde_json::json;

    use super::super::admission::validate_placement;
    use super::super::types::{IssuedToken, TokenRequest};
    use super::*;
    use crate::placement::Specs;

    /// A backend with an empty tree that refuses everything.
    struct NoTree;

    impl Backend for NoTree {
        fn inventory(&self) -> Inventory {
            Inventory::default()
        }

        fn create_token(&self, _request: TokenRequest) -> Result<IssuedToken, ApiError> {
            Err(ApiError::Forbidden("no tokens here".into()))
        }

        async fn push_bundle(&self, _name: String, _bytes: Vec<u8>) -> Result<BundleId, ApiError> {
            Err(ApiError::Forbidden("no bundles here".into()))
        }
    }

    fn extension() -> (tempfile::TempDir, Relaymesh<NoTree>) {
        let mesh = relaymesh_node::pki::create_mesh("root", &["127.0.0.1".into()]).expect("a mesh");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = sled::open(dir.path()).expect("sled opens");
        let objects = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
        let authorities = ApiAuthorities::new(
            mesh.api_authority.clone(),
            std::slice::from_ref(&mesh.api_authority.cert_der),
        );
        let extension = Relaymesh::new(Arc::new(NoTree), authorities, objects, Default::default());
        (dir, extension)
    }

    #[test]
    fn views_come_from_the_inventory_and_placements_are_checked() {
        let (_dir, extension) = extension();
        let resources = extension.resources();
        let clusters = resources
            .iter()
            .find(|resource| resource.plural() == "clusters")
            .expect("clusters");
        assert!(clusters.is_view());
        assert!(extension.objects(clusters).is_empty());
        let mut placement = json!({
            "metadata": {"name": "p"},
            "spec": {
                "workloads": [{"kind": "ConfigMap"}],
                "clusters": {"names": ["edge-1"]},
                "maxClusters": 2,
            },
        });
        assert!(validate_placement(&Specs::default(), Some("shop"), &placement).is_ok());
        placement["spec"]["maxClusters"] = json!("two");
        let refused = validate_placement(&Specs::default(), Some("shop"), &placement);
        assert!(
            matches!(&refused, Err(ApiError::Invalid { field, .. }) if field == "spec.maxClusters"),
            "{refused:?}"
        );
        // A status rule's CEL is compiled on every write: a 422 that names
        // the field, the rule and the position.
        placement["spec"]["maxClusters"] = json!(2);
        placement["spec"]["statusRules"] =
            json!([{"name": "ready", "aggregate": "sum", "select": "object.status.("}]);
        let refused = validate_placement(&Specs::default(), Some("shop"), &placement);
        assert!(
            matches!(&refused, Err(ApiError::Invalid { field, message })
                if field == "spec.statusRules[0].select"
                    && message.starts_with("rule \"ready\": Syntax error at 1:")),
            "{refused:?}"
        );
    }
}
