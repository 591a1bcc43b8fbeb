//! Which of relaymesh's paths a request is on: the endpoint that answers
//! it, the methods that endpoint takes, what the request asks of the
//! policy, and how large a body it may send. The API server asks before it
//! reads the body or authorizes anyone, so routing looks at nothing but
//! the method and the path.

use hyper::Method;
use relaymesh_apiserver::http::MAX_JSON_BODY;
use relaymesh_apiserver::{Attributes, ExtensionRoute};
use relaymesh_protocol::limits::MAX_BUNDLE_LEN;

use super::groups::VERSION;
use super::policy;
use crate::placement::RELAYMESH_GROUP;

/// The endpoints of [`route`].
pub(super) mod endpoint {
    pub(in crate::api) const JOIN_TOKENS: &str = "jointokens";
    pub(in crate::api) const JOIN_TOKEN: &str = "jointoken";
    pub(in crate::api) const REVOCATIONS: &str = "revocations";
    pub(in crate::api) const MOVES: &str = "moves";
    pub(in crate::api) const MESH_CA_ROTATIONS: &str = "meshcarotations";
    pub(in crate::api) const API_CERT_ROTATIONS: &str = "apicertificaterotations";
    pub(in crate::api) const API_CA_ROTATIONS: &str = "apicarotations";
    pub(in crate::api) const TOKEN_KEY_ROTATIONS: &str = "tokenkeyrotations";
    pub(in crate::api) const CLUSTER_LABELS: &str = "clusterlabels";
    pub(in crate::api) const CORDONS: &str = "cordons";
    pub(in crate::api) const USER_CERTIFICATES: &str = "usercertificates";
    pub(in crate::api) const USER_CERTIFICATE: &str = "usercertificate";
    pub(in crate::api) const BUNDLES: &str = "bundles";
    pub(in crate::api) const EXPLAIN: &str = "explain";
    pub(in crate::api) const LINK: &str = "link";
    pub(in crate::api) const OBJECT: &str = "object";
    pub(in crate::api) const EVENTS: &str = "events";
    pub(in crate::api) const SUBTREE: &str = "subtree";
    pub(in crate::api) const DASHBOARD: &str = "dashboard";
}

const GET: &[Method] = &[Method::GET];
const GET_POST: &[Method] = &[Method::GET, Method::POST];
const POST: &[Method] = &[Method::POST];
const DELETE: &[Method] = &[Method::DELETE];

/// Every endpoint but the bundle push reads JSON, if anything; a delete
/// too, since kubectl and client-go send DeleteOptions with it.
const JSON: usize = MAX_JSON_BODY as usize;

/// The route of a request with `method` on `path`, if relaymesh serves it
/// (`None` leaves it to the Kubernetes API server).
pub(super) fn route(method: &Method, path: &str) -> Option<ExtensionRoute> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match segments.as_slice() {
        ["apis", RELAYMESH_GROUP, VERSION, resource] => collection(method == Method::GET, resource),
        ["apis", RELAYMESH_GROUP, VERSION, resource, name] => named(resource, name),
        ["apis", RELAYMESH_GROUP, VERSION, resource, name, below @ ..] => {
            subresource(resource, name, below)
        }
        ["relaymesh", VERSION, rest @ ..] => raw(rest),
        ["dashboard", ..] => {
            let name = crate::dashboard::asset_name(path)?;
            let attributes = Attributes::NonResource {
                verb: "get".into(),
                path: path.to_string(),
            };
            extension_route(endpoint::DASHBOARD, &[name], GET, attributes, 0)
        }
        _ => None,
    }
}

