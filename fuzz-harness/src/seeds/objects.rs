//! Seeds of the targets that read Kubernetes objects: bundles as the edge
//! agent reads them, and the root API's bodies, patches and selectors.

use serde_json::{json, Value};

use super::{seed, Seed};

fn objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": "1", "resourceVersion": "5"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop",
            "labels": {"app": "web"}, "annotations": {"relaymesh.dev/create-only": "true",
            "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
            "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}]}}},
            "status": {"readyReplicas": 2}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config", "namespace": "shop"},
            "data": {"key": "value", "n": "1.5e3"}}),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1.25, "list": [1, -2, null, true]}}),
    ]
}

pub(super) fn bundles() -> Vec<Seed> {
    let objects = objects();
    let all: Vec<&Value> = objects.iter().collect();
    vec![
        seed("bundle", "packed", relaymesh_root::placement::pack(&all)),
        seed(
            "bundle",
            "packed-zstd",
            relaymesh_protocol::bundle_encoding::compress(&relaymesh_root::placement::pack(&all)),
        ),
        seed(
            "bundle",
            "packed-one",
            relaymesh_root::placement::pack(&all[2..3]),
        ),
        seed(
            "bundle",
            "raw",
            serde_json::to_vec_pretty(&objects).expect("JSON"),
        ),
        seed("bundle", "empty", b"[]".to_vec()),
        seed(
            "bundle",
            "missing-name",
            br#"[{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}]"#.to_vec(),
        ),
    ]
}

/// A Kubernetes protobuf body (`runtime.Unknown`) of a ConfigMap.
fn protobuf_config_map() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
        out
    }
    let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
    let labels = [field(1, b"app"), field(2, b"web")].concat();
    let metadata = [
        field(1, b"config"),
        field(3, b"default"),
        field(11, &labels),
    ]
    .concat();
    let entry = [field(1, b"key"), field(2, b"value")].concat();
    let raw = [field(1, &metadata), field(2, &entry)].concat();
    [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat()
}

/// A Kubernetes protobuf body of `object`, as the API's own encoder writes it.
fn protobuf(object: &Value) -> Vec<u8> {
    relaymesh_apiserver::protobuf::encode(object).expect("a built-in kind encodes")
}

