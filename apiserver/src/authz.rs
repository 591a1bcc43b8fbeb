//! The one place a request's authorization is decided ([`decide`], on what
//! the request asks to do: [`Attributes`]), and the reviews that let a
//! client ask about its own identity and rights (`kubectl auth can-i`,
//! `kubectl auth whoami`). Who may do what is the extension's policy
//! ([`crate::Extension::authorize`]).

use crate::Denied;
use serde_json::{json, Value};

use super::attributes::Attributes;
use super::extension::Extension;
use super::tls::User;
use super::ApiError;

/// The paths every authenticated user may `get`, as kube-apiserver's
/// `system:discovery` and `system:public-info-viewer` ClusterRoles grant
/// them (a trailing `*` is a prefix).
const DISCOVERY_PATHS: [&str; 11] = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
];

fn is_discovery_path(path: &str) -> bool {
    DISCOVERY_PATHS
        .iter()
        .any(|allowed| match allowed.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == *allowed,
        })
}

/// Whether `user` may do what `attributes` says. Every authenticated user
/// may read discovery and ask about their own rights, as in kube-apiserver
/// (`system:discovery`, `system:basic-user`); the rest is the extension's
/// decision.
pub(super) fn decide<E: Extension>(
    extension: &E,
    user: &User,
    attributes: &Attributes,
) -> Result<(), Denied> {
    match attributes {
        Attributes::Discovery | Attributes::SelfReview => Ok(()),
        Attributes::NonResource { verb, path } if verb == "get" && is_discovery_path(path) => {
            Ok(())
        }
        Attributes::Resource { .. } | Attributes::NonResource { .. } => {
            extension.authorize(user, attributes)
        }
    }
}

/// Answers a `SelfSubjectAccessReview` (what `kubectl auth can-i` sends)
/// for `user`: the request with a `status` saying whether it is allowed.
pub(super) fn access_review<E: Extension>(
    extension: &E,
    user: &User,
    review: Value,
) -> Result<Value, ApiError> {
    let Value::Object(mut review) = review else {
        return Err(ApiError::BadRequest(
            "a SelfSubjectAccessReview must be an object".into(),
        ));
    };
    let spec = review
        .get("spec")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::Invalid {
            field: "spec".into(),
            message: "Required value".into(),
        })?;
    let attributes = if let Some(resource) = spec.get("resourceAttributes") {
        let field = |name: &str| {
            resource
                .get(name)
                .and_then(Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        Attributes::Resource {
            verb: field("verb").unwrap_or_default(),
            group: field("group").unwrap_or_default(),
            resource: field("resource").unwrap_or_default(),
            subresource: field("subresource"),
            namespace: field("namespace"),
            name: field("name"),
        }
    } else if let Some(asked) = spec.get("nonResourceAttributes") {
        let field = |name: &str| {
            asked
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Attributes::NonResource {
            verb: field("verb"),
            path: field("path"),
        }
    } else {
        return Err(ApiError::Invalid {
            field: "spec.resourceAttributes".into(),
            message: "exactly one of resourceAttributes and nonResourceAttributes must be set"
                .into(),
        });
    };
    let decision = decide(extension, user, &attributes);
    let status = match &decision {
        Ok(()) => json!({"allowed": true, "reason": "allowed by the server's policy"}),
        Err(denied) => json!({"allowed": false, "reason": denied.reason()}),
    };
    review.insert("apiVersion".into(), json!("authorization.k8s.io/v1"));
    review.insert("kind".into(), json!("SelfSubjectAccessReview"));
    review.insert("status".into(), status);
    Ok(Value::Object(review))
}

/// Answers a `SelfSubjectReview` (what `kubectl auth whoami` sends).
pub(super) fn self_review(user: &User) -> Value {
    let mut groups = user.groups.clone();
    groups.push("system:authenticated".into());
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": user.name, "groups": groups}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attributes::forbidden;

    /// Lets users in `operators` create, and everyone read.
    struct Policy;

    impl Extension for Policy {
        fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Denied> {
            let Attributes::Resource { verb, .. } = attributes else {
                return Err("not a resource request".into());
            };
            if verb == "get" || user.groups.iter().any(|group| group == "operators") {
                Ok(())
            } else {
                Err(format!("{} may not {verb}", user.name).into())
            }
        }
    }

    fn user(groups: &[&str]) -> User {
        User {
            name: "someone".into(),
            groups: groups.iter().map(|group| group.to_string()).collect(),
        }
    }

    #[test]
    fn discovery_and_self_reviews_need_no_policy() {
        let nobody = user(&[]);
        assert!(decide(&Policy, &nobody, &Attributes::Discovery).is_ok());
        assert!(decide(&Policy, &nobody, &Attributes::SelfReview).is_ok());
        let create = Attributes::Resource {
            verb: "create".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: None,
            namespace: None,
            name: None,
        };
        assert_eq!(
            decide(&Policy, &nobody, &create),
            Err("someone may not create".into())
        );
    }

    #[test]
    fn discovery_paths_are_everyones_and_other_paths_the_policys() {
        let nobody = user(&[]);
        let path = |verb: &str, path: &str| Attributes::NonResource {
            verb: verb.into(),
            path: path.into(),
        };
        for allowed in [
            "/api",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
            "/healthz",
        ] {
            assert!(
                decide(&Policy, &nobody, &path("get", allowed)).is_ok(),
                "{allowed}"
            );
        }
        for asked in [
            path("get", "/metrics"),
            path("post", "/apis"),
            path("get", "/apiss"),
        ] {
            assert_eq!(
                decide(&Policy, &nobody, &asked),
                Err("not a resource request".into())
            );
        }
        let review =
            json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}});
        let answered = access_review(&Policy, &nobody, review).expect("a review");
        assert_eq!(answered["status"]["allowed"], json!(false));
        let review =
            json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/version"}}});
        let answered = access_review(&Policy, &nobody, review).expect("a review");
        assert_eq!(answered["status"]["allowed"], json!(true));
        assert_eq!(
            forbidden(&nobody, &path("get", "/metrics")),
            "forbidden: User \"someone\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn access_reviews_answer_truthfully() {
        let body = json!({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"namespace":"default","verb":"create","group":"apps","resource":"deployments"}}});
        let viewer = access_review(&Policy, &user(&[]), body.clone()).expect("a review");
        assert_eq!(viewer["status"]["allowed"], json!(false));
        let operator = access_review(&Policy, &user(&["operators"]), body).expect("a review");
        assert_eq!(operator["status"]["allowed"], json!(true));
        assert_eq!(
            operator["spec"]["resourceAttributes"]["verb"],
            json!("create")
        );
        assert!(access_review(&Policy, &user(&[]), json!({"spec": {}})).is_err());
        assert!(access_review(&Policy, &user(&[]), json!("not an object")).is_err());
    }
}
