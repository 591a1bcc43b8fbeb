//! The root API's limits over real TLS and HTTP: request bodies, JSON
//! patches and lists without `limit`, each refused as kube-apiserver would
//! refuse it, and counted through the backend.

use relaymesh_node::limits::Limit;
use relaymesh_protocol::Role;
use serde_json::{json, Value};

#[path = "support/pki.rs"]
mod pki;
#[path = "support/server.rs"]
mod server;

use server::{lock, node, Server};

/// The status code and JSON body of a reply.
async fn json_reply(response: reqwest::Response) -> (u16, Value) {
    let code = response.status().as_u16();
    let body = response.json().await.expect("a JSON body");
    (code, body)
}

fn config_map(name: &str, value_len: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"blob": "x".repeat(value_len)},
    })
}

#[tokio::test]
async fn request_bodies_are_limited_as_in_kube_apiserver() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/api/v1/namespaces/default/configmaps");

    // 2 MiB is under kube-apiserver's 3 MiB: accepted.
    let (code, body) = json_reply(
        admin
            .post(&url)
            .json(&config_map("two-mib", 2 << 20))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201, "{}", body["message"]);

    // Over 3 MiB: 413, before the body is read whole, and counted.
    let (code, body) = json_reply(
        admin
            .post(&url)
            .json(&config_map("four-mib", 4 << 20))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("limit of 3145728 bytes"), "{message}");
    assert_eq!(
        *lock(&server.backend.limit_refusals),
        vec![Limit::ApiRequestBody]
    );
    server.stop().await;
}

#[tokio::test]
async fn json_patches_are_limited_in_operations_and_copies() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/api/v1/namespaces/default/configmaps");
    let (code, _) = json_reply(
        admin
            .post(&url)
            .json(&config_map("a", 1000))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 201);
    let item = format!("{url}/a");
    let patch = |operations: Vec<Value>| {
        admin
            .patch(&item)
            .header("Content-Type", "application/json-patch+json")
            .json(&Value::Array(operations))
            .send()
    };

    let test = json!({"op": "test", "path": "/metadata/name", "value": "a"});
    let (code, body) = json_reply(patch(vec![test.clone(); 10_001]).await.expect("a reply")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    assert_eq!(
        body["message"],
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    let (code, _) = json_reply(patch(vec![test; 10_000]).await.expect("a reply")).await;
    assert_eq!(code, 200, "10,000 operations are allowed");

    // Each copy doubles `data`: 40 of them would make 2^40 times 1 kB.
    let bomb = (0..40)
        .map(|n| json!({"op": "copy", "from": "/data", "path": format!("/data/c{n}")}))
        .collect();
    let (code, body) = json_reply(patch(bomb).await.expect("a reply")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains("copy more than 3145728 bytes")),
        "{body}"
    );
    assert_eq!(
        *lock(&server.backend.limit_refusals),
        vec![Limit::ApiJsonPatch, Limit::ApiJsonPatch]
    );
    server.stop().await;
}

#[tokio::test]
async fn lists_without_limit_are_capped_and_clients_page() {
    let clusters = 10_001;
    let mut nodes = vec![node("root", Role::Relay, None, true)];
    nodes.extend(
        (0..clusters).map(|n| node(&format!("edge-{n:05}"), Role::Agent, Some("root"), true)),
    );
    let server = Server::start_with_nodes(nodes).await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/apis/relaymesh.dev/v1alpha1/clusters");

    let (code, body) = json_reply(admin.get(&url).send().await.expect("a reply")).await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(body["details"]["causes"][0]["field"], "limit");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("there are 10001 clusters.relaymesh.dev")
            && message.contains("ask for pages with ?limit=500"),
        "{message}"
    );
    assert_eq!(
        *lock(&server.backend.limit_refusals),
        vec![Limit::ApiUnpagedList]
    );

    // Pages are served, and a page larger than the cap is cut to it, with
    // a continue token, as Kubernetes allows.
    let (code, page) = json_reply(
        admin
            .get(format!("{url}?limit=20000"))
            .send()
            .await
            .expect("a reply"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(10_000));
    assert!(page["metadata"]["continue"]
        .as_str()
        .is_some_and(|token| !token.is_empty()));

    // relayctl's client pages by itself and gets everything.
    let client = server.client(&server.pki.admin);
    let agents = client.agents().await.expect("agents, in pages");
    assert_eq!(agents.len(), clusters);
    assert_eq!(lock(&server.backend.limit_refusals).len(), 1);
    server.stop().await;
}

/// `{"x": {"a": {"a": ... {}}}}`, `levels` maps deep.
fn nested(levels: usize) -> Value {
    let mut value = json!({});
    for _ in 2..levels {
        value = json!({ "a": value });
    }
    json!({ "x": value })
}

/// Asserts a 422 `Invalid` whose cause names a path under `.x.a.a`.
fn assert_too_deep(what: &str, (code, body): (u16, Value), path_start: &str) {
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{what}: {body}"
    );
    let field = body["details"]["causes"][0]["field"]
        .as_str()
        .unwrap_or_default();
    assert!(field.starts_with(path_start), "{what}: {field}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains("nested more than 64 levels deep")),
        "{what}: {body}"
    );
}

