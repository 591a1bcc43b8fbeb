//! The seed corpus: a few valid inputs of every target, so the fuzzer starts
//! from messages and bodies that decode rather than from nothing. Written to
//! `fuzz/corpus/<target>/` by `scripts/fuzz --seeds` (see docs/testing.md).

use std::collections::BTreeMap;

use relaymesh_protocol::codec::{encode, encode_frame};
use relaymesh_protocol::message::{
    BundleReply, BundleRequest, DownMessage, Hello, JoinGrant, JoinReply, JoinRequest, Open,
    Resume, UpMessage, Welcome,
};
use relaymesh_protocol::query::{Answer, ChildCut, Observation, Query};
use relaymesh_protocol::token::TokenClaims;
use relaymesh_protocol::{
    BundleId, ErrorCode, FailingCluster, InventoryUpdate, LabelRequirement, LabelSelector,
    LinkStatus, NodeRecord, PhaseCounts, PlacementStatus, PlacementTarget, Quota, Refusal, Role,
    SelectorOperator, SliceChange, SliceEntry, StatusUpdate, Target,
};
use serde::Serialize;

mod objects;

use objects::{api_bodies, api_patches, api_selectors, bundles};

/// One seed: the target it is for, a file name, and the input.
pub struct Seed {
    /// The fuzz target.
    pub target: &'static str,
    /// The file name under `corpus/<target>/`.
    pub name: String,
    /// The input.
    pub bytes: Vec<u8>,
}

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let messages = messages();
    for (name, payload) in &messages {
        seeds.push(seed("messages", name, payload.clone()));
    }
    seeds.extend(frames(&messages));
    seeds.extend(tokens());
    seeds.extend(bundles());
    seeds.extend(api_bodies());
    seeds.extend(api_patches());
    seeds.extend(api_selectors());
    seeds.extend(slice_entries());
    seeds
}

/// Slice entries as the wire carries them, unsigned and signed by some key.
fn slice_entries() -> Vec<Seed> {
    use ring::rand::SystemRandom;
    use ring::signature::Ed25519KeyPair;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a key");
    let mut signed = entry();
    relaymesh_core::seal::sign(pkcs8.as_ref(), &mut signed, 9).expect("signed");
    let everywhere = SliceEntry {
        target: Target::Everywhere,
        ..signed.clone()
    };
    vec![
        seed("slice_entry", "placement", payload(&entry())),
        seed("slice_entry", "signed", payload(&signed)),
        seed("slice_entry", "everywhere", payload(&everywhere)),
    ]
}

fn seed(target: &'static str, name: &str, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name: format!("seed-{name}"),
        bytes,
    }
}

fn payload<T: Serialize>(message: &T) -> Vec<u8> {
    encode(message).expect("a seed message encodes")
}

fn node(name: &str, role: Role, parent: Option<&str>) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        role,
        parent: parent.map(str::to_string),
        labels: BTreeMap::from([
            ("region".into(), "eu".into()),
            ("tier".into(), "edge".into()),
        ])
        .into(),
        addresses: vec!["10.0.0.1:4433".into()],
        version: "0.1.0".into(),
        link: Some(LinkStatus {
            connected: true,
            rtt_micros: 1500,
            bytes_sent: 4096,
            bytes_received: 1024,
            acked_revision: 7,
            revision_lag: 1,
            changed_unix_ms: 1_700_000_000_000,
            bundles_served: 2,
            bundle_bytes_served: 300,
        }),
        capacity: BTreeMap::from([("cpu".into(), "8".into()), ("memory".into(), "32Gi".into())]),
        refused_entries: 1,
        limit_refusals: BTreeMap::from([("connections-per-address".into(), 3)]),
    }
}

fn placement_target() -> PlacementTarget {
    PlacementTarget {
        selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("region".into(), "eu".into())]),
            match_expressions: vec![LabelRequirement {
                key: "tier".into(),
                operator: SelectorOperator::In,
                values: vec!["edge".into(), "core".into()],
            }],
        }),
        names: vec!["cluster-a".into()],
        max_clusters: Some(3),
        spread_by: Some("zone".into()),
        quota: Some(Quota {
            total: 3,
            per_value: BTreeMap::from([("a".into(), 2), ("b".into(), 1)]),
        }),
        wave: Some(Box::new(relaymesh_protocol::Wave {
            key_label: Some("carbon".into()),
            total: 2,
            per_value: BTreeMap::from([("10".into(), 1), ("20".into(), 1)]),
            per_value_cap: None,
            per_child: BTreeMap::from([("eu".into(), 1), ("us".into(), 1)]),
        })),
    }
}

