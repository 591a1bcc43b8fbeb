use proptest::prelude::*;
use prost::Message as _;
use serde_json::json;

use super::*;

fn bytes_field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![number << 3 | 2];
    push_varint(&mut out, bytes.len());
    out.extend_from_slice(bytes);
    out
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = bytes_field(1, api_version.as_bytes());
    type_meta.extend(bytes_field(2, kind.as_bytes()));
    let mut body = MAGIC.to_vec();
    body.extend(bytes_field(1, &type_meta));
    body.extend(bytes_field(2, raw));
    body
}

/// encode, then decode, must give the object back.
fn round_trip(object: &Value) -> Vec<u8> {
    let body = encode(object).expect("encodes");
    assert!(body.starts_with(MAGIC));
    assert_eq!(&decode(&body).expect("decodes"), object);
    body
}

#[test]
fn namespaces_and_config_maps_decode() {
    let mut labels = bytes_field(1, b"team");
    labels.extend(bytes_field(2, b"shop"));
    let mut meta = bytes_field(1, b"shop");
    meta.extend(bytes_field(11, &labels));
    let namespace = decode(&envelope("v1", "Namespace", &bytes_field(1, &meta))).expect("decodes");
    assert_eq!(
        namespace,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "shop"}}})
    );

    let mut entry = bytes_field(1, b"color");
    entry.extend(bytes_field(2, b"blue"));
    let mut raw = bytes_field(1, &bytes_field(1, b"cfg"));
    raw.extend(bytes_field(2, &entry));
    let config_map = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
    assert_eq!(config_map["data"], json!({"color": "blue"}));
}

#[test]
fn access_review_specs_decode() {
    // kubectl auth can-i create deployments -n shop
    let mut attributes = bytes_field(1, b"shop");
    attributes.extend(bytes_field(2, b"create"));
    attributes.extend(bytes_field(3, b"apps"));
    attributes.extend(bytes_field(5, b"deployments"));
    let spec = bytes_field(1, &attributes);
    let review = decode(&envelope(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &bytes_field(2, &spec),
    ))
    .expect("decodes");
    assert_eq!(
        review["spec"],
        json!({"resourceAttributes": {"namespace": "shop", "verb": "create", "group": "apps", "resource": "deployments"}})
    );
    let path = bytes_field(2, &bytes_field(1, b"/healthz"));
    let review = decode(&envelope(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &bytes_field(2, &path),
    ))
    .expect("decodes");
    assert_eq!(
        review["spec"],
        json!({"nonResourceAttributes": {"path": "/healthz"}})
    );
}

