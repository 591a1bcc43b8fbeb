//! The OpenAPI v3 schemas of relaymesh's own kinds, one per kind, written
//! from what the code reads and writes: the Placement's from its parser
//! and the root's status writer (the `placement` submodule), the views'
//! from the modules that shape them (`inventory`, `nodes`).
//!
//! Each is a structural schema, as a CRD's `openAPIV3Schema`, handed to
//! the API server with [`relaymesh_apiserver::Resource::schema`]: the same
//! value is served at `/openapi/v2` and `/openapi/v3` (so `kubectl
//! explain placement.spec.rollout` explains) and checked by
//! `fieldValidation` (so `kubectl apply` refuses `spec.maxCluster`).
//! Pure data; no IO.

use serde_json::{json, Map, Value};

mod placement;
#[cfg(test)]
mod tests;

pub(super) use placement::schema as placement;

/// The `Cluster` view (`inventory`): one per edge agent.
pub(super) fn cluster() -> Value {
    object(
        "Cluster is an edge cluster of the tree, one per registered edge agent: read-only, built from the inventory. Its labels (metadata.labels) are those given at edge-agent join --labels and changed by ClusterLabels.",
        &[(
            "status",
            object(
                "What the tree knows of the cluster.",
                &[
                    (
                        "relayPath",
                        strings("The relays from the root down to the cluster's agent's parent."),
                    ),
                    ("connected", boolean("Whether the agent's link to its parent is up.")),
                    (
                        "lastSeen",
                        string("When the link last changed state (RFC 3339); null if never reported."),
                    ),
                    (
                        "capacity",
                        string_map("What the agent offers: placements: N for an agent joined with --max-placements N, else empty."),
                    ),
                    (
                        "cordoned",
                        boolean("Whether count-bounded placements add nothing more here (relayctl cordon or drain)."),
                    ),
                    (
                        "lost",
                        boolean("Whether its relay (run with --lost-after) has seen it disconnected that long: count-bounded placements went elsewhere."),
                    ),
                    (
                        "reachable",
                        boolean("Whether its cluster's API answers its agent, as the agent last said (false: its placements fail with ClusterUnreachable)."),
                    ),
                    ("drain", string("While or after it is drained: Draining or Drained.")),
                ],
            ),
        )],
    )
}

/// The `Relay` and `Agent` views (`nodes`): one per node of `kind`.
pub(super) fn node(kind: &str) -> Value {
    let description = match kind {
        "Agent" => "Agent is an edge agent of the tree: read-only, built from the inventory.",
        _ => {
            "Relay is a relay of the tree (the root included): read-only, built from the inventory."
        }
    };
    object(
        description,
        &[
            (
                "spec",
                object(
                    "Where the node sits.",
                    &[
                        ("parent", string("The relay it is linked to; absent for the root.")),
                        ("addresses", strings("The addresses it reported.")),
                    ],
                ),
            ),
            (
                "status",
                object(
                    "The node's link as its parent sees it, and its place in the tree. Link measurements (rttMicros, bytes, ackedRevision, revisionLag) stay with the parent: present only for the root's own children.",
                    &[
                        ("role", string("relay or agent.")),
                        ("connected", boolean("Whether its link to its parent is up.")),
                        ("rttMicros", integer("The link's round-trip time, in microseconds.")),
                        ("bytesSent", integer("QUIC wire bytes the parent sent on the link since it opened.")),
                        ("bytesReceived", integer("QUIC wire bytes the parent received on the link since it opened.")),
                        ("bundlesServed", integer("Bundle transfers the parent completed on this link.")),
                        ("bundleBytesServed", integer("Their payload bytes.")),
                        ("ackedRevision", integer("The last slice revision the node acknowledged.")),
                        ("revisionLag", integer("How many revisions it is behind.")),
                        ("subtreeSize", integer("The nodes below it.")),
                        (
                            "refusedEntries",
                            integer("Slice entries the node refused because the root's signature was missing, wrong or older than the version it held."),
                        ),
                        (
                            "limitRefusals",
                            json!({
                                "type": "object",
                                "description": "Requests the node refused since it started for breaking one of its limits, by limit name.",
                                "additionalProperties": {"type": "integer"},
                            }),
                        ),
                        ("children", strings("The nodes linked to it.")),
                        ("lastTransitionTime", string("When its link last changed state (RFC 3339).")),
                        ("version", string("The relaymesh version it runs.")),
                    ],
                ),
            ),
        ],
    )
}

