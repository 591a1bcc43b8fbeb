//! The root's API over real TLS and HTTP, against an in-memory backend:
//! authentication, the routes of this slice, errors as `metav1.Status`, and
//! `relayctl`'s client and kubeconfig handling end to end.

use std::time::Duration;

use relaymesh_protocol::{BundleId, Role};
use relaymesh_root::api::TokenRequest;
use relaymesh_root::client::{tree, Client, ClientError};
use relaymesh_root::kubeconfig::{self, ClientCredentials};
use serde_json::{json, Value};
use tokio::net::TcpListener;

#[path = "support/pki.rs"]
mod pki;
#[path = "support/server.rs"]
mod server;

use pki::Pki;
use server::{lock, Server};

/// The status code and JSON body of a reply.
async fn json_reply(response: reqwest::Response) -> (u16, Value) {
    let code = response.status().as_u16();
    let body = response.json().await.expect("a JSON body");
    (code, body)
}

fn join_token(spec: Value) -> Value {
    json!({"apiVersion": "relaymesh.dev/v1alpha1", "kind": "JoinToken", "spec": spec})
}

#[tokio::test]
async fn version_and_health() {
    let server = Server::start().await;
    let version = server
        .client(&server.pki.admin)
        .version()
        .await
        .expect("version");
    assert_eq!(version["major"], "1");
    assert_eq!(version["minor"], "33");
    assert!(
        version["gitVersion"]
            .as_str()
            .is_some_and(|text| text.starts_with("v1.33.0+relaymesh-")),
        "{version}"
    );

    // Health checks answer anyone, over h2 when offered.
    let response = server
        .raw(None)
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().await.expect("text"), "ok");

    // As kube-apiserver: a verbose list, one check, an excluded one, and a
    // 404 for a check that does not exist.
    let anyone = server.raw(None);
    let get = |path: &str| {
        let request = anyone.get(server.url(path));
        async move {
            let response = request.send().await.expect("a reply");
            let code = response.status().as_u16();
            (code, response.text().await.expect("text"))
        }
    };
    assert_eq!(
        get("/readyz?verbose").await,
        (
            200,
            "[+]ping ok\n[+]store ok\n[+]stored-objects ok\nreadyz check passed\n".into()
        )
    );
    assert_eq!(get("/livez/ping").await, (200, "ok".into()));
    assert_eq!(
        get("/healthz?verbose&exclude=store").await,
        (
            200,
            "[+]ping ok\n[+]store excluded: ok\nhealthz check passed\n".into()
        )
    );
    assert_eq!(get("/livez/etcd").await.0, 404);
    server.stop().await;
}

#[tokio::test]
async fn relays_agents_and_the_tree() {
    let server = Server::start().await;
    let client = server.client(&server.pki.admin);
    let relays = client.relays().await.expect("relays");
    let names: Vec<_> = relays
        .iter()
        .filter_map(|relay| relay["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["eu", "eu-west", "root", "us"]);
    let root = &relays[2];
    assert_eq!(root["kind"], "Relay");
    assert_eq!(root["status"]["subtreeSize"], 4);
    assert_eq!(root["status"]["children"], json!(["eu", "us"]));
    assert!(root["spec"].get("parent").is_none());
    let eu_west = &relays[1];
    assert_eq!(eu_west["spec"]["parent"], "eu");
    assert_eq!(eu_west["status"]["connected"], false);
    assert_eq!(
        eu_west["status"]["lastTransitionTime"],
        "2026-11-21T23:50:00Z"
    );
    assert_eq!(eu_west["metadata"]["labels"], json!({"region": "eu"}));

    let agents = client.agents().await.expect("agents");
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["kind"], "Agent");

    let nodes: Vec<Value> = relays.into_iter().chain(agents).collect();
    let tree = tree::build_tree(&nodes).expect("a root");
    assert_eq!(tree["name"], "root");
    assert_eq!(
        tree["children"][0]["children"][0]["children"][0]["name"],
        "edge-1"
    );
    let text = tree::render_text(&tree);
    assert!(text.starts_with("root "), "{text}");
    assert!(text.contains("│  └─ eu-west"), "{text}");

    // One object, and a missing one.
    let raw = server.raw(Some(&server.pki.admin));
    let one = raw
        .get(server.url("/apis/relaymesh.dev/v1alpha1/relays/eu"))
        .send()
        .await
        .expect("a reply");
    let (code, body) = json_reply(one).await;
    assert_eq!((code, body["metadata"]["name"].as_str()), (200, Some("eu")));
    let missing = raw
        .get(server.url("/apis/relaymesh.dev/v1alpha1/relays/edge-1"))
        .send()
        .await
        .expect("a reply");
    let (code, body) = json_reply(missing).await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(body["message"], "relays.relaymesh.dev \"edge-1\" not found");

    let list = raw
        .get(server.url("/apis/relaymesh.dev/v1alpha1/relays"))
        .send()
        .await
        .expect("a reply");
    let (code, body) = json_reply(list).await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "RelayList");
    assert_eq!(body["apiVersion"], "relaymesh.dev/v1alpha1");
    assert_eq!(body["metadata"], json!({"resourceVersion": ""}));
    server.stop().await;
}