fn entry() -> SliceEntry {
    SliceEntry {
        key: "placement/default/web".into(),
        target: Target::Placement(placement_target()),
        bundles: vec![BundleId::of(b"bundle")],
        body: br#"{"metadata":{"name":"web"}}"#.to_vec(),
        serial: 1_795_000_000_000,
        signature: vec![0x5a; 64],
    }
}

fn claims() -> TokenClaims {
    TokenClaims {
        id: [7; 16],
        name: "edge-1".into(),
        role: Role::Agent,
        parent: "eu-west".into(),
        parent_addresses: vec!["192.0.2.1:4433".into(), "[2001:db8::1]:4433".into()],
        parent_issuers: vec!["eu".into()],
        ca_sha256: [9; 32],
        not_after_unix: 1_900_000_000,
        candidates: vec![relaymesh_protocol::CandidateParent {
            name: "eu-east".into(),
            addresses: vec!["192.0.2.2:4433".into()],
            issuers: vec!["eu".into()],
            issuer_key: [3; 32],
        }],
        token_key: [4; 32],
        parent_issuer_key: [5; 32],
    }
}

/// A valid payload of every message type, by name.
fn messages() -> Vec<(String, Vec<u8>)> {
    let hello = Hello {
        min_version: 2,
        max_version: 2,
        resume: Some(Resume {
            epoch: 42,
            revision: 9,
        }),
    };
    let join = JoinRequest {
        version: 2,
        token: "rmt2.abc.def".into(),
        name: "edge-1".into(),
        role: Role::Relay,
        tls_csr_der: vec![0x30, 0x82, 0x01, 0x00],
        issuer_csr_der: Some(vec![0x30, 0x03, 0x02, 0x01, 0x00]),
    };
    let refusal = Refusal::new(ErrorCode::TokenExpired, "token expired at 5");
    let grant = JoinGrant {
        ca_cert_der: vec![0x30, 0x01, 0x00],
        tls_chain_der: vec![vec![0x30, 0x01], vec![0x30, 0x02]],
        issuer_chain_der: Some(vec![vec![0x30, 0x03]]),
        token_key: vec![1; 32],
        parent: "root".into(),
    };
    let status = StatusUpdate {
        full: true,
        upserts: vec![(
            "default/web".into(),
            PlacementStatus {
                counts: PhaseCounts {
                    pending: 1,
                    applied: 2,
                    ready: 3,
                    failed: 0,
                    offline: u64::MAX,
                },
                message: Some("1 pending".into()),
                failing: vec![FailingCluster {
                    cluster: "edge-4".into(),
                    message: "Deployment default/web: image pull failed".into(),
                }],
                rules: vec![relaymesh_protocol::RuleSummary {
                    rule: "ready".into(),
                    all: relaymesh_protocol::Summary {
                        count: 2,
                        sum: relaymesh_protocol::Number(3.0),
                        min: Some(relaymesh_protocol::Number(1.0)),
                        max: Some(relaymesh_protocol::Number(2.0)),
                        top: vec![relaymesh_protocol::Ranked {
                            value: relaymesh_protocol::Number(2.0),
                            cluster: "edge-4".into(),
                        }],
                    },
                    groups: vec![("eu".into(), relaymesh_protocol::Summary::default())],
                    other: relaymesh_protocol::Summary::default(),
                }],
                objects: vec![relaymesh_protocol::ObjectStatus {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                    namespace: Some("default".into()),
                    name: "web".into(),
                    bundle: relaymesh_protocol::BundleId::of(b"web"),
                    observed: true,
                    status: br#"{"readyReplicas":2}"#.to_vec(),
                }],
                revisions: vec![relaymesh_protocol::RevisionCounts {
                    revision: relaymesh_protocol::BundleId::of(b"web"),
                    waiting: 1,
                    updating: 2,
                    succeeded: 3,
                    failed: 0,
                }],
                revision_groups: vec![relaymesh_protocol::RevisionGroup {
                    label: "zone".into(),
                    value: "a".into(),
                    counts: relaymesh_protocol::RevisionCounts {
                        revision: relaymesh_protocol::BundleId::of(b"web"),
                        waiting: 0,
                        updating: 2,
                        succeeded: 1,
                        failed: 0,
                    },
                }],
                applied_revisions: vec![relaymesh_protocol::AppliedRevision {
                    revision: relaymesh_protocol::BundleId::of(b"web"),
                    counts: PhaseCounts {
                        pending: 0,
                        applied: 1,
                        ready: 2,
                        failed: 0,
                        offline: 0,
                    },
                }],
            },
        )],
        removals: vec!["default/old".into()],
    };
    let inventory = InventoryUpdate::Full {
        records: vec![
            node("eu-west", Role::Relay, Some("root")),
            node("edge-1", Role::Agent, Some("eu-west")),
        ],
        first: true,
        last: true,
    };
    vec![
        (
            "open-control".into(),
            payload(&Open::Control(hello.clone())),
        ),
        (
            "open-control-fresh".into(),
            payload(&Open::Control(Hello {
                resume: None,
                ..hello.clone()
            })),
        ),
        (
            "open-bundle".into(),
            payload(&Open::Bundle(BundleRequest {
                id: BundleId::of(b"x"),
            })),
        ),
        ("open-join".into(), payload(&Open::Join(join.clone()))),
        ("hello".into(), payload(&hello)),
        (
            "welcome".into(),
            payload(&Welcome {
                version: 2,
                parent: "eu-west".into(),
                epoch: 42,
                ancestors: vec!["root".into(), "eu".into()],
            }),
        ),
        ("up-ack".into(), payload(&UpMessage::Ack { revision: 300 })),
        (
            "up-ping".into(),
            payload(&UpMessage::Ping { nonce: u64::MAX }),
        ),
        (
            "up-inventory".into(),
            payload(&UpMessage::Inventory(inventory.clone())),
        ),
        (
            "up-inventory-delta".into(),
            payload(&UpMessage::Inventory(InventoryUpdate::Delta {
                upserts: vec![node("edge-2", Role::Agent, Some("eu-west"))],
                removals: vec!["edge-3".into()],
            })),
        ),
        (
            "up-status".into(),
            payload(&UpMessage::Status(status.clone())),
        ),
        (
            "up-leaving".into(),
            payload(&UpMessage::Leaving { to: "us".into() }),
        ),
        (
            "down-welcome".into(),
            payload(&DownMessage::Welcome(Welcome {
                version: 2,
                parent: "root".into(),
                epoch: 1,
                ancestors: vec![],
            })),
        ),
        (
            "down-delta".into(),
            payload(&DownMessage::Delta {
                base: 3,
                revision: 5,
                changes: vec![
                    SliceChange::Upsert(entry()),
                    SliceChange::Remove("bundle/demo".into()),
                ],
            }),
        ),
        (
            "down-snapshot".into(),
            payload(&DownMessage::Snapshot {
                revision: 5,
                entries: vec![
                    entry(),
                    SliceEntry {
                        key: "bundle/demo".into(),
                        target: Target::Subtrees(vec!["eu-west".into()]),
                        bundles: vec![],
                        body: vec![],
                        serial: 2,
                        signature: vec![],
                    },
                ],
                first: true,
                last: false,
            }),
        ),
        ("down-pong".into(), payload(&DownMessage::Pong { nonce: 1 })),
        (
            "down-query".into(),
            payload(&DownMessage::Query {
                id: 7,
                node: "edge-2".into(),
                query: Query::Link,
            }),
        ),
        (
            "up-answer".into(),
            payload(&UpMessage::Answer {
                id: 7,
                answer: Answer::Link {
                    parent: "eu-west".into(),
                    status: LinkStatus {
                        connected: true,
                        rtt_micros: 900,
                        acked_revision: 12,
                        ..LinkStatus::default()
                    },
                },
            }),
        ),
        (
            "down-query-object".into(),
            payload(&DownMessage::Query {
                id: 9,
                node: "edge-2".into(),
                query: Query::Object {
                    group: "apps".into(),
                    version: "v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("shop".into()),
                    name: "web".into(),
                },
            }),
        ),
        (
            "down-query-events".into(),
            payload(&DownMessage::Query {
                id: 10,
                node: "edge-2".into(),
                query: Query::Events {
                    namespace: None,
                    limit: 50,
                },
            }),
        ),
        (
            "up-answer-object-stale".into(),
            payload(&UpMessage::Answer {
                id: 9,
                answer: Answer::Object(Observation {
                    cluster: "edge-2".into(),
                    json: br#"{"kind":"Deployment","status":{"readyReplicas":2}}"#.to_vec(),
                    age_ms: Some(42_000),
                }),
            }),
        ),
        (
            "up-answer-events".into(),
            payload(&UpMessage::Answer {
                id: 10,
                answer: Answer::Events(Observation {
                    cluster: "edge-2".into(),
                    json: br#"[{"type":"Normal","reason":"ScalingReplicaSet"}]"#.to_vec(),
                    age_ms: None,
                }),
            }),
        ),
        (
            "down-query-split".into(),
            payload(&DownMessage::Query {
                id: 11,
                node: "eu".into(),
                query: Query::Split {
                    key: "placement/shop/web".into(),
                },
            }),
        ),
        (
            "up-answer-split".into(),
            payload(&UpMessage::Answer {
                id: 11,
                answer: Answer::Split {
                    quota: Some(Quota {
                        total: 2,
                        per_value: BTreeMap::new(),
                    }),
                    children: vec![ChildCut {
                        child: "eu-west".into(),
                        quota: Some(Quota {
                            total: 1,
                            per_value: [("zone-a".to_string(), 1)].into(),
                        }),
                        named: 1,
                        wave: Some(1),
                        kept: true,
                    }],
                    more: 0,
                },
            }),
        ),
        (
            "up-answer-failed".into(),
            payload(&UpMessage::Answer {
                id: 8,
                answer: Answer::Failed(refusal.clone()),
            }),
        ),
        (
            "down-refused".into(),
            payload(&DownMessage::Refused(refusal.clone())),
        ),
        (
            "bundle-request".into(),
            payload(&BundleRequest {
                id: BundleId::of(b"y"),
            }),
        ),
        (
            "bundle-found".into(),
            payload(&BundleReply::Found {
                id: BundleId::of(b"z"),
                len: 1 << 20,
            }),
        ),
        (
            "bundle-missing".into(),
            payload(&BundleReply::Missing {
                id: BundleId::of(b"z"),
            }),
        ),
        (
            "bundle-refused".into(),
            payload(&BundleReply::Refused(refusal.clone())),
        ),
        ("join-request".into(), payload(&join)),
        (
            "join-accepted".into(),
            payload(&JoinReply::Accepted(grant.clone())),
        ),
        (
            "join-refused".into(),
            payload(&JoinReply::Refused(refusal.clone())),
        ),
        ("join-grant".into(), payload(&grant)),
        ("token-claims".into(), payload(&claims())),
        ("slice-entry".into(), payload(&entry())),
        (
            "slice-everywhere".into(),
            payload(&SliceChange::Upsert(SliceEntry {
                target: Target::Everywhere,
                ..entry()
            })),
        ),
        ("placement-target".into(), payload(&placement_target())),
        ("inventory".into(), payload(&inventory)),
        (
            "node-record".into(),
            payload(&node("root", Role::Relay, None)),
        ),
        ("status".into(), payload(&status)),
        ("refusal".into(), payload(&refusal)),
    ]
}