/// A Pod as client-go's generated (gogo) code writes it, built with prost
/// from the field numbers in core/v1's generated.proto, so decoding is not
/// only checked against this module's own encoder.
mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Unknown {
        #[prost(message, optional, tag = "1")]
        pub type_meta: Option<TypeMeta>,
        #[prost(bytes = "vec", optional, tag = "2")]
        pub raw: Option<Vec<u8>>,
        #[prost(string, optional, tag = "3")]
        pub content_encoding: Option<String>,
        #[prost(string, optional, tag = "4")]
        pub content_type: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeMeta {
        #[prost(string, optional, tag = "1")]
        pub api_version: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub kind: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Pod {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<ObjectMeta>,
        #[prost(message, optional, tag = "2")]
        pub spec: Option<PodSpec>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ObjectMeta {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub generate_name: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub namespace: Option<String>,
        #[prost(int64, optional, tag = "7")]
        pub generation: Option<i64>,
        #[prost(message, optional, tag = "8")]
        pub creation_timestamp: Option<Time>,
        #[prost(btree_map = "string, string", tag = "11")]
        pub labels: std::collections::BTreeMap<String, String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Time {
        #[prost(int64, optional, tag = "1")]
        pub seconds: Option<i64>,
        #[prost(int32, optional, tag = "2")]
        pub nanos: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodSpec {
        #[prost(message, repeated, tag = "2")]
        pub containers: Vec<Container>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Container {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub image: Option<String>,
        #[prost(message, optional, tag = "8")]
        pub resources: Option<ResourceRequirements>,
        #[prost(message, optional, tag = "10")]
        pub liveness_probe: Option<Probe>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceRequirements {
        #[prost(btree_map = "string, message", tag = "1")]
        pub limits: std::collections::BTreeMap<String, Quantity>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Quantity {
        #[prost(string, optional, tag = "1")]
        pub string: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Probe {
        #[prost(message, optional, tag = "1")]
        pub handler: Option<ProbeHandler>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProbeHandler {
        #[prost(message, optional, tag = "2")]
        pub http_get: Option<HttpGetAction>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HttpGetAction {
        #[prost(string, optional, tag = "1")]
        pub path: Option<String>,
        #[prost(message, optional, tag = "2")]
        pub port: Option<IntOrString>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct IntOrString {
        #[prost(int64, optional, tag = "1")]
        pub r#type: Option<i64>,
        #[prost(int32, optional, tag = "2")]
        pub int_val: Option<i32>,
        #[prost(string, optional, tag = "3")]
        pub str_val: Option<String>,
    }
}

#[test]
fn pods_that_client_go_writes_decode() {
    let text = |text: &str| Some(text.to_string());
    let pod = wire::Pod {
        metadata: Some(wire::ObjectMeta {
            name: text("web-1"),
            // gogo writes non-pointer fields even when empty, and a zero
            // Time as an empty message; JSON leaves them out.
            generate_name: text(""),
            namespace: text("shop"),
            generation: Some(0),
            creation_timestamp: Some(wire::Time::default()),
            labels: [("app".to_string(), "web".to_string())].into(),
        }),
        spec: Some(wire::PodSpec {
            containers: vec![wire::Container {
                name: text("web"),
                image: text("nginx:1.27"),
                resources: Some(wire::ResourceRequirements {
                    limits: [(
                        "memory".to_string(),
                        wire::Quantity {
                            string: text("128Mi"),
                        },
                    )]
                    .into(),
                }),
                liveness_probe: Some(wire::Probe {
                    handler: Some(wire::ProbeHandler {
                        http_get: Some(wire::HttpGetAction {
                            path: text("/healthz"),
                            port: Some(wire::IntOrString {
                                r#type: Some(1),
                                int_val: Some(0),
                                str_val: text("http"),
                            }),
                        }),
                    }),
                }),
            }],
        }),
    };
    let unknown = wire::Unknown {
        type_meta: Some(wire::TypeMeta {
            api_version: text("v1"),
            kind: text("Pod"),
        }),
        raw: Some(pod.encode_to_vec()),
        content_encoding: text(""),
        content_type: text(""),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    assert_eq!(
        decode(&body).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "web",
                "image": "nginx:1.27",
                "resources": {"limits": {"memory": "128Mi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
            }]},
        })
    );

    // What encode writes, prost reads as the same Pod.
    let encoded = encode(&json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "creationTimestamp": "2024-01-02T03:04:05Z"},
        "spec": {"containers": [{"name": "web", "livenessProbe": {"httpGet": {"port": 8080}}}]},
    }))
    .expect("encodes");
    let unknown = wire::Unknown::decode(&encoded[MAGIC.len()..]).expect("prost reads it");
    assert_eq!(
        unknown.type_meta,
        Some(wire::TypeMeta {
            api_version: text("v1"),
            kind: text("Pod")
        })
    );
    let pod =
        wire::Pod::decode(unknown.raw.as_deref().unwrap_or_default()).expect("prost reads it");
    let metadata = pod.metadata.expect("metadata");
    assert_eq!(metadata.name, text("web-1"));
    assert_eq!(
        metadata.creation_timestamp.and_then(|time| time.seconds),
        Some(1_704_164_645)
    );
    let port = pod.spec.expect("spec").containers[0]
        .liveness_probe
        .clone()
        .and_then(|probe| probe.handler?.http_get?.port)
        .expect("a port");
    assert_eq!((port.r#type, port.int_val), (Some(0), Some(8080)));
}

#[test]
fn deployments_round_trip() {
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"app": "web"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "generation": 3,
            "managedFields": [{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2024-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}},
            }],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "shop", "uid": "u-1", "controller": true}],
        },
        "spec": {
            "replicas": 0,
            "revisionHistoryLimit": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web", "key": "token", "optional": false}}}],
                        "envFrom": [{"configMapRef": {"name": "web"}}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                        "readinessProbe": {"exec": {"command": ["true"]}},
                        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false},
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": "web", "defaultMode": 420}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                    ],
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
        "status": {
            "replicas": 1,
            "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": "2024-01-02T03:04:05Z"}],
        },
    });
    round_trip(&deployment);
}

#[test]
fn secrets_carry_bytes_as_base64() {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop"},
        "type": "Opaque",
        "data": {"password": "aHVudGVyMg==", "empty": ""},
        "stringData": {"user": "admin"},
        "immutable": true,
    });
    let body = round_trip(&secret);
    // The bytes on the wire are the decoded ones.
    assert!(body.windows(7).any(|window| window == b"hunter2"));
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": {"a": "not base64!"}});
    assert!(matches!(
        encode(&bad),
        Err(ProtobufError::Unrepresentable(_))
    ));
}