#[tokio::test]
async fn join_tokens() {
    let server = Server::start().await;
    let client = server.client(&server.pki.admin);
    let issued = client
        .create_token(
            "eu-west-2",
            Role::Relay,
            &["eu".to_string()],
            Duration::from_secs(1800),
        )
        .await
        .expect("a token");
    assert_eq!(issued.token, "token-for-eu-west-2");
    assert_eq!(
        lock(&server.backend.token_requests).as_slice(),
        [TokenRequest {
            name: "eu-west-2".into(),
            role: Role::Relay,
            parent: Some("eu".into()),
            candidates: Vec::new(),
            ttl: Duration::from_secs(1800),
        }]
    );

    // The raw reply: 201, the object echoed with defaults and a status.
    let raw = server.raw(Some(&server.pki.admin));
    let url = server.url("/apis/relaymesh.dev/v1alpha1/jointokens");
    let request = join_token(json!({"name": "edge-2", "role": "agent"}));
    let reply = raw.post(&url).json(&request).send().await.expect("a reply");
    let (code, body) = json_reply(reply).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "JoinToken");
    assert_eq!(
        body["spec"],
        json!({"name": "edge-2", "role": "agent", "ttl": "1h"})
    );
    assert_eq!(body["status"]["token"], "token-for-edge-2");
    assert!(body["status"]["expirationTimestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    // Invalid fields are 422 and named.
    for (spec, field) in [
        (
            json!({"name": "e", "role": "agent", "ttl": "48h"}),
            "spec.ttl",
        ),
        (
            json!({"name": "e", "role": "agent", "ttl": "0s"}),
            "spec.ttl",
        ),
        (
            json!({"name": "e", "role": "agent", "ttl": "later"}),
            "spec.ttl",
        ),
        (json!({"name": "Not_A_Label", "role": "agent"}), "spec.name"),
        (json!({"name": "e", "role": "admin"}), "spec.role"),
    ] {
        let reply = raw
            .post(&url)
            .json(&join_token(spec.clone()))
            .send()
            .await
            .expect("a reply");
        let (code, body) = json_reply(reply).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (422, Some("Invalid")),
            "{spec}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{spec}: {message}");
    }
    let error = client
        .create_token("e", Role::Agent, &[], Duration::from_secs(2 * 86_400))
        .await
        .expect_err("too long");
    assert!(
        matches!(&error, ClientError::Api { code: 422, reason, message } if reason == "Invalid" && message.contains("spec.ttl")),
        "{error:?}"
    );

    // Backend errors keep their code; junk is a 400; huge bodies are 413.
    let error = client
        .create_token("taken", Role::Agent, &[], Duration::from_secs(60))
        .await
        .expect_err("taken");
    assert!(
        matches!(error, ClientError::Api { code: 409, .. }),
        "{error:?}"
    );
    let reply = raw.post(&url).body("{").send().await.expect("a reply");
    assert_eq!(json_reply(reply).await.0, 400);
    let huge = vec![b' '; 3 * 1024 * 1024 + 1];
    let reply = raw.post(&url).body(huge).send().await.expect("a reply");
    let (code, body) = json_reply(reply).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    server.stop().await;
}

#[tokio::test]
async fn authentication_and_authorization() {
    let server = Server::start().await;
    let url = server.url("/version");

    let reply = server.raw(None).get(&url).send().await.expect("a reply");
    let (code, body) = json_reply(reply).await;
    assert_eq!(code, 401);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["metadata"], json!({}));
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["reason"], "Unauthorized");
    assert_eq!(body["code"], 401);
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));

    let foreign = server.raw(Some(&server.pki.foreign_admin));
    let (code, body) = json_reply(foreign.get(&url).send().await.expect("a reply")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (401, Some("Unauthorized")),
        "{body}"
    );

    // A relay's link certificate chains to the mesh CA, not the API CA.
    let relay = server.raw(Some(&server.pki.relay));
    let (code, body) = json_reply(relay.get(&url).send().await.expect("a reply")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (401, Some("Unauthorized")),
        "{body}"
    );

    // A user of the API CA in no known group sees discovery, nothing else.
    let stranger = server.raw(Some(&server.pki.stranger));
    let (code, body) = json_reply(stranger.get(&url).send().await.expect("a reply")).await;
    assert_eq!(code, 200, "{body}");
    let error = server
        .client(&server.pki.stranger)
        .relays()
        .await
        .expect_err("forbidden");
    assert!(
        error
            .to_string()
            .starts_with("Error from server (Forbidden): "),
        "{error}"
    );

    // Even unknown paths need a certificate first, as in kube-apiserver.
    let reply = server
        .raw(None)
        .get(server.url("/nope"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 401);
    server.stop().await;
}

#[tokio::test]
async fn unknown_paths_and_methods() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    for path in [
        "/nope",
        "/apis/relaymesh.dev/v1alpha1/widgets",
        "/api/v1/bindings",
    ] {
        let reply = admin.get(server.url(path)).send().await.expect("a reply");
        let (code, body) = json_reply(reply).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (404, Some("NotFound")),
            "{path}"
        );
    }
    let reply = admin
        .delete(server.url("/version"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(
        reply.headers().get("allow").map(|v| v.as_bytes()),
        Some(&b"GET"[..])
    );
    let (code, body) = json_reply(reply).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    server.stop().await;
}

#[tokio::test]
async fn bundle_push() {
    let server = Server::start().await;
    let bytes = b"an opaque bundle".repeat(1000);
    let (id, size) = server
        .client(&server.pki.admin)
        .push_bundle("demo", bytes.clone())
        .await
        .expect("pushed");
    assert_eq!(id, BundleId::of(&bytes));
    assert_eq!(size, bytes.len() as u64);
    assert_eq!(
        lock(&server.backend.bundles).as_slice(),
        [("demo".to_string(), bytes)]
    );

    // The name is required and checked.
    let admin = server.raw(Some(&server.pki.admin));
    let reply = admin
        .post(server.url("/relaymesh/v1alpha1/bundles"))
        .body("x")
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 400);
    let reply = admin
        .post(server.url("/relaymesh/v1alpha1/bundles?name=Bad%20Name"))
        .body("x")
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 422);
    server.stop().await;
}