/// Streams of frames: an opening frame followed by control messages, with
/// different piece sizes (the first byte).
fn frames(messages: &[(String, Vec<u8>)]) -> Vec<Seed> {
    let frame = |payload: &[u8]| {
        let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(payload);
        frame
    };
    let by_name = |name: &str| {
        messages
            .iter()
            .find(|(candidate, _)| candidate == name)
            .map(|(_, payload)| frame(payload))
            .expect("a seed message of that name")
    };
    let stream = |piece: u8, names: &[&str]| {
        let mut bytes = vec![piece];
        for name in names {
            bytes.extend(by_name(name));
        }
        bytes
    };
    let mut oversized = vec![3];
    oversized.extend(by_name("open-bundle"));
    oversized.extend(u32::MAX.to_be_bytes());
    let mut truncated = stream(1, &["open-join"]);
    truncated.extend(&by_name("up-ack")[..3]);
    let framed = encode_frame(&UpMessage::Ping { nonce: 5 }).expect("a ping frames");
    vec![
        seed(
            "frame_decoder",
            "control-up",
            stream(
                0,
                &[
                    "open-control",
                    "up-ack",
                    "up-inventory",
                    "up-status",
                    "up-ping",
                ],
            ),
        ),
        seed(
            "frame_decoder",
            "control-down",
            stream(
                13,
                &[
                    "down-welcome",
                    "down-snapshot",
                    "down-delta",
                    "down-pong",
                    "down-refused",
                ],
            ),
        ),
        seed(
            "frame_decoder",
            "bundle",
            stream(200, &["open-bundle", "bundle-found"]),
        ),
        seed(
            "frame_decoder",
            "join",
            stream(255, &["open-join", "join-accepted"]),
        ),
        seed("frame_decoder", "oversized-header", oversized),
        seed("frame_decoder", "truncated", truncated),
        seed("frame_decoder", "encode-frame", [vec![7], framed].concat()),
    ]
}

/// Tokens signed with a throwaway key, and broken ones.
fn tokens() -> Vec<Seed> {
    use ring::rand::SystemRandom;
    use ring::signature::Ed25519KeyPair;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a key");
    let token = relaymesh_node::token::issue(pkcs8.as_ref(), &claims()).expect("a token");
    let relay = relaymesh_node::token::issue(
        pkcs8.as_ref(),
        &TokenClaims {
            role: Role::Relay,
            parent_addresses: vec![],
            ..claims()
        },
    )
    .expect("a token");
    vec![
        seed("join_token", "agent", token.clone().into_bytes()),
        seed("join_token", "relay", relay.into_bytes()),
        seed("join_token", "padded", format!("  {token}\n").into_bytes()),
        seed("join_token", "no-signature", b"rmt4.AAAA".to_vec()),
    ]
}