#[test]
fn cron_jobs_round_trip() {
    round_trip(&json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "backup", "namespace": "shop"},
        "spec": {
            "schedule": "0 3 * * *",
            "timeZone": "Etc/UTC",
            "suspend": false,
            "successfulJobsHistoryLimit": 0,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "metadata": {"labels": {"job": "backup"}},
                "spec": {
                    "backoffLimit": 2,
                    "ttlSecondsAfterFinished": 3600,
                    "template": {"spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "backup", "image": "busybox", "command": ["sh", "-c", "date"]}],
                    }},
                },
            },
        },
        "status": {"lastScheduleTime": "2024-01-02T03:00:00Z"},
    }));
}

#[test]
fn services_round_trip() {
    round_trip(&json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "type": "NodePort",
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "nodePort": 30080},
                {"name": "metrics", "port": 9090, "targetPort": 9090},
            ],
            "clusterIP": "10.0.0.10",
            "clusterIPs": ["10.0.0.10"],
            "ipFamilies": ["IPv4"],
            "sessionAffinity": "None",
            "allocateLoadBalancerNodePorts": false,
        },
        "status": {"loadBalancer": {}},
    }));
}

#[test]
fn custom_resource_definitions_round_trip() {
    let definition = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "default": {"size": 1, "tags": ["a"]},
                            "properties": {
                                "size": {"type": "integer", "minimum": 0, "maximum": 10.5, "default": 1},
                                "color": {"type": "string", "enum": ["red", "blue"], "pattern": "^[a-z]+$"},
                                "port": {"x-kubernetes-int-or-string": true},
                                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                                "pairs": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "closed": {"type": "object", "additionalProperties": false},
                                "ref": {"$ref": "#/definitions/thing", "$schema": "http://json-schema.org/draft-04/schema#"},
                            },
                            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
                            "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "too big"}],
                        },
                        "status": {"type": "object", "nullable": true},
                    },
                }},
            }],
            "conversion": {"strategy": "None"},
        },
        "status": {
            "acceptedNames": {"kind": "Widget", "plural": "widgets"},
            "storedVersions": ["v1"],
            "conditions": [{"type": "Established", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}],
        },
    });
    let body = round_trip(&definition);
    // A default is JSON on the wire too.
    assert!(body.windows(4).any(|window| window == b"\"a\"]"));
}

#[test]
fn events_keep_microseconds() {
    let event = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web.17a", "namespace": "shop"},
        "eventTime": "2024-01-02T03:04:05.123456Z",
        "series": {"count": 3, "lastObservedTime": "2024-01-02T03:05:00.000001Z"},
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop"},
        "reason": "ScalingReplicaSet",
        "note": "Scaled up",
        "type": "Normal",
        "action": "Scale",
        "reportingController": "relaymesh",
        "reportingInstance": "root",
    });
    round_trip(&event);
    // Time keeps seconds only, as Go's does.
    let core = json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
        "firstTimestamp": "2024-01-02T03:04:05.9Z",
    });
    let decoded = decode(&encode(&core).expect("encodes")).expect("decodes");
    assert_eq!(decoded["firstTimestamp"], "2024-01-02T03:04:05Z");
}

#[test]
fn bare_list_wrappers_are_lists() {
    round_trip(&json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {},
        "status": {"userInfo": {"username": "vera", "groups": ["viewers"], "extra": {"scopes": ["a", "b"]}}},
    }));
    round_trip(&json!({
        "apiVersion": "v1",
        "kind": "APIResourceList",
        "groupVersion": "apps/v1",
        "resources": [{"name": "deployments", "namespaced": true, "kind": "Deployment", "verbs": ["get", "list"], "shortNames": ["deploy"]}],
    }));
}

#[test]
fn durations_are_go_text() {
    let schema = schema();
    let descriptor = schema
        .pool
        .get_message_by_name("apimachinery.pkg.apis.meta.v1.Duration")
        .expect("compiled in");
    for text in ["1h0m0s", "30s", "1.5s", "0s"] {
        let message = from_json::message(schema, &descriptor, &json!(text)).expect("encodes");
        assert_eq!(
            to_json::message(schema, &message, 0).expect("decodes"),
            Some(json!(text))
        );
    }
    assert!(from_json::message(schema, &descriptor, &json!("soon")).is_err());
}