#[tokio::test]
async fn kubeconfig_to_client() {
    let server = Server::start().await;
    let directory = tempfile::tempdir().expect("a temporary directory");
    let pki = &server.pki;

    // The inline kubeconfig `relay init` writes, found through a KUBECONFIG list.
    let inline = directory.path().join("root.kubeconfig");
    let text = kubeconfig::admin_kubeconfig(
        "relaymesh",
        &server.url(""),
        &pki.ca_pem,
        &pki.admin.cert_pem,
        &pki.admin.key_pem,
    );
    kubeconfig::write_private(&inline, &text).expect("written");
    let list =
        std::env::join_paths([directory.path().join("absent"), inline.clone()]).expect("joinable");
    let found = kubeconfig::resolve_path(None, Some(&list), None).expect("found");
    assert_eq!(found, inline);
    let credentials = kubeconfig::load_file(&found, None).expect("loaded");
    let client = Client::new(&credentials).expect("a client");
    assert_eq!(client.relays().await.expect("relays").len(), 4);

    // A kubeconfig with files relative to its own directory, given explicitly.
    let pki_directory = directory.path().join("pki");
    std::fs::create_dir(&pki_directory).expect("a directory");
    std::fs::write(pki_directory.join("ca.crt"), &pki.ca_pem).expect("written");
    std::fs::write(pki_directory.join("admin.crt"), &pki.admin.cert_pem).expect("written");
    std::fs::write(pki_directory.join("admin.key"), &pki.admin.key_pem).expect("written");
    let by_files = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mesh\n  cluster:\n    server: {}\n    certificate-authority: pki/ca.crt\nusers:\n- name: admin\n  user:\n    client-certificate: pki/admin.crt\n    client-key: pki/admin.key\ncontexts:\n- name: mesh\n  context: {{cluster: mesh, user: admin}}\n",
        server.url("")
    );
    let by_files_path = directory.path().join("files.kubeconfig");
    std::fs::write(&by_files_path, by_files).expect("written");
    let credentials = kubeconfig::load(Some(&by_files_path), Some("mesh")).expect("loaded");
    let client = Client::new(&credentials).expect("a client");
    assert_eq!(client.agents().await.expect("agents").len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn unreachable_server_is_one_clear_line() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("an address");
    drop(listener);
    let pki = Pki::new();
    let client = Client::new(&ClientCredentials {
        server: format!("https://{address}"),
        ca_pem: Some(pki.ca_pem.clone()),
        cert_pem: Some(pki.admin.cert_pem.clone()),
        key_pem: Some(pki.admin.key_pem.clone()),
        insecure_skip_tls_verify: false,
    })
    .expect("a client");
    let error = client.relays().await.expect_err("nothing listens");
    assert_eq!(
        error.to_string(),
        format!("cannot reach the root at https://{address}: connection refused")
    );
}

#[tokio::test]
async fn objects_crud_conflicts_and_watch() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/api/v1/namespaces/default/configmaps");
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let (code, created) = json_reply(
        admin
            .post(&url)
            .json(&object)
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201);
    let (code, body) = json_reply(
        admin
            .post(&url)
            .json(&object)
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );

    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let item = format!("{url}/a");
    let (code, body) =
        json_reply(admin.put(&item).json(&stale).send().await.expect("a reply")).await;
    assert_eq!((code, body["reason"].as_str()), (409, Some("Conflict")));

    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}});
    let (code, body) = json_reply(admin.post(&url).json(&bad).send().await.expect("a reply")).await;
    assert_eq!(
        (code, body["details"]["causes"][0]["field"].as_str()),
        (422, Some("metadata.name"))
    );
    let elsewhere = server.url("/api/v1/namespaces/nowhere/configmaps");
    let (code, body) = json_reply(
        admin
            .post(&elsewhere)
            .json(&object)
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (404, Some("namespaces \"nowhere\" not found"))
    );

    let (code, list) = json_reply(
        admin
            .get(format!("{url}?labelSelector=x%3Dy"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0));

    // A watch from a version the history never had: one ERROR event, 410.
    let reply = admin
        .get(format!("{url}?watch=1&resourceVersion=0&timeoutSeconds=1"))
        .send()
        .await
        .expect("a reply");
    let text = reply.text().await.expect("a body");
    let first: Value = serde_json::from_str(text.lines().next().expect("an event")).expect("JSON");
    assert_eq!(
        (
            first["type"].as_str(),
            first["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("a"))
    );
    server
        .objects
        .delete(&relaymesh_apiserver::objects::ObjectKey::new(
            "",
            "configmaps",
            Some("default"),
            "a",
        ))
        .expect("deletes");
    drop(server.objects.clone());
    let reply = admin
        .get(format!("{url}?watch=1&resourceVersion=2&timeoutSeconds=1"))
        .send()
        .await
        .expect("a reply");
    let text = reply.text().await.expect("a body");
    assert!(text.contains("\"DELETED\""), "{text}");
    server.stop().await;
}

/// What the official Python client's typed API sends: bodies without
/// `apiVersion` and `kind`, which kube-apiserver takes from the URL. A body
/// that names another API version is a 400, another kind a 422, as there.
#[tokio::test]
async fn type_meta_comes_from_the_url_when_the_body_leaves_it_out() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let send = |request: reqwest::RequestBuilder| async move {
        json_reply(request.send().await.expect("a reply")).await
    };

    let (code, namespace) = send(
        admin
            .post(server.url("/api/v1/namespaces"))
            .json(&json!({"metadata": {"name": "typed"}})),
    )
    .await;
    assert_eq!(code, 201, "{namespace}");
    assert_eq!(namespace["apiVersion"], "v1");
    assert_eq!(namespace["kind"], "Namespace");

    let maps = server.url("/api/v1/namespaces/typed/configmaps");
    let (code, map) = send(admin.post(&maps).json(&json!({
        "metadata": {"name": "settings"},
        "data": {"owner": "python"},
    })))
    .await;
    assert_eq!(code, 201, "{map}");
    assert_eq!(map["kind"], "ConfigMap");
    assert_eq!(map["metadata"]["namespace"], "typed");

    // A replace without type meta, as `replace_namespaced_config_map` sends.
    let (code, map) = send(admin.put(format!("{maps}/settings")).json(&json!({
        "metadata": {
            "name": "settings",
            "resourceVersion": map["metadata"]["resourceVersion"],
        },
        "data": {"owner": "python, again"},
    })))
    .await;
    assert_eq!(code, 200, "{map}");
    assert_eq!(map["apiVersion"], "v1");
    assert_eq!(map["data"]["owner"], "python, again");

    let (code, status) = send(
        admin
            .post(server.url("/apis/apps/v1/namespaces/typed/deployments"))
            .json(&json!({
                "apiVersion": "v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
            })),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "the API version in the data (v1) does not match the expected API version (apps/v1)"
    );

    let (code, status) = send(admin.post(&maps).json(&json!({
        "kind": "Secret",
        "metadata": {"name": "not-a-map"},
    })))
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "kind", "{status}");
    let (code, _) = send(admin.get(format!("{maps}/not-a-map"))).await;
    assert_eq!(code, 404, "nothing was stored");
}

