//! Round trips of every message, and hostile input that must fail cleanly.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::message::*;
use crate::query::{Answer, ChildCut, Observation, Query};
use crate::token::TokenClaims;
use crate::*;

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?"
}

fn bundle_id() -> impl Strategy<Value = BundleId> {
    any::<[u8; 32]>().prop_map(BundleId)
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Relay), Just(Role::Agent), Just(Role::Admin)]
}

fn refusal() -> impl Strategy<Value = Refusal> {
    let code = prop_oneof![
        Just(ErrorCode::Malformed),
        Just(ErrorCode::TokenExpired),
        Just(ErrorCode::TokenReused),
        Just(ErrorCode::Internal),
    ];
    (code, ".{0,40}").prop_map(|(code, message)| Refusal { code, message })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Everywhere),
        prop::collection::vec(name(), 0..4).prop_map(Target::Subtrees),
        placement_target().prop_map(Target::Placement),
    ]
}

fn selector_operator() -> impl Strategy<Value = SelectorOperator> {
    prop_oneof![
        Just(SelectorOperator::In),
        Just(SelectorOperator::NotIn),
        Just(SelectorOperator::Exists),
        Just(SelectorOperator::DoesNotExist),
    ]
}

fn label_selector() -> impl Strategy<Value = LabelSelector> {
    let requirement = (
        name(),
        selector_operator(),
        prop::collection::vec(name(), 0..3),
    )
        .prop_map(|(key, operator, values)| LabelRequirement {
            key,
            operator,
            values,
        });
    (
        prop::collection::btree_map(name(), name(), 0..3),
        prop::collection::vec(requirement, 0..3),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

fn quota() -> impl Strategy<Value = Quota> {
    (
        any::<u32>(),
        prop::collection::btree_map(name(), any::<u32>(), 0..3),
    )
        .prop_map(|(total, per_value)| Quota { total, per_value })
}

fn wave() -> impl Strategy<Value = Wave> {
    (
        proptest::option::of(name()),
        any::<u32>(),
        prop::collection::btree_map(name(), any::<u32>(), 0..3),
        proptest::option::of(any::<u32>()),
        prop::collection::btree_map(name(), any::<u32>(), 0..3),
    )
        .prop_map(
            |(key_label, total, per_value, per_value_cap, per_child)| Wave {
                key_label,
                total,
                per_value,
                per_value_cap,
                per_child,
            },
        )
}

fn placement_target() -> impl Strategy<Value = PlacementTarget> {
    (
        proptest::option::of(label_selector()),
        prop::collection::vec(name(), 0..3),
        proptest::option::of(any::<u32>()),
        proptest::option::of(name()),
        proptest::option::of(quota()),
        proptest::option::of(wave()),
    )
        .prop_map(
            |(selector, names, max_clusters, spread_by, quota, wave)| PlacementTarget {
                selector,
                names,
                max_clusters,
                spread_by,
                quota,
                wave: wave.map(Box::new),
            },
        )
}

fn entry() -> impl Strategy<Value = SliceEntry> {
    (
        name(),
        target(),
        prop::collection::vec(bundle_id(), 0..3),
        prop::collection::vec(any::<u8>(), 0..64),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..65),
    )
        .prop_map(
            |(key, target, bundles, body, serial, signature)| SliceEntry {
                key,
                target,
                bundles,
                body,
                serial,
                signature,
            },
        )
}

fn change() -> impl Strategy<Value = SliceChange> {
    prop_oneof![
        entry().prop_map(SliceChange::Upsert),
        name().prop_map(SliceChange::Remove)
    ]
}

fn link() -> impl Strategy<Value = LinkStatus> {
    (any::<bool>(), any::<[u64; 8]>()).prop_map(|(connected, n)| LinkStatus {
        connected,
        rtt_micros: n[0],
        bytes_sent: n[1],
        bytes_received: n[2],
        acked_revision: n[3],
        revision_lag: n[4],
        changed_unix_ms: n[5],
        bundles_served: n[6],
        bundle_bytes_served: n[7],
    })
}

fn record() -> impl Strategy<Value = NodeRecord> {
    (
        name(),
        role(),
        proptest::option::of(name()),
        prop::collection::btree_map(name(), name(), 0..3),
        prop::collection::vec("[0-9.:]{1,21}", 0..2),
        proptest::option::of(link()),
        any::<u64>(),
        prop::collection::btree_map(name(), any::<u64>(), 0..3),
    )
        .prop_map(
            |(name, role, parent, labels, addresses, link, refused_entries, limit_refusals)| {
                NodeRecord {
                    name,
                    role,
                    parent,
                    labels: labels.into(),
                    addresses,
                    version: "0.1.0".into(),
                    capacity: [("cpu".to_string(), "4".to_string())].into(),
                    link,
                    refused_entries,
                    limit_refusals,
                }
            },
        )
}

fn inventory() -> impl Strategy<Value = InventoryUpdate> {
    prop_oneof![
        (
            prop::collection::vec(record(), 0..3),
            prop::collection::vec(name(), 0..3)
        )
            .prop_map(|(upserts, removals)| InventoryUpdate::Delta { upserts, removals }),
        (
            prop::collection::vec(record(), 0..3),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(records, first, last)| InventoryUpdate::Full {
                records,
                first,
                last
            }),
    ]
}

fn open() -> impl Strategy<Value = Open> {
    let hello = (
        any::<u16>(),
        any::<u16>(),
        proptest::option::of((any::<u64>(), any::<u64>())),
    )
        .prop_map(|(min_version, max_version, resume)| {
            Open::Control(Hello {
                min_version,
                max_version,
                resume: resume.map(|(epoch, revision)| Resume { epoch, revision }),
            })
        });
    let join = (
        ".{0,60}",
        name(),
        role(),
        prop::collection::vec(any::<u8>(), 0..40),
        proptest::option::of(prop::collection::vec(any::<u8>(), 0..40)),
    )
        .prop_map(|(token, name, role, tls_csr_der, issuer_csr_der)| {
            Open::Join(JoinRequest {
                version: 1,
                token,
                name,
                role,
                tls_csr_der,
                issuer_csr_der,
            })
        });
    prop_oneof![
        hello,
        bundle_id().prop_map(|id| Open::Bundle(BundleRequest { id })),
        join
    ]
}

fn up() -> impl Strategy<Value = UpMessage> {
    prop_oneof![
        any::<u64>().prop_map(|revision| UpMessage::Ack { revision }),
        inventory().prop_map(UpMessage::Inventory),
        any::<u64>().prop_map(|nonce| UpMessage::Ping { nonce }),
        (
            any::<bool>(),
            prop::collection::vec(
                (name(), any::<[u64; 5]>(), proptest::option::of(".{0,20}")),
                0..3
            ),
            prop::collection::vec(name(), 0..3),
        )
            .prop_map(|(full, upserts, removals)| UpMessage::Status(StatusUpdate {
                full,
                upserts: upserts
                    .into_iter()
                    .map(|(key, n, message)| {
                        let counts = PhaseCounts {
                            pending: n[0],
                            applied: n[1],
                            ready: n[2],
                            failed: n[3],
                            offline: n[4],
                        };
                        (
                            key,
                            PlacementStatus {
                                counts,
                                failing: message
                                    .iter()
                                    .map(|message| FailingCluster {
                                        cluster: "edge-1".into(),
                                        message: message.clone(),
                                    })
                                    .collect(),
                                message,
                                // The pending count stands in for a
                                // revision's, so every field varies.
                                revisions: vec![RevisionCounts {
                                    revision: BundleId([n[0] as u8; 32]),
                                    waiting: n[0],
                                    updating: n[1],
                                    succeeded: n[2],
                                    failed: n[3],
                                }],
                                ..PlacementStatus::default()
                            },
                        )
                    })
                    .collect(),
                removals,
            })),
        (any::<u64>(), answer()).prop_map(|(id, answer)| UpMessage::Answer { id, answer }),
    ]
}

fn observation() -> impl Strategy<Value = Observation> {
    (
        name(),
        prop::collection::vec(any::<u8>(), 0..256),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(cluster, json, age_ms)| Observation {
            cluster,
            json,
            age_ms,
        })
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        (name(), link()).prop_map(|(parent, status)| Answer::Link { parent, status }),
        refusal().prop_map(Answer::Failed),
        observation().prop_map(Answer::Object),
        observation().prop_map(Answer::Events),
        (
            proptest::option::of(quota()),
            prop::collection::vec(child_cut(), 0..4),
            any::<u64>()
        )
            .prop_map(|(quota, children, more)| Answer::Split {
                quota,
                children,
                more
            }),
    ]
}

