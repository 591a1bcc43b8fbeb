use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use serde_json::json;

use super::*;

#[test]
fn minor_versions() {
    assert_eq!(minor_version("1", "32", "v1.32.0"), "1.32");
    assert_eq!(minor_version("1", "31+", "v1.31.4-eks-1"), "1.31");
    assert_eq!(minor_version("", "", "v1.30.2+k3s1"), "1.30");
}

/// An API server that serves discovery of `/api/v1` and `/apis/apps/v1`
/// and counts the requests for each path.
#[derive(Clone, Default)]
struct Discovery {
    asked: Arc<Mutex<Vec<String>>>,
    /// Whether `apps/v1` serves DaemonSets yet (a CRD applied later, in
    /// effect).
    daemon_sets: Arc<AtomicBool>,
}

impl Discovery {
    fn asked(&self, path: &str) -> usize {
        let asked = self.asked.lock().expect("not poisoned");
        asked.iter().filter(|asked| *asked == path).count()
    }

    fn resources(&self, path: &str) -> Option<serde_json::Value> {
        let resource = |name: &str, kind: &str, namespaced: bool| {
            json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                   "verbs": ["get", "list", "watch", "patch", "delete"]})
        };
        match path {
            "/api/v1" => Some(json!({
                "kind": "APIResourceList", "groupVersion": "v1",
                "resources": [
                    resource("namespaces", "Namespace", false),
                    resource("configmaps", "ConfigMap", true),
                    resource("services", "Service", true),
                    resource("services/status", "Service", true),
                ],
            })),
            "/apis/apps/v1" => {
                let mut resources = vec![resource("deployments", "Deployment", true)];
                if self.daemon_sets.load(Ordering::SeqCst) {
                    resources.push(resource("daemonsets", "DaemonSet", true));
                }
                Some(json!({"kind": "APIResourceList", "groupVersion": "apps/v1",
                            "resources": resources}))
            }
            _ => None,
        }
    }
}

impl tower_service::Service<Request<kube::client::Body>> for Discovery {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let path = request.uri().path().to_string();
        self.asked.lock().expect("not poisoned").push(path.clone());
        let response = match self.resources(&path) {
            Some(body) => Response::new(Full::new(Bytes::from(body.to_string()))),
            None => {
                let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
                *response.status_mut() = http::StatusCode::NOT_FOUND;
                response
            }
        };
        ready(Ok(response))
    }
}

#[tokio::test]
async fn kinds_ask_discovery_once_per_group_version() {
    let server = Discovery::default();
    let mut kinds = Kinds::new(Client::new(server.clone(), "default"));
    for kind in ["Namespace", "ConfigMap", "Service", "ConfigMap"] {
        let found = kinds
            .resolve(&GroupVersionKind::gvk("", "v1", kind))
            .await
            .expect("served");
        assert_eq!(found.resource.kind, kind);
        assert_eq!(found.namespaced, kind != "Namespace");
    }
    let deployment = kinds
        .resolve(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
        .await
        .expect("served");
    assert_eq!(deployment.resource.plural, "deployments");
    assert_eq!(
        server.asked("/api/v1"),
        1,
        "one request for four kinds of v1"
    );
    assert_eq!(server.asked("/apis/apps/v1"), 1);
}

#[tokio::test]
async fn a_kind_not_served_yet_is_asked_again() {
    let server = Discovery::default();
    let mut kinds = Kinds::new(Client::new(server.clone(), "default"));
    let daemon_set = GroupVersionKind::gvk("apps", "v1", "DaemonSet");
    let error = match kinds.resolve(&daemon_set).await {
        Err(error) => error,
        Ok(_) => panic!("DaemonSets are not served yet"),
    };
    assert!(error.to_string().contains("DaemonSet"), "{error}");
    server.daemon_sets.store(true, Ordering::SeqCst);
    kinds.resolve(&daemon_set).await.expect("served now");
    assert_eq!(server.asked("/apis/apps/v1"), 2);
    // Known now, with Deployment beside it: no further request.
    kinds
        .resolve(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
        .await
        .expect("served");
    assert_eq!(server.asked("/apis/apps/v1"), 2);
    kinds.forget(&daemon_set);
    kinds.resolve(&daemon_set).await.expect("served");
    assert_eq!(server.asked("/apis/apps/v1"), 3, "forgotten, asked again");
}