/// Reads a watch's events, one JSON line at a time.
struct WatchLines {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl WatchLines {
    /// The next event.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return serde_json::from_slice(&line).expect("a JSON event");
            }
            let chunk = self
                .response
                .chunk()
                .await
                .expect("the watch goes on")
                .expect("the watch has not ended");
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// The next event that is not a bookmark, as (type, name, connected),
    /// or a panic after 30 s without one.
    async fn next_change(&mut self) -> (String, String, bool) {
        tokio::time::timeout(Duration::from_secs(30), self.next_change_forever())
            .await
            .expect("a change within 30 s (bookmarks aside)")
    }

    async fn next_change_forever(&mut self) -> (String, String, bool) {
        loop {
            let event = self.next().await;
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            if kind == "BOOKMARK" {
                continue;
            }
            let object = &event["object"];
            return (
                kind,
                object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                object["status"]["connected"] == true,
            );
        }
    }
}

/// `kubectl get clusters -w` shows every change: a watch on an inventory
/// resource sends what changed in the tree after its first `ADDED`s.
#[tokio::test]
async fn watches_on_inventory_resources_send_every_change() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let response = admin
        .get(server.url("/apis/relaymesh.dev/v1alpha1/clusters?watch=1&allowWatchBookmarks=true"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(response.status().as_u16(), 200);
    let mut watch = WatchLines {
        response,
        buffer: Vec::new(),
    };
    assert_eq!(
        watch.next_change().await,
        ("ADDED".into(), "edge-1".into(), true)
    );

    {
        let mut nodes = lock(&server.backend.nodes);
        for record in nodes.iter_mut().filter(|record| record.name == "edge-1") {
            *record = server::node("edge-1", Role::Agent, Some("eu-west"), false);
        }
        nodes.push(server::node("edge-2", Role::Agent, Some("us"), true));
    }
    let mut changes = vec![watch.next_change().await, watch.next_change().await];
    changes.sort();
    assert_eq!(
        changes,
        vec![
            ("ADDED".into(), "edge-2".into(), true),
            ("MODIFIED".into(), "edge-1".into(), false),
        ]
    );

    lock(&server.backend.nodes).retain(|record| record.name != "edge-1");
    assert_eq!(
        watch.next_change().await,
        ("DELETED".into(), "edge-1".into(), false)
    );
    server.stop().await;
}

/// `DELETE` on a collection deletes what its selectors match in the URL's
/// namespace, and answers with the list of what it deleted.
#[tokio::test]
async fn delete_collection_deletes_what_the_selectors_match() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let send = |request: reqwest::RequestBuilder| async move {
        json_reply(request.send().await.expect("a reply")).await
    };
    for namespace in ["shop", "other"] {
        let (code, body) = send(
            admin
                .post(server.url("/api/v1/namespaces"))
                .json(&json!({"metadata": {"name": namespace}})),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
            let (code, body) = send(
                admin
                    .post(server.url(&format!("/api/v1/namespaces/{namespace}/configmaps")))
                    .json(&json!({"metadata": {"name": name, "labels": {"tier": tier}}})),
            )
            .await;
            assert_eq!(code, 201, "{body}");
        }
    }
    let names = |list: &Value| -> Vec<String> {
        let mut names: Vec<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    let shop = server.url("/api/v1/namespaces/shop/configmaps");

    let (code, list) =
        send(admin.delete(format!("{shop}?labelSelector=tier%3Dweb&dryRun=All"))).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["a", "b"]);
    let (_, left) = send(admin.get(&shop)).await;
    assert_eq!(names(&left), ["a", "b", "c"], "a dry run deletes nothing");

    let (code, list) = send(admin.delete(format!("{shop}?labelSelector=tier%3Dweb"))).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(names(&list), ["a", "b"]);
    let (_, left) = send(admin.get(&shop)).await;
    assert_eq!(names(&left), ["c"]);
    let (_, other) = send(admin.get(server.url("/api/v1/namespaces/other/configmaps"))).await;
    assert_eq!(
        names(&other),
        ["a", "b", "c"],
        "another namespace is untouched"
    );

    let (code, list) = send(admin.delete(format!("{shop}?fieldSelector=metadata.name%3Dc"))).await;
    assert_eq!((code, names(&list)), (200, vec!["c".to_string()]));

    // Across namespaces, and on Namespaces, as kube-apiserver: not allowed.
    let (code, _) = send(admin.delete(server.url("/api/v1/configmaps"))).await;
    assert_eq!(code, 405);
    let (code, _) = send(admin.delete(server.url("/api/v1/namespaces"))).await;
    assert_eq!(code, 405);
    let (_, namespaces) = send(admin.get(server.url("/api/v1/namespaces"))).await;
    assert!(names(&namespaces).contains(&"other".to_string()));
    server.stop().await;
}