/// SIG-Multicluster's `ClusterProfile`, as the `inventory` view fills it.
pub(super) fn cluster_profile() -> Value {
    object(
        "ClusterProfile (SIG-Multicluster About API) of an edge cluster: read-only, one per edge agent.",
        &[
            (
                "spec",
                object(
                    "The cluster's identity.",
                    &[
                        ("displayName", string("The cluster's name.")),
                        (
                            "clusterManager",
                            object(
                                "Who manages the cluster.",
                                &[("name", string("relaymesh."))],
                            ),
                        ),
                    ],
                ),
            ),
            (
                "status",
                object(
                    "The cluster's health and properties.",
                    &[
                        (
                            "conditions",
                            array("ControlPlaneHealthy: whether the agent's link is up and its cluster's API answers it.", condition()),
                        ),
                        (
                            "properties",
                            array(
                                "The cluster's labels.",
                                object(
                                    "One property.",
                                    &[
                                        ("name", string("The label key.")),
                                        ("value", string("The label value.")),
                                    ],
                                ),
                            ),
                        ),
                    ],
                ),
            ),
        ],
    )
}

/// The `Move` request (`moves`): a node to move under another relay.
pub(super) fn move_request() -> Value {
    object(
        "Move asks the root to move a node (an agent or a relay) under another relay, with a join token sent down to it (relayctl move).",
        &[(
            "spec",
            object(
                "What to move where.",
                &[
                    ("node", string("The node to move. Required.")),
                    ("to", string("The relay it moves under. Required.")),
                    (
                        "ttlSeconds",
                        integer("How long its join token stays valid, 1 to 86400 seconds; default 3600."),
                    ),
                ],
            ),
        )],
    )
}

/// The `ClusterLabels` request (`cluster_labels`).
pub(super) fn cluster_labels_request() -> Value {
    object(
        "ClusterLabels sets and removes labels and annotations of one cluster at the root, without joining it again (relayctl label cluster, relayctl annotate cluster).",
        &[(
            "spec",
            object(
                "The change.",
                &[
                    ("cluster", string("The cluster. Required.")),
                    ("set", string_map("Labels to set.")),
                    ("remove", strings("Label keys to remove.")),
                    (
                        "annotations",
                        object(
                            "Annotations to set and remove.",
                            &[
                                ("set", string_map("Annotations to set.")),
                                ("remove", strings("Annotation keys to remove.")),
                            ],
                        ),
                    ),
                ],
            ),
        )],
    )
}

/// The `Cordon` request (`cordons`).
pub(super) fn cordon_request() -> Value {
    object(
        "Cordon cordons, drains or uncordons one cluster (relayctl cordon, drain, uncordon).",
        &[(
            "spec",
            object(
                "The cluster and its new state.",
                &[
                    ("cluster", string("The cluster. Required.")),
                    (
                        "state",
                        string("Cordoned, Draining or Schedulable. Required."),
                    ),
                ],
            ),
        )],
    )
}

/// The `JoinToken` request (`tokens`).
pub(super) fn join_token_request() -> Value {
    object(
        "JoinToken asks the root for a single-use join token for a relay or an edge agent (relayctl token create).",
        &[(
            "spec",
            object(
                "Who may join, and where.",
                &[
                    ("name", string("The joining node's name, a DNS-1123 label. Required.")),
                    ("role", string("relay or agent. Required.")),
                    ("parent", string("The relay it must join under; absent: the root chooses.")),
                    (
                        "candidates",
                        strings("Other relays it may join under instead (the nearest that admits it), and fail over to later."),
                    ),
                    ("ttl", string("How long the token stays valid, as 10m; at most 24h.")),
                ],
            ),
        )],
    )
}

/// The `Revocation` request (`revocations`): a node to revoke.
pub(super) fn revocation_request() -> Value {
    object(
        "Revocation revokes a node: every relay drops its link and refuses its certificates and those its issuer signed (relayctl revoke).",
        &[(
            "spec",
            object(
                "What to revoke.",
                &[("node", string("The node to revoke. Required."))],
            ),
        )],
    )
}

/// The `UserCertificate` request (`usercertificates`): a user's
/// certificate request, named by `metadata.name`.
pub(super) fn user_certificate_request() -> Value {
    object(
        "UserCertificate asks the root to sign a client certificate for the user metadata.name with the API CA (relayctl user create).",
        &[(
            "spec",
            object(
                "The user's group and certificate request.",
                &[
                    ("group", string("viewers, operators, admins, or a DNS-1123 label a binding names. Required.")),
                    ("request", string("A PKCS#10 certificate request (PEM) for the user's key, made where the key stays. Required.")),
                    ("expirationSeconds", integer("How long the certificate lasts, at most 366 days; default 30 days.")),
                ],
            ),
        )],
    )
}