fn child_cut() -> impl Strategy<Value = ChildCut> {
    (
        name(),
        proptest::option::of(quota()),
        any::<u32>(),
        proptest::option::of(any::<u32>()),
        any::<bool>(),
    )
        .prop_map(|(child, quota, named, wave, kept)| ChildCut {
            child,
            quota,
            named,
            wave,
            kept,
        })
}

fn any_query() -> impl Strategy<Value = Query> {
    prop_oneof![
        Just(Query::Link),
        (
            "[a-z.]{0,12}",
            "v[0-9]",
            "[A-Z][a-z]{0,10}",
            proptest::option::of(name()),
            name()
        )
            .prop_map(|(group, version, kind, namespace, name)| Query::Object {
                group,
                version,
                kind,
                namespace,
                name,
            }),
        (proptest::option::of(name()), any::<u32>())
            .prop_map(|(namespace, limit)| Query::Events { namespace, limit }),
        name().prop_map(|key| Query::Placement { key }),
        name().prop_map(|key| Query::Split { key }),
    ]
}

fn down() -> impl Strategy<Value = DownMessage> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::vec(change(), 0..4)
        )
            .prop_map(|(base, revision, changes)| DownMessage::Delta {
                base,
                revision,
                changes
            }),
        (
            any::<u64>(),
            prop::collection::vec(entry(), 0..4),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(revision, entries, first, last)| DownMessage::Snapshot {
                revision,
                entries,
                first,
                last
            }),
        any::<u64>().prop_map(|nonce| DownMessage::Pong { nonce }),
        refusal().prop_map(DownMessage::Refused),
        (any::<u64>(), name(), any_query()).prop_map(|(id, node, query)| DownMessage::Query {
            id,
            node,
            query
        }),
        (any::<u16>(), name(), any::<u64>()).prop_map(|(version, parent, epoch)| {
            DownMessage::Welcome(Welcome {
                version,
                ancestors: vec![parent.clone()],
                parent,
                epoch,
            })
        }),
    ]
}