/// Every GA kind is served, with unknown fields handled as
/// `fieldValidation` asks (Strict refuses, Warn stores and warns, Ignore
/// stores), and `/openapi/v2` answers JSON to those who take it.
#[tokio::test]
async fn field_validation_and_every_kind() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fv"}});
    let reply = admin
        .post(server.url("/api/v1/namespaces"))
        .json(&namespace)
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 201);

    let quota = |name: &str| {
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name},
            "spec": {"hard": {"pods": "10"}, "hardd": {"cpu": "1"}},
        })
    };
    let quotas = server.url("/api/v1/namespaces/fv/resourcequotas");
    let reply = admin
        .post(format!("{quotas}?fieldValidation=Strict"))
        .json(&quota("strict"))
        .send()
        .await
        .expect("a reply");
    let (code, status) = json_reply(reply).await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"].as_str().is_some_and(
            |message| message.contains("strict decoding error: unknown field \"spec.hardd\"")
        ),
        "{status}"
    );

    let reply = admin
        .post(format!("{quotas}?fieldValidation=Warn"))
        .json(&quota("warned"))
        .send()
        .await
        .expect("a reply");
    let warnings: Vec<String> = reply
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|value| value.to_str().ok().map(str::to_string))
        .collect();
    let (code, stored) = json_reply(reply).await;
    assert_eq!(code, 201, "{stored}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.hardd\"""#]);
    assert_eq!(stored["spec"]["hard"]["pods"], "10");

    let reply = admin
        .post(format!("{quotas}?fieldValidation=Ignore"))
        .json(&quota("ignored"))
        .send()
        .await
        .expect("a reply");
    assert!(reply.headers().get("warning").is_none());
    assert_eq!(reply.status().as_u16(), 201);

    let (code, list) = json_reply(admin.get(&quotas).send().await.expect("a reply")).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["ignored", "warned"]);

    let (code, v2) = json_reply(
        admin
            .get(server.url("/openapi/v2"))
            .header("accept", "application/json")
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200);
    assert!(v2["definitions"]["io.k8s.api.core.v1.ResourceQuota"].is_object());
    let reply = admin
        .get(server.url("/openapi/v2"))
        .header(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 406);
    server.stop().await;
}

/// The pages of a list are one snapshot: what changes between pages does
/// not show, as with kube-apiserver's etcd-backed continue tokens.
#[tokio::test]
async fn pages_show_one_snapshot() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let maps = server.url("/api/v1/namespaces/default/configmaps");
    for name in ["b", "c", "d"] {
        let reply = admin
            .post(&maps)
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"v": "1"}}))
            .send()
            .await
            .expect("a reply");
        assert_eq!(reply.status().as_u16(), 201);
    }
    let page = |token: Option<String>| {
        let admin = admin.clone();
        let maps = maps.clone();
        async move {
            let url = match token {
                Some(token) => format!("{maps}?limit=1&continue={token}"),
                None => format!("{maps}?limit=1"),
            };
            json_reply(admin.get(url).send().await.expect("a reply")).await
        }
    };
    let (code, first) = page(None).await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["items"][0]["metadata"]["name"], "b");
    let token = first["metadata"]["continue"].as_str().map(str::to_string);

    // Between pages: a new object before the cursor, one changed, one gone.
    let reply = admin
        .post(&maps)
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 201);
    let reply = admin
        .patch(format!("{maps}/c"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"data":{"v":"2"}}"#)
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 200);
    let reply = admin
        .delete(format!("{maps}/d"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 200);

    let (code, second) = page(token).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(second["items"][0]["metadata"]["name"], "c");
    assert_eq!(
        second["items"][0]["data"]["v"], "1",
        "c as the first page saw it"
    );
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    let (code, third) = page(second["metadata"]["continue"].as_str().map(str::to_string)).await;
    assert_eq!(code, 200, "{third}");
    assert_eq!(
        third["items"][0]["metadata"]["name"], "d",
        "d was there then"
    );
    assert!(third["metadata"].get("continue").is_none());

    let (code, status) = page(Some("not-a-token".into())).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    server.stop().await;
}