/// The `MeshCARotation` request (`meshcarotations`).
pub(super) fn mesh_ca_rotation_request() -> Value {
    object(
        "MeshCARotation starts or finishes a rotation of the mesh CA (relayctl rotate mesh-ca).",
        &[(
            "spec",
            object(
                "The step.",
                &[
                    ("step", string("Start or Finish. Required.")),
                    (
                        "force",
                        boolean("Finish although some nodes have not moved over to the new CA."),
                    ),
                ],
            ),
        )],
    )
}

/// The `TokenKeyRotation` request (`tokenkeyrotations`).
pub(super) fn token_key_rotation_request() -> Value {
    object(
        "TokenKeyRotation starts or finishes a rotation of the key that signs join tokens and the root's decisions (relayctl rotate token-key).",
        &[(
            "spec",
            object(
                "The step.",
                &[
                    ("step", string("Start or Finish. Required.")),
                    ("force", boolean("Finish although some nodes do not accept the new key yet.")),
                ],
            ),
        )],
    )
}

/// The `APICARotation` request (`apicarotations`).
pub(super) fn api_ca_rotation_request() -> Value {
    object(
        "APICARotation starts or finishes a rotation of the API CA (relayctl rotate api-ca).",
        &[(
            "spec",
            object(
                "The step.",
                &[("step", string("Start or Finish. Required."))],
            ),
        )],
    )
}

/// The `APICertificateRotation` request (`apicertificaterotations`).
pub(super) fn api_certificate_rotation_request() -> Value {
    object(
        "APICertificateRotation has the root serve its API with a new key and certificate (relayctl rotate api-cert now).",
        &[("spec", object("Empty.", &[]))],
    )
}

/// Refuses a request of `kind` with a field `schema` does not name, as
/// kube-apiserver's strict decoding does: these requests are read by
/// relaymesh's own parsers, which would otherwise ignore a misspelt field.
pub(super) fn refuse_unknown_fields(
    kind: &str,
    schema: &Value,
    object: &Map<String, Value>,
) -> Result<(), relaymesh_apiserver::ApiError> {
    let object = Value::Object(object.clone());
    let unknown = relaymesh_apiserver::check_schema(schema, &object).unknown;
    if unknown.is_empty() {
        return Ok(());
    }
    let fields: Vec<String> = unknown
        .iter()
        .map(|path| format!("unknown field {path:?}"))
        .collect();
    Err(relaymesh_apiserver::ApiError::BadRequest(format!(
        "{kind} in version \"v1alpha1\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", ")
    )))
}

/// An object with `properties`, each with its own schema.
fn object(description: &str, properties: &[(&str, Value)]) -> Value {
    let properties: Map<String, Value> = properties
        .iter()
        .map(|(name, schema)| (name.to_string(), schema.clone()))
        .collect();
    json!({"type": "object", "description": description, "properties": properties})
}

/// An object of any fields, kept as they are.
fn open_object(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn array(description: &str, items: Value) -> Value {
    json!({"type": "array", "description": description, "items": items})
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn integer(description: &str) -> Value {
    json!({"type": "integer", "description": description})
}

fn number(description: &str) -> Value {
    json!({"type": "number", "description": description})
}

fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

fn strings(description: &str) -> Value {
    array(description, json!({"type": "string"}))
}

/// A map of strings to strings (labels, capacity).
fn string_map(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    })
}

/// A count (`2`) or a percentage (`"25%"`), as Kubernetes writes
/// int-or-string fields.
fn int_or_string(description: &str) -> Value {
    json!({
        "description": description,
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    })
}

/// A `metav1.LabelSelector`, as `relaymesh_apiserver::selector::from_json`
/// reads it.
fn label_selector(description: &str) -> Value {
    object(
        description,
        &[
            (
                "matchLabels",
                string_map("Labels that must all have these values."),
            ),
            (
                "matchExpressions",
                array(
                    "Requirements that must all hold.",
                    object(
                        "One requirement on a label.",
                        &[
                            ("key", string("The label key.")),
                            ("operator", string("In, NotIn, Exists or DoesNotExist.")),
                            ("values", strings("The values, for In and NotIn.")),
                        ],
                    ),
                ),
            ),
        ],
    )
}

/// A `metav1.Condition`.
fn condition() -> Value {
    object(
        "A condition, as Kubernetes writes them.",
        &[
            ("type", string("The condition's type.")),
            ("status", string("True, False or Unknown.")),
            ("reason", string("Why, in one CamelCase word.")),
            ("message", string("Why, in words.")),
            (
                "lastTransitionTime",
                string("When the status last changed (RFC 3339)."),
            ),
            (
                "observedGeneration",
                integer("The generation of the spec it was set for."),
            ),
        ],
    )
}