fn replies() -> impl Strategy<Value = (BundleReply, JoinReply)> {
    let bundle = prop_oneof![
        (bundle_id(), any::<u64>()).prop_map(|(id, len)| BundleReply::Found { id, len }),
        bundle_id().prop_map(|id| BundleReply::Missing { id }),
        refusal().prop_map(BundleReply::Refused),
    ];
    let join = prop_oneof![
        (
            prop::collection::vec(any::<u8>(), 0..32),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), 0..3),
            name()
        )
            .prop_map(|(ca_cert_der, tls_chain_der, parent)| JoinReply::Accepted(
                JoinGrant {
                    ca_cert_der,
                    issuer_chain_der: Some(tls_chain_der.clone()),
                    tls_chain_der,
                    token_key: vec![7; 32],
                    parent,
                }
            )),
        refusal().prop_map(JoinReply::Refused),
    ];
    (bundle, join)
}

fn round_trip<T>(message: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let frame = encode_frame(message).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut buffer = FrameBuffer::new();
    // Feed the frame one byte at a time: a transport may split it anywhere.
    for byte in &frame {
        prop_assert!(buffer
            .next_payload()
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .is_none());
        buffer.extend(std::slice::from_ref(byte));
    }
    let payload = buffer
        .next_payload()
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .ok_or_else(|| TestCaseError::fail("no frame"))?;
    let decoded: T = decode(&payload).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&decoded, message);
    prop_assert_eq!(buffer.buffered(), 0);
    Ok(())
}