/// `resourceVersionMatch=Exact` lists the store as it was; a watch with
/// `sendInitialEvents=true` sends the current objects, then the bookmark
/// that ends them, then changes (client-go's watch-list).
#[tokio::test]
async fn exact_lists_and_initial_events() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let maps = server.url("/api/v1/namespaces/default/configmaps");
    let create = |name: &'static str| {
        let admin = admin.clone();
        let maps = maps.clone();
        async move {
            let reply = admin
                .post(&maps)
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}))
                .send()
                .await
                .expect("a reply");
            let (code, object) = json_reply(reply).await;
            assert_eq!(code, 201, "{object}");
            object["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_default()
        }
    };
    let then = create("first").await;
    create("second").await;
    let (code, list) = json_reply(
        admin
            .get(format!(
                "{maps}?resourceVersion={then}&resourceVersionMatch=Exact"
            ))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["metadata"]["resourceVersion"], then.as_str());
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let (code, status) = json_reply(
        admin
            .get(format!("{maps}?resourceVersionMatch=Exact"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")));

    let response = admin
        .get(format!(
            "{maps}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ))
        .send()
        .await
        .expect("a reply");
    assert_eq!(response.status().as_u16(), 200);
    let mut watch = WatchLines {
        response,
        buffer: Vec::new(),
    };
    let mut added = Vec::new();
    let end = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), watch.next())
            .await
            .expect("an event");
        match event["type"].as_str() {
            Some("ADDED") => added.push(event["object"]["metadata"]["name"].clone()),
            Some("BOOKMARK") => break event,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(added, [json!("first"), json!("second")]);
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    create("third").await;
    assert_eq!(
        watch.next_change().await,
        ("ADDED".into(), "third".into(), false)
    );
    server.stop().await;
}

/// Replies are protobuf when the client prefers it (client-go's typed
/// clients, kubectl's typed commands) and the reply has a protobuf form;
/// JSON otherwise.
#[tokio::test]
async fn replies_are_negotiated() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let maps = server.url("/api/v1/namespaces/default/configmaps");
    let reply = admin
        .post(&maps)
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "negotiated"}, "data": {"k": "v"}}))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 201);
    let client_go = "application/vnd.kubernetes.protobuf, */*";
    let get = |path: String, accept: &'static str| {
        let admin = admin.clone();
        async move {
            let reply = admin
                .get(path)
                .header("accept", accept)
                .send()
                .await
                .expect("a reply");
            let code = reply.status().as_u16();
            let content_type = reply
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let body = reply.bytes().await.expect("a body");
            (code, content_type, body)
        }
    };

    let (code, content_type, body) = get(format!("{maps}/negotiated"), client_go).await;
    assert_eq!(
        (code, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf")
    );
    let object = relaymesh_apiserver::protobuf::decode(&body).expect("a protobuf ConfigMap");
    assert_eq!(object["kind"], "ConfigMap");
    assert_eq!(object["data"]["k"], "v");

    let (code, content_type, body) = get(maps.clone(), client_go).await;
    assert_eq!(
        (code, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf")
    );
    let list = relaymesh_apiserver::protobuf::decode(&body).expect("a protobuf list");
    assert_eq!(list["kind"], "ConfigMapList");

    // Errors are Status objects, which have a protobuf form too.
    let (code, content_type, body) = get(format!("{maps}/missing"), client_go).await;
    assert_eq!(
        (code, content_type.as_str()),
        (404, "application/vnd.kubernetes.protobuf")
    );
    let status = relaymesh_apiserver::protobuf::decode(&body).expect("a protobuf Status");
    assert_eq!(status["reason"], "NotFound");

    // relaymesh's own kinds have none: JSON, which the client also takes.
    let placements = server.url("/apis/relaymesh.dev/v1alpha1/placements");
    let (code, content_type, _) = get(placements, client_go).await;
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    // And JSON clients get JSON.
    let (_, content_type, _) = get(format!("{maps}/negotiated"), "application/json").await;
    assert_eq!(content_type, "application/json");
    server.stop().await;
}

/// A watch asked for in protobuf is a stream of length-prefixed
/// `WatchEvent` frames (`application/vnd.kubernetes.protobuf;stream=watch`).
#[tokio::test]
async fn protobuf_watch_streams() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let maps = server.url("/api/v1/namespaces/default/configmaps");
    let reply = admin
        .post(&maps)
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "framed"}}))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 201);
    let mut response = admin
        .get(format!("{maps}?watch=1&timeoutSeconds=5"))
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf;stream=watch, application/json",
        )
        .send()
        .await
        .expect("a reply");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let mut buffer = Vec::new();
    while buffer.len() < 4
        || buffer.len()
            < 4 + u32::from_be_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]) as usize
    {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("a frame in time")
            .expect("the stream goes on")
            .expect("the stream has not ended");
        buffer.extend_from_slice(&chunk);
    }
    let length = u32::from_be_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]) as usize;
    let event = &buffer[4..4 + length];
    // WatchEvent: 1 = type (string), 2 = object (RawExtension: 1 = raw).
    let (event_type, rest) = length_delimited(event, 0x0a);
    assert_eq!(event_type, b"ADDED");
    let (extension, _) = length_delimited(rest, 0x12);
    let (raw, _) = length_delimited(extension, 0x0a);
    let object = relaymesh_apiserver::protobuf::decode(raw).expect("a protobuf ConfigMap");
    assert_eq!(object["metadata"]["name"], "framed");
    server.stop().await;
}

/// The bytes of a length-delimited field with `tag` at the start of
/// `message` (lengths under 2^21, as here), and what follows it.
fn length_delimited(message: &[u8], tag: u8) -> (&[u8], &[u8]) {
    assert_eq!(message.first(), Some(&tag), "field tag");
    let (mut length, mut at, mut shift) = (0usize, 1, 0);
    loop {
        let byte = message[at];
        length |= usize::from(byte & 0x7f) << shift;
        at += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&message[at..at + length], &message[at + length..])
}