#[tokio::test]
async fn nesting_is_limited_in_every_body_and_every_patch_result() {
    let server = Server::start().await;
    let admin = server.raw(Some(&server.pki.admin));
    let url = server.url("/api/v1/namespaces/default/configmaps");
    let item = format!("{url}/deep");
    let send = |request: reqwest::RequestBuilder| async move {
        json_reply(request.send().await.expect("a reply")).await
    };
    let (code, _) = send(admin.post(&url).json(&config_map("deep", 1))).await;
    assert_eq!(code, 201);

    // Create and update bodies: 64 levels pass, 65 are refused at their path.
    let mut object = config_map("deeper", 1);
    object["x"] = nested(63);
    let (code, body) = send(admin.post(&url).json(&object)).await;
    assert_eq!(code, 201, "{body}");
    object["x"] = nested(64);
    let deep_path = format!(".x.x{}", ".a".repeat(10));
    assert_too_deep(
        "create",
        send(admin.post(&url).json(&object)).await,
        &deep_path,
    );
    object["metadata"]["name"] = json!("deep");
    assert_too_deep(
        "update",
        send(admin.put(&item).json(&object)).await,
        &deep_path,
    );

    // A JSON body is never read as YAML: 100,000 brackets are refused at
    // once, whatever the content type says.
    let brackets = "[".repeat(100_000);
    let (code, body) = send(
        admin
            .post(&url)
            .header("Content-Type", "application/json")
            .body(brackets.clone()),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    let (code, body) = send(
        admin
            .post(&url)
            .header("Content-Type", "application/json")
            .body("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yaml}\n"),
    )
    .await;
    assert_eq!(code, 400, "YAML sent as JSON: {body}");
    // YAML sent as YAML is read, and refused when deep.
    let (code, body) = send(
        admin
            .post(&url)
            .header("Content-Type", "application/yaml")
            .body("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yaml}\n"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        admin
            .post(&url)
            .header("Content-Type", "application/yaml")
            .body(format!("apiVersion: v1\nkind: ConfigMap\nx: {brackets}")),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );

    // The JSON patch: 200 operations that each add a level.
    let mut operations = vec![json!({"op": "add", "path": "/x", "value": {}})];
    let mut path = "/x".to_string();
    for _ in 0..200 {
        path.push_str("/a");
        operations.push(json!({"op": "add", "path": path, "value": {}}));
    }
    assert_too_deep(
        "JSON patch",
        send(
            admin
                .patch(&item)
                .header("Content-Type", "application/json-patch+json")
                .json(&operations),
        )
        .await,
        ".x.a.a.a",
    );
    for content_type in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ] {
        assert_too_deep(
            content_type,
            send(
                admin
                    .patch(&item)
                    .header("Content-Type", content_type)
                    .json(&json!({"x": nested(70)})),
            )
            .await,
            ".x.x.a.a",
        );
    }
    // A merge patch of 63 levels under a map already 2 deep makes 65.
    let (code, body) = send(
        admin
            .patch(&item)
            .header("Content-Type", "application/merge-patch+json")
            .json(&json!({"x": {"y": {}}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_too_deep(
        "merge patch result",
        send(
            admin
                .patch(&item)
                .header("Content-Type", "application/merge-patch+json")
                .json(&json!({"x": {"y": nested(63)}})),
        )
        .await,
        ".x.y.x.a",
    );
    let mut applied = config_map("deep", 1);
    applied["x"] = nested(70);
    assert_too_deep(
        "apply",
        send(
            admin
                .patch(format!("{item}?fieldManager=test"))
                .header("Content-Type", "application/apply-patch+yaml")
                .json(&applied),
        )
        .await,
        ".x.x.a.a",
    );
    let block = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nx:\n{}",
        (0..100)
            .map(|level| format!("{}a:\n", "  ".repeat(level + 1)))
            .collect::<String>()
    );
    let (code, body) = send(
        admin
            .patch(format!("{item}?fieldManager=test"))
            .header("Content-Type", "application/apply-patch+yaml")
            .body(block),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );

    // Protobuf: a ControllerRevision's data is any JSON.
    let mut revision = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "deep"},
        "revision": 1,
        "data": nested(70),
    });
    let body = relaymesh_apiserver::protobuf::encode(&revision).expect("encodes");
    assert_too_deep(
        "protobuf",
        send(
            admin
                .post(server.url("/apis/apps/v1/namespaces/default/controllerrevisions"))
                .header("Content-Type", "application/vnd.kubernetes.protobuf")
                .header("Accept", "application/json")
                .body(body),
        )
        .await,
        ".data.x.a",
    );
    revision["data"] = nested(10);
    let body = relaymesh_apiserver::protobuf::encode(&revision).expect("encodes");
    let (code, reply) = send(
        admin
            .post(server.url("/apis/apps/v1/namespaces/default/controllerrevisions"))
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .header("Accept", "application/json")
            .body(body),
    )
    .await;
    assert_eq!(code, 201, "{reply}");

    // Nothing that was refused was stored: every list still reads.
    let (code, list) = send(admin.get(server.url("/api/v1/configmaps"))).await;
    assert_eq!(code, 200, "{list}");
    let ready = admin
        .get(server.url("/readyz?verbose"))
        .send()
        .await
        .expect("a reply")
        .text()
        .await
        .expect("text");
    assert!(ready.contains("[+]stored-objects ok"), "{ready}");
    server.stop().await;
}