proptest! {
    #[test]
    fn open_round_trips(message in open()) { round_trip(&message)?; }

    #[test]
    fn up_round_trips(message in up()) { round_trip(&message)?; }

    #[test]
    fn down_round_trips(message in down()) { round_trip(&message)?; }

    #[test]
    fn replies_round_trip((bundle, join) in replies()) {
        round_trip(&bundle)?;
        round_trip(&join)?;
    }

    #[test]
    fn token_claims_round_trip(name in name(), parent in name(), issuers in prop::collection::vec(name(), 0..6), id in any::<[u8; 16]>(), not_after_unix in any::<u64>(), keys in any::<([u8; 32], [u8; 32], [u8; 32])>()) {
        round_trip(&TokenClaims {
            id,
            name,
            role: Role::Agent,
            parent,
            parent_addresses: vec!["127.0.0.1:7443".into()],
            parent_issuers: issuers,
            ca_sha256: [3; 32],
            not_after_unix,
            candidates: vec![crate::CandidateParent {
                name: "us".into(),
                addresses: vec!["127.0.0.2:7443".into()],
                issuers: Vec::new(),
                issuer_key: keys.0,
            }],
            token_key: keys.1,
            parent_issuer_key: keys.2,
        })?;
    }

    #[test]
    fn truncated_input_is_an_error(message in down(), cut in any::<prop::sample::Index>()) {
        let payload = encode(&message).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cut = cut.index(payload.len().max(1));
        if cut < payload.len() {
            prop_assert!(decode::<DownMessage>(&payload[..cut]).is_err());
        }
    }

    #[test]
    fn random_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode::<Open>(&bytes);
        let _ = decode::<UpMessage>(&bytes);
        let _ = decode::<DownMessage>(&bytes);
        let _ = decode::<JoinReply>(&bytes);
        let _ = decode::<BundleReply>(&bytes);
        let mut buffer = FrameBuffer::new();
        buffer.extend(&bytes);
        while let Ok(Some(payload)) = buffer.next_payload() {
            let _ = decode::<UpMessage>(&payload);
        }
    }

    #[test]
    fn trailing_bytes_are_an_error(message in up(), extra in prop::collection::vec(any::<u8>(), 1..8)) {
        let mut payload = encode(&message).map_err(|e| TestCaseError::fail(e.to_string()))?;
        payload.extend(extra);
        prop_assert!(decode::<UpMessage>(&payload).is_err());
    }
}

#[test]
fn oversized_header_is_refused_before_buffering() {
    let mut buffer = FrameBuffer::new();
    buffer.extend(&((MAX_FRAME_LEN as u32) + 1).to_be_bytes());
    assert!(matches!(
        buffer.next_payload(),
        Err(CodecError::TooLarge { .. })
    ));
}

proptest! {
    #[test]
    fn an_opening_frame_is_held_to_its_own_limit(len in any::<u32>()) {
        let limit = crate::limits::MAX_OPENING_FRAME_LEN;
        let checked = payload_len_within(len.to_be_bytes(), limit);
        match checked {
            Ok(found) => prop_assert!(found == len as usize && found <= limit),
            Err(CodecError::TooLargeHere { len: found, .. }) => {
                prop_assert!(found > limit && found <= MAX_FRAME_LEN)
            }
            Err(CodecError::TooLarge { len: found }) => prop_assert!(found > MAX_FRAME_LEN),
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}

#[test]
fn huge_collection_length_is_refused_without_allocating() {
    // A Delta claiming u64::MAX changes: the varint length is honest bincode,
    // but the limit must stop it before any allocation.
    let mut payload = vec![1u8]; // DownMessage::Delta
    payload.push(0); // base
    payload.push(0); // revision
    payload.push(253); // varint marker for a u64
    payload.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        decode::<DownMessage>(&payload),
        Err(CodecError::Malformed(_))
    ));
}

#[test]
fn oversized_message_is_refused_on_encode() {
    let message = DownMessage::Snapshot {
        revision: 1,
        entries: vec![SliceEntry {
            key: "big".into(),
            target: Target::Everywhere,
            bundles: vec![],
            body: vec![0; MAX_FRAME_LEN + 1],
            serial: 1,
            signature: vec![0; 64],
        }],
        first: true,
        last: true,
    };
    assert!(encode(&message).is_err());
    let _unused: BTreeMap<u8, u8> = BTreeMap::new();
}

#[test]
fn the_largest_observation_fits_one_frame() {
    let answer = UpMessage::Answer {
        id: u64::MAX,
        answer: Answer::Object(Observation {
            cluster: "c".repeat(crate::limits::MAX_NAME_LEN),
            json: vec![b'x'; crate::query::MAX_ANSWER_JSON_LEN],
            age_ms: Some(u64::MAX),
        }),
    };
    let frame = encode_frame(&answer).expect("within the frame limit");
    assert!(frame.len() < MAX_FRAME_LEN / 32, "{}", frame.len());
    let mut buffer = FrameBuffer::new();
    buffer.extend(&frame);
    let payload = buffer.next_payload().expect("a frame").expect("whole");
    assert_eq!(decode::<UpMessage>(&payload).expect("decodes"), answer);
}