/// Preconditions and dry runs as kubectl sends them: a resourceVersion in
/// a patch must match (`kubectl annotate --resource-version`), a
/// `DeleteOptions` body's `dryRun` deletes nothing, and a dry-run update
/// moves no resourceVersion.
#[tokio::test]
async fn patch_preconditions_and_dry_runs() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let maps = server.url("/api/v1/namespaces/default/configmaps");
    let (code, created) = json_reply(
        admin
            .post(&maps)
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pre"}}))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let version = created["metadata"]["resourceVersion"].clone();

    let patch = |body: Value| {
        admin
            .patch(format!("{maps}/pre"))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string())
    };
    let stale = json!({"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}});
    let (code, status) = json_reply(patch(stale).send().await.expect("a reply")).await;
    assert_eq!((code, status["reason"].as_str()), (409, Some("Conflict")));
    let current = json!({"metadata": {"resourceVersion": version, "annotations": {"a": "b"}}});
    let (code, patched) = json_reply(patch(current).send().await.expect("a reply")).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["annotations"]["a"], "b");

    let before = patched["metadata"]["resourceVersion"].clone();
    let (code, dry) = json_reply(
        admin
            .put(format!("{maps}/pre?dryRun=All"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "pre"}, "data": {"x": "y"}}))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200, "{dry}");
    assert_eq!(dry["data"]["x"], "y");
    assert_eq!(dry["metadata"]["resourceVersion"], before);

    let reply = admin
        .delete(format!("{maps}/pre"))
        .json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 200);
    let (code, kept) = json_reply(
        admin
            .get(format!("{maps}/pre"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200, "a dry-run delete keeps the object: {kept}");
    server.stop().await;
}

/// Polls `probe` every 50 ms until it answers `Some`, or panics naming
/// `what` after 60 s.
async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Viewers read no Secret, as kube-apiserver's `view` role; admins do, and
/// `kubectl auth can-i` answers the same.
#[tokio::test]
async fn viewers_read_no_secrets() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let viewer = server.raw(Some(&server.pki.viewer));
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "hunter2"}});
    let (code, body) = json_reply(
        admin
            .post(server.url("/api/v1/namespaces/default/secrets"))
            .json(&secret)
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    for path in [
        "/api/v1/namespaces/default/secrets/db",
        "/api/v1/namespaces/default/secrets",
        "/api/v1/secrets",
        "/api/v1/secrets?watch=1",
        "/api/v1/namespaces/default/secrets?watch=true&fieldSelector=metadata.name%3Ddb",
    ] {
        let reply = viewer.get(server.url(path)).send().await.expect("a reply");
        let (code, body) = json_reply(reply).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (403, Some("Forbidden")),
            "{path}: {body}"
        );
        // kube-apiserver names the object when the request does.
        assert!(
            body["message"].as_str().is_some_and(|message| {
                message.starts_with("secrets is forbidden: User \"vera\" cannot")
                    || message.starts_with("secrets \"db\" is forbidden: User \"vera\" cannot")
            }),
            "{body}"
        );
        assert!(!body.to_string().contains("aHVudGVyMg"), "{body}");
        let reply = admin.get(server.url(path)).send().await.expect("a reply");
        assert_eq!(reply.status().as_u16(), 200, "{path}");
    }
    // Other kinds stay readable.
    let reply = viewer
        .get(server.url("/api/v1/namespaces/default/configmaps"))
        .send()
        .await
        .expect("a reply");
    assert_eq!(reply.status().as_u16(), 200);

    let review = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource}}})
    };
    let url = server.url("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
    for (client, verb, resource, allowed) in [
        (&viewer, "get", "secrets", false),
        (&viewer, "list", "secrets", false),
        (&viewer, "watch", "secrets", false),
        (&viewer, "get", "configmaps", true),
        (&admin, "get", "secrets", true),
    ] {
        let reply = client
            .post(&url)
            .json(&review(verb, resource))
            .send()
            .await
            .expect("a reply");
        let (code, body) = json_reply(reply).await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(
            body["status"]["allowed"], allowed,
            "{verb} {resource}: {body}"
        );
    }
    server.stop().await;
}

/// One more watch than a user may have gets 429 with `Retry-After`, and
/// is counted; others still watch; closing the connections gives the
/// slots back.
#[tokio::test]
async fn watches_are_capped_per_user_and_come_back_when_closed() {
    let server = Server::start().await;
    let cap = relaymesh_node::limits::DEFAULT_MAX_API_WATCHES_PER_USER;
    let url = server.url("/api/v1/namespaces/default/configmaps?watch=1");
    let mut open = Vec::new();
    for _ in 0..cap {
        // A connection of its own for each, closed when dropped.
        let client = server.raw(Some(&server.pki.viewer));
        let reply = client.get(&url).send().await.expect("a reply");
        assert_eq!(reply.status().as_u16(), 200);
        open.push((client, reply));
    }
    let viewer = server.raw(Some(&server.pki.viewer));
    let reply = viewer.get(&url).send().await.expect("a reply");
    assert_eq!(
        reply
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()),
        Some("1")
    );
    let (code, body) = json_reply(reply).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (429, Some("TooManyRequests")),
        "{body}"
    );
    assert_eq!(body["details"]["retryAfterSeconds"], 1, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains("user \"vera\" has 16 open")),
        "{body}"
    );
    assert_eq!(
        lock(&server.backend.limit_refusals).as_slice(),
        [relaymesh_node::limits::Limit::ApiWatchesPerUser]
    );
    // Lists are not watches, and another user still watches.
    let list = server.url("/api/v1/namespaces/default/configmaps");
    assert_eq!(
        viewer
            .get(&list)
            .send()
            .await
            .expect("a reply")
            .status()
            .as_u16(),
        200
    );
    let admin = server.raw(Some(&server.pki.admin));
    let reply = admin.get(&url).send().await.expect("a reply");
    assert_eq!(reply.status().as_u16(), 200);
    drop(reply);

    drop(open);
    let mut again = eventually(
        "a slot to come back once the watches' connections closed",
        || {
            let request = viewer.get(&url).send();
            async move {
                let reply = request.await.expect("a reply");
                (reply.status().as_u16() == 200).then_some(reply)
            }
        },
    )
    .await;
    // And the watch that got in works.
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}});
    let (code, _) = json_reply(
        admin
            .post(server.url("/api/v1/namespaces/default/configmaps"))
            .json(&object)
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201);
    let mut buffer = Vec::new();
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = again.chunk().await.expect("the watch goes on") {
            buffer.extend_from_slice(&chunk);
            if String::from_utf8_lossy(&buffer).contains("\"after\"") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen.ok(), Some(true));
    server.stop().await;
}