/// `/apis/relaymesh.dev/v1alpha1/RESOURCE`: a read lists the collection
/// (or gets the one object that says where a rotation stands); a write
/// needs the collection's own verb, which only admins hold by default.
fn collection(read: bool, resource: &str) -> Option<ExtensionRoute> {
    let listed = |write| if read { "list" } else { write };
    let rotation = |write| if read { "get" } else { write };
    let (endpoint, methods, verb) = match resource {
        "jointokens" => (endpoint::JOIN_TOKENS, GET_POST, listed(policy::ISSUE)),
        "revocations" => (endpoint::REVOCATIONS, GET_POST, listed(policy::REVOKE)),
        "apicertificaterotations" => (
            endpoint::API_CERT_ROTATIONS,
            GET_POST,
            rotation(policy::ROTATE),
        ),
        "tokenkeyrotations" => (
            endpoint::TOKEN_KEY_ROTATIONS,
            GET_POST,
            rotation(policy::ROTATE),
        ),
        "apicarotations" => (
            endpoint::API_CA_ROTATIONS,
            GET_POST,
            rotation(policy::ROTATE),
        ),
        "meshcarotations" => (
            endpoint::MESH_CA_ROTATIONS,
            GET_POST,
            rotation(policy::ROTATE),
        ),
        "clusterlabels" => (endpoint::CLUSTER_LABELS, POST, "create"),
        "cordons" => (endpoint::CORDONS, POST, "create"),
        "moves" => (endpoint::MOVES, GET_POST, listed(policy::MOVE)),
        "usercertificates" => (endpoint::USER_CERTIFICATES, GET_POST, listed(policy::ISSUE)),
        _ => return None,
    };
    extension_route(endpoint, &[], methods, own(verb, resource, None), JSON)
}

/// `/apis/relaymesh.dev/v1alpha1/RESOURCE/NAME`: revoking one join token
/// or one user. Other names are the Kubernetes API server's to serve.
fn named(resource: &str, name: &str) -> Option<ExtensionRoute> {
    let endpoint = match resource {
        "jointokens" => endpoint::JOIN_TOKEN,
        "usercertificates" => endpoint::USER_CERTIFICATE,
        _ => return None,
    };
    let attributes = own_named(policy::REVOKE, resource, None, None, name);
    extension_route(endpoint, &[name], DELETE, attributes, JSON)
}

/// `/apis/relaymesh.dev/v1alpha1/RESOURCE/NAME/...`: what the tree knows
/// only below the root, asked on demand of one node.
fn subresource(resource: &str, name: &str, below: &[&str]) -> Option<ExtensionRoute> {
    match (resource, below) {
        ("agents" | "relays", ["link"]) => extension_route(
            endpoint::LINK,
            &[resource, name],
            GET,
            own_named("get", resource, Some("link"), None, name),
            JSON,
        ),
        ("clusters", [subresource @ ("object" | "events")]) => extension_route(
            if *subresource == "object" {
                endpoint::OBJECT
            } else {
                endpoint::EVENTS
            },
            &[name],
            GET,
            own_named("get", "clusters", Some(subresource), None, name),
            JSON,
        ),
        ("relays", ["placements", namespace, placement]) => extension_route(
            endpoint::SUBTREE,
            &[name, namespace, placement],
            GET,
            own_named("get", "relays", Some("placements"), None, name),
            JSON,
        ),
        _ => None,
    }
}

/// `/relaymesh/v1alpha1/...`: the paths that are no Kubernetes kind, the
/// raw bundle push and the placement explainer.
fn raw(rest: &[&str]) -> Option<ExtensionRoute> {
    match rest {
        ["bundles"] => extension_route(
            endpoint::BUNDLES,
            &[],
            POST,
            own("create", "bundles", None),
            MAX_BUNDLE_LEN as usize,
        ),
        ["explain", namespace, name] => extension_route(
            endpoint::EXPLAIN,
            &[namespace, name],
            GET,
            own_named("get", "placements", None, Some(namespace), name),
            JSON,
        ),
        _ => None,
    }
}

/// The route to `endpoint`, with the `arguments` it reads from the path.
fn extension_route(
    endpoint: &'static str,
    arguments: &[&str],
    methods: &'static [Method],
    attributes: Attributes,
    body_limit: usize,
) -> Option<ExtensionRoute> {
    Some(ExtensionRoute {
        endpoint,
        arguments: arguments
            .iter()
            .map(|argument| argument.to_string())
            .collect(),
        methods,
        attributes,
        body_limit,
    })
}