#[test]
fn lists_and_status_encode() {
    let list = json!({
        "apiVersion": "apps/v1",
        "kind": "DeploymentList",
        "metadata": {"resourceVersion": "42", "continue": "abc"},
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {"replicas": 2}}],
    });
    round_trip(&list);
    // Items as the API stores them carry their kind; protobuf does not.
    let mut typed = list.clone();
    typed["items"][0]["apiVersion"] = json!("apps/v1");
    typed["items"][0]["kind"] = json!("Deployment");
    assert_eq!(
        decode(&encode(&typed).expect("encodes")).expect("decodes"),
        list
    );

    round_trip(&json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": "deployments.apps \"web\" not found",
        "reason": "NotFound",
        "details": {"name": "web", "group": "apps", "kind": "deployments"},
        "code": 404,
    }));
}

#[test]
fn watch_events_are_length_prefixed_frames() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "resourceVersion": "7"}, "data": {"a": "b"}});
    let frame = encode_watch_event("ADDED", &object).expect("encodes");
    let (length, message) = frame.split_at(4);
    let length = u32::from_be_bytes(length.try_into().expect("four bytes"));
    assert_eq!(usize::try_from(length).expect("fits"), message.len());
    let event =
        DynamicMessage::decode(schema().watch_event.clone(), message).expect("a WatchEvent");
    assert_eq!(
        event
            .get_field_by_name("type")
            .as_deref()
            .and_then(|value| value.as_str().map(str::to_string)),
        Some("ADDED".to_string())
    );
    let raw = event
        .get_field_by_name("object")
        .and_then(|value| {
            value
                .as_message()?
                .get_field_by_name("raw")?
                .as_bytes()
                .cloned()
        })
        .expect("an object");
    assert_eq!(decode(&raw).expect("decodes"), object);
}

#[test]
fn raw_extensions_hold_json_or_protobuf() {
    // A ControllerRevision's data is any JSON.
    round_trip(&json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "web-1"},
        "data": {"spec": {"template": {"x": [1, 2.5, null]}}},
        "revision": 1,
    }));
    // A List's items are protobuf objects when a protobuf client sends it.
    let item = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}))
        .expect("encodes");
    let mut raw = bytes_field(1, &[]);
    raw.extend(bytes_field(2, &bytes_field(1, &item)));
    let list = decode(&envelope("v1", "List", &raw)).expect("decodes");
    assert_eq!(list["items"][0]["metadata"]["name"], "a");
    // Not without end.
    let mut nested = item;
    for _ in 0..=MAX_EMBEDDED {
        let mut raw = bytes_field(1, &[]);
        raw.extend(bytes_field(2, &bytes_field(1, &nested)));
        nested = envelope("v1", "List", &raw);
    }
    assert!(matches!(decode(&nested), Err(ProtobufError::Malformed(_))));
}

fn push_varint(out: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        out.push(u8::try_from(value & 0x7f).expect("seven bits") | 0x80);
        value >>= 7;
    }
    out.push(u8::try_from(value).expect("seven bits"));
}

#[test]
fn refuses_garbage_unknown_kinds_and_unrepresentable_objects() {
    assert!(decode(b"{}").is_err());
    assert!(decode(b"k8s\0\x0a\xff").is_err());
    assert!(decode(b"k8s\0\x12\x05abc").is_err());
    for (api_version, kind) in [
        ("relaymesh.dev/v1alpha1", "Placement"),
        ("example.com/v1", "Widget"),
        ("v1", "NoSuchKind"),
        ("v1", "ConfigMap.DataEntry"),
        ("apps/v1beta1", "Deployment"),
        ("", ""),
    ] {
        let error = decode(&envelope(api_version, kind, &[])).expect_err("refused");
        assert_eq!(
            error,
            ProtobufError::UnknownKind {
                api_version: api_version.into(),
                kind: kind.into()
            }
        );
        assert!(error.to_string().contains("send JSON"), "{error}");
    }
    let mut json_inside = envelope("v1", "ConfigMap", b"{}");
    json_inside.extend(bytes_field(4, b"application/json"));
    assert!(matches!(
        decode(&json_inside),
        Err(ProtobufError::Malformed(_))
    ));

    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(matches!(
        encode(&widget),
        Err(ProtobufError::UnknownKind { .. })
    ));
    for object in [
        json!({"kind": "ConfigMap"}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "extra": 1}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 7}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1.5}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 4_294_967_296_u64}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"creationTimestamp": "yesterday"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"volumes": [{"name": "v", "volumeSource": {}}]}}),
    ] {
        assert!(
            matches!(encode(&object), Err(ProtobufError::Unrepresentable(_))),
            "{object}"
        );
    }
}