/// Ten watches whose clients never read, while a ConfigMap of 1 MiB
/// changes 40 times: each queues a bounded amount, then the server ends it
/// and counts it (`api-watch-buffer`), while a watch that reads gets every
/// change.
#[tokio::test]
async fn watches_that_are_not_read_are_ended_not_buffered_without_bound() {
    const UPDATES: usize = 40;
    let server = Server::start().await;
    let url = server.url("/api/v1/namespaces/default/configmaps?watch=1");
    let mut unread = Vec::new();
    for _ in 0..10 {
        let client = server.raw(Some(&server.pki.viewer));
        let reply = client.get(&url).send().await.expect("a reply");
        assert_eq!(reply.status().as_u16(), 200);
        unread.push((client, reply));
    }
    let reader = server.raw(Some(&server.pki.admin));
    let mut reading = reader.get(&url).send().await.expect("a reply");
    assert_eq!(reading.status().as_u16(), 200);
    let read_all = tokio::spawn(async move {
        let mut modified = 0;
        let mut buffer = Vec::new();
        while modified < UPDATES {
            let Some(chunk) = reading.chunk().await.expect("the watch goes on") else {
                break;
            };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).expect("a JSON event");
                if event["type"] == "MODIFIED" {
                    modified += 1;
                }
            }
        }
        modified
    });

    let key =
        relaymesh_apiserver::objects::ObjectKey::new("", "configmaps", Some("default"), "big");
    let megabyte = "x".repeat(1024 * 1024);
    server
        .objects
        .create(
            &key,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "default"}, "data": {"n": "0", "blob": megabyte}}),
        )
        .expect("created");
    for n in 1..=UPDATES {
        let mut object = server.objects.get(&key).expect("reads").expect("there");
        object["data"]["n"] = json!(n.to_string());
        server.objects.update(&key, object).expect("updated");
    }
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(60), read_all)
            .await
            .expect("the reader gets every change in time")
            .expect("the reader ends"),
        UPDATES,
        "a client that reads keeps its watch"
    );

    eventually("the ten unread watches to be ended and counted", || {
        let count = lock(&server.backend.limit_refusals)
            .iter()
            .filter(|limit| **limit == relaymesh_node::limits::Limit::ApiWatchBuffer)
            .count();
        async move { (count == 10).then_some(()) }
    })
    .await;
    // Each ended stream holds what was sent before the end, and ends: far
    // fewer than the 41 events the store made.
    for (_client, reply) in unread {
        let body = tokio::time::timeout(Duration::from_secs(30), reply.bytes())
            .await
            .expect("the stream has ended")
            .expect("a body");
        let events = body
            .split(|byte| *byte == b'\n')
            .filter(|line| !line.is_empty())
            .count();
        assert!(
            events < UPDATES,
            "{events} events were kept for a client that did not read"
        );
    }
    server.stop().await;
}

/// No CRD in relaymesh.dev, whoever asks: discovery keeps one definition
/// of each of relaymesh's kinds.
#[tokio::test]
async fn definitions_in_the_relaymesh_group_are_refused() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    for (plural, kind, version) in [
        ("placements", "Placement", "v1alpha1"),
        ("placements", "Placement", "v1"),
        ("clusters", "Cluster", "v1alpha1"),
        ("jointokens", "JoinToken", "v1alpha1"),
    ] {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.relaymesh.dev")},
            "spec": {"group": "relaymesh.dev", "scope": "Namespaced",
                     "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": version, "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        });
        let (code, body) =
            json_reply(admin.post(&url).json(&crd).send().await.expect("a reply")).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (422, Some("Invalid")),
            "{plural}: {body}"
        );
        assert_eq!(
            body["details"]["causes"][0]["field"], "spec.group",
            "{body}"
        );
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|message| message.contains("the relaymesh.dev group is reserved")),
            "{body}"
        );
    }
    let (code, list) = json_reply(admin.get(&url).send().await.expect("a reply")).await;
    assert_eq!(
        (code, list["items"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    let (code, group) = json_reply(
        admin
            .get(server.url("/apis/relaymesh.dev"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        group["versions"].as_array().map(Vec::len),
        Some(1),
        "{group}"
    );
    let (_, resources) = json_reply(
        admin
            .get(server.url("/apis/relaymesh.dev/v1alpha1"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|resource| resource["name"].as_str())
        .filter(|name| !name.contains('/'))
        .collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "{names:?}");
    assert!(!names.contains(&"jointokens"), "{names:?}");
    server.stop().await;
}