/// What a request on one of relaymesh's paths asks, for the policy.
fn own(verb: &str, resource: &str, namespace: Option<&str>) -> Attributes {
    Attributes::Resource {
        verb: verb.to_string(),
        group: RELAYMESH_GROUP.to_string(),
        resource: resource.to_string(),
        subresource: None,
        namespace: namespace.map(str::to_string),
        name: None,
    }
}

/// What a request on one named object of relaymesh's asks.
fn own_named(
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: Option<&str>,
    name: &str,
) -> Attributes {
    Attributes::Resource {
        verb: verb.to_string(),
        group: RELAYMESH_GROUP.to_string(),
        resource: resource.to_string(),
        subresource: subresource.map(str::to_string),
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::{ISSUE, REVOKE};
    use super::*;

    #[test]
    fn own_paths_route_with_their_verbs_and_limits() {
        let route = |method: Method, path: &str| super::route(&method, path);
        let tokens = "/apis/relaymesh.dev/v1alpha1/jointokens";
        let listed = route(Method::GET, tokens).expect("a route");
        assert_eq!(listed.attributes, own("list", "jointokens", None));
        let created = route(Method::POST, tokens).expect("a route");
        assert_eq!(created.attributes, own(ISSUE, "jointokens", None));
        assert_eq!(created.methods, [Method::GET, Method::POST]);

        let revoked = route(Method::DELETE, &format!("{tokens}/00ff")).expect("a route");
        assert_eq!(revoked.arguments, ["00ff"]);
        assert_eq!(
            revoked.attributes,
            own_named(REVOKE, "jointokens", None, None, "00ff")
        );
        // kubectl and client-go send DeleteOptions with a delete.
        assert_eq!(revoked.body_limit, MAX_JSON_BODY as usize);

        let bundles = route(Method::POST, "/relaymesh/v1alpha1/bundles").expect("a route");
        assert_eq!(bundles.body_limit, MAX_BUNDLE_LEN as usize);
        let explain = route(Method::GET, "/relaymesh/v1alpha1/explain/shop/web").expect("a route");
        assert_eq!(explain.arguments, ["shop", "web"]);
        assert_eq!(
            explain.attributes,
            own_named("get", "placements", None, Some("shop"), "web")
        );

        let link = route(
            Method::GET,
            "/apis/relaymesh.dev/v1alpha1/agents/edge-7/link",
        );
        let link = link.expect("a route");
        assert_eq!(link.arguments, ["agents", "edge-7"]);
        assert_eq!(link.methods, [Method::GET]);
        let Attributes::Resource { subresource, .. } = &link.attributes else {
            panic!("{:?}", link.attributes);
        };
        assert_eq!(subresource.as_deref(), Some("link"));
        let clusters = "/apis/relaymesh.dev/v1alpha1/clusters/edge-7/link";
        assert!(route(Method::GET, clusters).is_none(), "not a node kind");

        for subresource in ["object", "events"] {
            let path = format!("/apis/relaymesh.dev/v1alpha1/clusters/edge-7/{subresource}");
            let observed = route(Method::GET, &path).expect("a route");
            assert_eq!(observed.arguments, ["edge-7"]);
            assert_eq!(observed.methods, [Method::GET]);
            let Attributes::Resource {
                verb,
                resource,
                subresource: asked,
                ..
            } = &observed.attributes
            else {
                panic!("{:?}", observed.attributes);
            };
            assert_eq!((verb.as_str(), resource.as_str()), ("get", "clusters"));
            assert_eq!(asked.as_deref(), Some(subresource));
        }

        for kubernetes in [
            "/api/v1/namespaces",
            "/apis/relaymesh.dev/v1alpha1/placements",
        ] {
            assert!(route(Method::GET, kubernetes).is_none(), "{kubernetes}");
        }
    }
}