#[test]
fn replies_are_protobuf_only_when_preferred() {
    for (accept, wanted) in [
        ("application/vnd.kubernetes.protobuf, */*", true),
        ("application/vnd.kubernetes.protobuf,application/json", true),
        (
            "application/vnd.kubernetes.protobuf;q=0.5, application/json;q=0.9",
            false,
        ),
        (
            "application/json, application/vnd.kubernetes.protobuf",
            false,
        ),
        (
            "application/json;q=0.5, application/vnd.kubernetes.protobuf",
            true,
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            false,
        ),
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json",
            false,
        ),
        ("application/vnd.kubernetes.protobuf;q=0", false),
        ("text/html, application/vnd.kubernetes.protobuf", true),
        ("*/*", false),
        ("", false),
    ] {
        assert_eq!(wants_protobuf(accept), wanted, "{accept}");
    }
}

proptest! {
    #[test]
    fn decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut body = MAGIC.to_vec();
        body.extend(&bytes);
        let _ = decode(&body);
        // And inside the envelope of kinds with deep and special fields.
        for (api_version, kind) in [("apps/v1", "Deployment"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("events.k8s.io/v1", "Event"), ("v1", "List")] {
            let _ = decode(&envelope(api_version, kind, &bytes));
        }
    }

    #[test]
    fn encoding_never_panics(spec in json_value(3), status in json_value(3)) {
        for (api_version, kind) in [("apps/v1", "Deployment"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("v1", "Pod")] {
            let object = json!({"apiVersion": api_version, "kind": kind, "spec": spec, "status": status});
            if let Ok(body) = encode(&object) {
                prop_assert!(decode(&body).is_ok());
            }
        }
    }
}

/// JSON values of a bounded depth, with the keys Kubernetes objects use, so
/// that some of them reach deep into the messages.
fn json_value(depth: u32) -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "replicas",
        "selector",
        "template",
        "spec",
        "containers",
        "name",
        "image",
        "ports",
        "containerPort",
        "maxSurge",
        "strategy",
        "rollingUpdate",
        "type",
        "versions",
        "schema",
        "openAPIV3Schema",
        "properties",
        "items",
        "default",
        "additionalProperties",
        "volumes",
        "configMap",
        "emptyDir",
        "sizeLimit",
        "resources",
        "limits",
        "metadata",
        "labels",
        "creationTimestamp",
        "conditions",
        "lastTransitionTime",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(
            |value| serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
        ),
        "[a-z0-9%.:-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key.clone(), inner, 0..5).prop_map(|map| {
                Value::Object(
                    map.into_iter()
                        .map(|(key, value)| (key.to_string(), value))
                        .collect(),
                )
            }),
        ]
    })
}

/// Go's generated code writes every non-pointer field, zeros included; the
/// JSON leaves out only the zeros of `omitempty` fields, as kube-apiserver's
/// `encoding/json` does.
#[test]
fn only_omitempty_zeros_are_left_out() {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "generation": 0, "uid": ""},
        "spec": {
            "type": "NodePort",
            "clusterIP": "",
            "ports": [{"name": "", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 0}],
        },
    });
    let decoded = decode(&encode(&service).expect("encodes")).expect("decodes");
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "type": "NodePort",
                "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
            },
        })
    );

    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            // Pointers: a zero is a value.
            "replicas": 0,
            "paused": false,
            "minReadySeconds": 0,
            "template": {"spec": {
                "automountServiceAccountToken": false,
                "containers": [{
                    "name": "web",
                    "image": "",
                    "imagePullPolicy": "",
                    "tty": false,
                    // No omitempty: the zero is written.
                    "ports": [{"containerPort": 0, "hostPort": 0, "protocol": ""}],
                }],
            }},
        },
    });
    let decoded = decode(&encode(&deployment).expect("encodes")).expect("decodes");
    assert_eq!(
        decoded["spec"],
        json!({
            "replicas": 0,
            "template": {"spec": {
                "automountServiceAccountToken": false,
                "containers": [{"name": "web", "ports": [{"containerPort": 0}]}],
            }},
        })
    );
}

/// `omitempty.tsv` names only fields the compiled protos have, so a
/// refresh of one without the other fails here.
#[test]
fn omitempty_fields_are_in_the_descriptors() {
    let schema = schema();
    let mut count = 0;
    for (message, field) in omitempty_fields() {
        let descriptor = schema
            .pool
            .get_message_by_name(message)
            .and_then(|message| message.get_field_by_name(field));
        assert!(descriptor.is_some(), "{message}.{field} is not in proto/");
        assert!(
            descriptor.is_some_and(|field| !field.is_list()
                && !field.is_map()
                && field.kind().as_message().is_none()),
            "{message}.{field} is not a scalar"
        );
        count += 1;
    }
    assert!(count > 400, "omitempty.tsv lists {count} fields");
}