pub(super) fn api_bodies() -> Vec<Seed> {
    // Flags: bits 0-1 content type (JSON, YAML, protobuf, CBOR), bit 2 the
    // URL has a namespace, bit 3 the URL has the name "fuzz"; then the index
    // of the kind in `kinds()`.
    // Looked up by name: the registry's order changes as kinds are added.
    // Placement is relaymesh's, not the API server's: it has no seed here.
    let kinds = relaymesh_apiserver::fuzzing::kinds();
    let index = |kind: &str| {
        let at = kinds.iter().position(|known| known == kind);
        u8::try_from(at.expect("a built-in kind")).expect("fewer than 256 kinds")
    };
    let (config_map, secret, deployment) =
        (index("ConfigMap"), index("Secret"), index("Deployment"));
    let (namespace, crd) = (index("Namespace"), index("CustomResourceDefinition"));
    let json_body = |flags: u8, kind: u8, object: Value| {
        [
            vec![flags, kind],
            serde_json::to_vec(&object).expect("JSON"),
        ]
        .concat()
    };
    let objects = objects();
    vec![
        seed("api_body", "namespace", json_body(0, namespace, objects[0].clone())),
        seed("api_body", "deployment", json_body(4, deployment, objects[1].clone())),
        seed("api_body", "config-map", json_body(4, config_map, objects[2].clone())),
        seed("api_body", "config-map-named", json_body(4 | 8, config_map, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz"}}))),
        seed("api_body", "secret", json_body(4, secret, json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"}, "stringData": {"password": "hunter2"}, "data": {"a": "YQ=="}}))),
        seed("api_body", "crd", json_body(0, crd, json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}}))),
        seed("api_body", "yaml", [vec![1 | 4, config_map], b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config\n  labels: {app: web}\ndata:\n  key: |\n    multi\n    line\n".to_vec()].concat()),
        seed("api_body", "protobuf", [vec![2 | 4, config_map], protobuf_config_map()].concat()),
        // What kubectl create deployment and a CRD look like in protobuf.
        // Maps of one entry each: encode writes maps in no fixed order.
        seed("api_body", "protobuf-deployment", [vec![2 | 4, deployment], protobuf(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "creationTimestamp": "2024-01-02T03:04:05Z"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx",
                    "resources": {"limits": {"memory": "128Mi"}}, "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                    "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a"}}}]}],
                    "volumes": [{"name": "v", "configMap": {"name": "c"}}]}}}}))].concat()),
        seed("api_body", "protobuf-crd", [vec![2, crd], protobuf(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"size": {"type": "integer", "default": 1, "maximum": 10}}}}}]}}))].concat()),
        seed("api_body", "join-token", json_body(0, 0, json!({"apiVersion": "relaymesh.dev/v1alpha1", "kind": "JoinToken",
            "spec": {"name": "edge-1", "role": "agent", "parent": "eu-west", "ttl": "2h"}}))),
        // Nesting around the depth limit (issue 29): 64 levels pass, 65 and
        // far deeper are refused, as JSON and as flow and block YAML.
        seed("api_body", "deep-json-64", json_body(4, config_map, deep_config_map(64))),
        seed("api_body", "deep-json-65", json_body(4, config_map, deep_config_map(65))),
        seed("api_body", "deep-json-brackets", [vec![4, config_map], "[".repeat(10_000).into_bytes()].concat()),
        seed("api_body", "deep-yaml-flow", [vec![1 | 4, config_map], format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\nx: {}", "[".repeat(10_000)).into_bytes()].concat()),
        seed("api_body", "deep-yaml-block", [vec![1 | 4, config_map], format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\nx:\n{}", (0..70).map(|level| format!("{}a:\n", "  ".repeat(level + 1))).collect::<String>()).into_bytes()].concat()),
    ]
}

/// A ConfigMap whose `x` makes it `levels` maps and lists deep.
fn deep_config_map(levels: usize) -> Value {
    let mut value = json!({});
    for _ in 2..levels {
        value = json!({ "a": value });
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "x": value})
}

pub(super) fn api_patches() -> Vec<Seed> {
    // The choice byte: bits 0-2 the patch kind (JSON, merge, strategic,
    // apply, forced apply), bits 4-5 the type (Deployment, Service,
    // ConfigMap, a custom Widget).
    let patch = |choice: u8, live: &Value, body: &[u8], manager: &str| {
        let live = serde_json::to_vec(live).expect("JSON");
        [
            vec![choice],
            live,
            vec![0xff],
            body.to_vec(),
            vec![0xff],
            manager.as_bytes().to_vec(),
        ]
        .concat()
    };
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "uid": "u-1",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {},
                    "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}}}}]},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.26", "ports": [{"containerPort": 80, "protocol": "TCP"}],
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}});
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config"}, "data": {"a": "1"}});
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"list": [1, 2]}});
    vec![
        seed("api_patch", "json-patch", patch(0, &deployment, br#"[{"op":"replace","path":"/spec/replicas","value":3},{"op":"test","path":"/metadata/name","value":"web"},{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"remove","path":"/spec/template/spec/containers/0/env/1"},{"op":"copy","from":"/spec/replicas","path":"/spec/minReadySeconds"},{"op":"move","from":"/spec/minReadySeconds","path":"/spec/paused"}]"#, "kubectl")),
        seed("api_patch", "merge-patch", patch(1 | 0x20, &config_map, br#"{"data":{"a":null,"b":"2"},"metadata":{"labels":{"x":"y"}}}"#, "kubectl-edit")),
        seed("api_patch", "strategic", patch(2, &deployment, br#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27","env":[{"name":"A","$patch":"delete"},{"name":"C","value":"3"}]}],"$setElementOrder/containers":[{"name":"web"}]}}}}"#, "kubectl")),
        seed("api_patch", "strategic-directives", patch(2, &deployment, br#"{"spec":{"template":{"spec":{"$retainKeys":["containers"],"containers":[{"name":"side","image":"busybox","$patch":"replace"}]}}},"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}"#, "kubectl")),
        seed("api_patch", "apply", patch(3, &deployment, b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.28\n", "helm")),
        seed("api_patch", "apply-forced", patch(4, &deployment, br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":null}}"#, "helm")),
        seed("api_patch", "apply-create", [vec![5 | 0x30], b"null".to_vec(), vec![0xff], b"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  list: [1, 2, 3]\n".to_vec()].concat()),
        seed("api_patch", "merge-custom", patch(1 | 0x30, &widget, br#"{"spec":{"list":[3]}}"#, "")),
        // The issue 29 patch: 200 operations that each add a level.
        seed("api_patch", "json-patch-deep", patch(0x20, &config_map, &deep_json_patch(200), "kubectl")),
        seed("api_patch", "merge-deep", patch(1 | 0x20, &config_map, &serde_json::to_vec(&deep_config_map(70)).expect("JSON"), "kubectl")),
        seed("api_patch", "apply-deep", patch(3 | 0x20, &config_map, &serde_json::to_vec(&deep_config_map(70)).expect("JSON"), "kubectl")),
    ]
}

/// A JSON patch that adds `/x` and then `levels` maps below it.
fn deep_json_patch(levels: usize) -> Vec<u8> {
    let mut operations = vec![json!({"op": "add", "path": "/x", "value": {}})];
    let mut path = "/x".to_string();
    for _ in 0..levels {
        path.push_str("/a");
        operations.push(json!({"op": "add", "path": path, "value": {}}));
    }
    serde_json::to_vec(&operations).expect("JSON")
}

pub(super) fn api_selectors() -> Vec<Seed> {
    let object = serde_json::to_vec(&json!({"metadata": {"name": "web", "namespace": "shop",
        "labels": {"app": "web", "tier": "frontend", "example.com/zone": "a"}}}))
    .expect("JSON");
    let query = |text: &str| [text.as_bytes().to_vec(), vec![0xff], object.clone()].concat();
    vec![
        seed("api_selector", "equality", query("app=web,tier!=backend")),
        seed("api_selector", "sets", query("tier in (frontend, backend),env notin (prod),example.com/zone,!legacy")),
        seed("api_selector", "query", query("labelSelector=app%3Dweb%2Ctier+in+%28frontend%29&fieldSelector=metadata.name%3D%3Dweb,metadata.namespace!=kube-system&watch=1")),
        seed("api_selector", "field", query("metadata.name=web,metadata.namespace==shop")),
        seed("api_selector", "empty", query("")),
    ]
}
