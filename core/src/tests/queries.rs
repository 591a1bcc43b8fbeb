//! Queries routed down the tree and their answers routed back: answered by
//! the one node that knows, failed clearly when no answer can come, and
//! never answerable by a child that was not asked.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use relaymesh_protocol::query::{Answer, Observation, Query, MAX_ANSWER_JSON_LEN};
use relaymesh_protocol::{ErrorCode, LinkStatus};

use super::*;

/// root ─┬─ eu ── eu-west ─┬─ edge-1
///       │                 └─ edge-2
///       └─ us ── edge-3
fn tree() -> Net {
    let mut net = Net::new();
    net.add("root", None);
    for (name, parent) in [("eu", "root"), ("us", "root"), ("eu-west", "eu")] {
        net.add(name, Some(parent));
    }
    for (name, parent) in [
        ("edge-1", "eu-west"),
        ("edge-2", "eu-west"),
        ("edge-3", "us"),
    ] {
        net.add_agent(name, parent, &[("region", "eu")]);
    }
    assert!(net.settle());
    net
}

fn stats(rtt_micros: u64, bytes_sent: u64) -> LinkStats {
    LinkStats {
        rtt: Duration::from_micros(rtt_micros),
        bytes_sent,
        bytes_received: bytes_sent / 2,
    }
}

fn ask(net: &mut Net, node: &str) -> Option<Answer> {
    let id = net.query("root", node, Query::Link).expect("the root");
    net["root"].answer(id).cloned()
}

fn link_answer(answer: Option<Answer>) -> (String, LinkStatus) {
    match answer {
        Some(Answer::Link { parent, status }) => (parent, status),
        other => panic!("expected a link, got {other:?}"),
    }
}

fn failure(answer: Option<Answer>) -> (ErrorCode, String) {
    match answer {
        Some(Answer::Failed(refusal)) => (refusal.code, refusal.message),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_deep_link_is_answered_by_the_parent_that_measured_it() {
    let mut net = tree();
    net.report_link_stats("edge-2", stats(2_345, 9_000))
        .expect("a node");
    net.report_link_stats("eu", stats(700, 100))
        .expect("a node");
    let before = *net["root"].traffic();

    let (parent, status) = link_answer(ask(&mut net, "edge-2"));
    assert_eq!(parent, "eu-west");
    assert!(status.connected);
    assert_eq!(
        (status.rtt_micros, status.bytes_sent, status.bytes_received),
        (2_345, 9_000, 4_500)
    );
    assert!(status.changed_unix_ms > 0, "{status:?}");
    // Answered through the tree: one question down, one answer up at the
    // root, and still nothing of edge-2's measurements in its inventory.
    let after = *net["root"].traffic();
    assert_eq!(
        after.messages_from_children - before.messages_from_children,
        1
    );
    let known = net.record("root", "edge-2").and_then(|record| record.link);
    assert_eq!(known.map(|link| link.rtt_micros), Some(0));

    // A direct child's link is the root's own measurement, asked of nobody.
    let (parent, status) = link_answer(ask(&mut net, "eu"));
    assert_eq!((parent.as_str(), status.rtt_micros), ("root", 700));
    assert_eq!(*net["root"].traffic(), after);
}

#[test]
fn what_cannot_be_answered_fails_with_a_reason() {
    let mut net = tree();
    let (code, message) = failure(ask(&mut net, "root"));
    assert_eq!(code, ErrorCode::NotFound);
    assert!(message.contains("no parent link"), "{message}");

    let (code, message) = failure(ask(&mut net, "nowhere"));
    assert_eq!(code, ErrorCode::NotFound);
    assert!(message.contains("\"nowhere\""), "{message}");

    // A relay on the path is down: its subtree is still in the inventory
    // (offline), but nobody can measure edge-1's link from here.
    net.disconnect("eu");
    let (code, message) = failure(ask(&mut net, "edge-1"));
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(message.contains("eu, on the path to edge-1"), "{message}");
    net.connect("eu");
    assert!(net.settle());
    let (parent, status) = link_answer(ask(&mut net, "edge-1"));
    assert_eq!(parent, "eu-west");
    assert!(status.connected);

    // A disconnected direct child answers with what its parent last saw.
    net.disconnect("edge-3");
    assert!(net.settle());
    let (parent, status) = link_answer(ask(&mut net, "edge-3"));
    assert_eq!(parent, "us");
    assert!(!status.connected);
}

/// From now on `relay` forwards no query down (it sends a pong instead),
/// as a silent or compromised relay would; returns the last forwarded id
/// it swallowed.
fn swallow_queries(net: &mut Net, relay: &str) -> Rc<Cell<u64>> {
    let swallowed = Rc::new(Cell::new(0));
    let seen = swallowed.clone();
    net.alter_down(relay, move |message| {
        if let DownMessage::Query { id, .. } = message {
            seen.set(*id);
            *message = DownMessage::Pong { nonce: *id };
        }
    })
    .expect("a node");
    swallowed
}

#[test]
fn an_unanswered_query_times_out_and_a_lost_link_fails_it_at_once() {
    let mut net = tree();
    swallow_queries(&mut net, "eu");
    let id = net.query("root", "edge-1", Query::Link).expect("the root");
    assert_eq!(net["root"].answer(id), None, "still waiting");
    net.advance(QUERY_TIMEOUT - Duration::from_millis(1));
    assert_eq!(net["root"].answer(id), None, "still waiting");
    net.advance(Duration::from_millis(1));
    let (code, message) = failure(net["root"].answer(id).cloned());
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(message.contains("no answer within"), "{message}");

    // eu-west drops while eu waits on it: the failure comes back at once.
    let id = net.query("root", "edge-2", Query::Link).expect("the root");
    assert_eq!(net["root"].answer(id), None);
    net.disconnect("eu-west");
    let (code, message) = failure(net["root"].answer(id).cloned());
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(message.contains("eu-west disconnected"), "{message}");
}

#[test]
fn only_the_asked_child_can_answer_and_only_once() {
    let mut net = tree();
    let forwarded = swallow_queries(&mut net, "root");
    let id = net.query("root", "edge-1", Query::Link).expect("the root");
    let asked = forwarded.get();
    assert_ne!(asked, 0, "the root forwarded the query to eu");
    let forged = Answer::Link {
        parent: "eu-west".into(),
        status: LinkStatus {
            connected: true,
            rtt_micros: 1,
            ..LinkStatus::default()
        },
    };
    let deliver = |net: &mut Net, from: &str, id: u64, answer: &Answer| {
        let now = net.now();
        let link = net[from].link().expect("connected");
        let root = net.core_mut("root").expect("the root");
        root.handle_child_message(
            now,
            link,
            UpMessage::Answer {
                id,
                answer: answer.clone(),
            },
        );
        net.run();
    };
    // us was not asked; an id nobody waits on is nothing.
    deliver(&mut net, "us", asked, &forged);
    deliver(&mut net, "eu", asked + 1_000, &forged);
    assert_eq!(net["root"].answer(id), None);
    // eu was asked: its answer is passed on, once.
    deliver(&mut net, "eu", asked, &forged);
    assert_eq!(net["root"].answer(id), Some(&forged));
    let later = Answer::Failed(Refusal::new(ErrorCode::Internal, "late"));
    deliver(&mut net, "eu", asked, &later);
    assert_eq!(net["root"].answer(id), Some(&forged));
}

#[test]
fn queries_in_flight_are_bounded() {
    let mut net = tree();
    swallow_queries(&mut net, "root");
    let waiting: Vec<u64> = (0..MAX_PENDING_QUERIES)
        .map(|_| net.query("root", "edge-1", Query::Link).expect("the root"))
        .collect();
    assert!(waiting.iter().all(|id| net["root"].answer(*id).is_none()));
    let id = net.query("root", "edge-1", Query::Link).expect("the root");
    let (code, message) = failure(net["root"].answer(id).cloned());
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(message.contains("queries in flight"), "{message}");
    // What the root can answer itself still is.
    let (parent, _) = link_answer(ask(&mut net, "eu"));
    assert_eq!(parent, "root");
    // Once they expire there is room again.
    net.advance(QUERY_TIMEOUT);
    assert!(net["root"].answer(waiting[0]).is_some());
    net.alter_down("root", |_| {}).expect("a node");
    let (parent, _) = link_answer(ask(&mut net, "edge-1"));
    assert_eq!(parent, "eu-west");
}

fn deployment() -> Query {
    Query::Object {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: Some("shop".into()),
        name: "web".into(),
    }
}

fn observed(cluster: &str, json: &str) -> Observation {
    Observation {
        cluster: cluster.into(),
        json: json.as_bytes().to_vec(),
        age_ms: None,
    }
}

/// Has `agent`'s daemon answer the last query its core handed it.
fn agent_answers(net: &mut Net, agent: &str, answer: impl FnOnce(&Query) -> Answer) -> Query {
    let (id, query) = net[agent].asked().last().cloned().expect("a query asked");
    let now = net.now();
    let answer = answer(&query);
    net.core_mut(agent)
        .expect("a node")
        .handle_local_answer(now, id, answer);
    net.run();
    query
}

#[test]
fn an_object_is_read_by_the_agent_itself_and_comes_back_up() {
    let mut net = tree();
    let id = net.query("root", "edge-2", deployment()).expect("the root");
    assert_eq!(net["root"].answer(id), None, "the agent's daemon reads it");
    // Only edge-2's daemon was asked, once, with the question as asked.
    for other in ["edge-1", "edge-3", "eu-west", "eu"] {
        assert!(net[other].asked().is_empty(), "{other} was asked");
    }
    let json = r#"{"kind":"Deployment","status":{"readyReplicas":2}}"#;
    let asked = agent_answers(&mut net, "edge-2", |_| {
        Answer::Object(observed("edge-2", json))
    });
    assert_eq!(asked, deployment());
    assert_eq!(
        net["root"].answer(id),
        Some(&Answer::Object(observed("edge-2", json)))
    );

    let events = Query::Events {
        namespace: None,
        limit: 20,
    };
    let id = net
        .query("root", "edge-3", events.clone())
        .expect("the root");
    let asked = agent_answers(&mut net, "edge-3", |_| {
        Answer::Events(observed("edge-3", "[]"))
    });
    assert_eq!(asked, events);
    assert_eq!(
        net["root"].answer(id),
        Some(&Answer::Events(observed("edge-3", "[]")))
    );
}

#[test]
fn a_relay_has_no_cluster_to_read() {
    let mut net = tree();
    for relay in ["eu-west", "root"] {
        let id = net.query("root", relay, deployment()).expect("the root");
        let (code, message) = failure(net["root"].answer(id).cloned());
        assert_eq!(code, ErrorCode::NotFound);
        assert!(message.contains("is a relay"), "{message}");
    }
}

#[test]
fn a_wrong_oversized_or_foreign_answer_is_refused_on_the_way_up() {
    let mut net = tree();
    let bad = [
        (
            Answer::Events(observed("edge-1", "[]")),
            "not an answer to the question",
        ),
        (Answer::Object(observed("edge-2", "{}")), "\"edge-2\"'s"),
        (
            Answer::Object(Observation {
                json: vec![b' '; MAX_ANSWER_JSON_LEN + 1],
                ..observed("edge-1", "")
            }),
            "more than the",
        ),
    ];
    for (answer, why) in bad {
        let id = net.query("root", "edge-1", deployment()).expect("the root");
        agent_answers(&mut net, "edge-1", |_| answer);
        let (_, message) = failure(net["root"].answer(id).cloned());
        assert!(message.contains(why), "{message}");
    }
    // None of them was kept to be shown later.
    assert_eq!(net.core_mut("eu-west").expect("a node").cached_answers(), 0);
}

#[test]
fn a_cut_off_cluster_is_answered_stale_with_its_age_by_its_parent() {
    let mut net = tree();
    // Nothing passed up yet: a clear failure.
    net.disconnect("edge-1");
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    let (code, message) = failure(net["root"].answer(id).cloned());
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(
        message.contains("edge-1 is not connected, and eu-west kept no earlier answer"),
        "{message}"
    );
    net.connect("edge-1");
    assert!(net.settle());

    let json = r#"{"status":{"readyReplicas":1}}"#;
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    agent_answers(&mut net, "edge-1", |_| {
        Answer::Object(observed("edge-1", json))
    });
    assert!(matches!(net["root"].answer(id), Some(Answer::Object(_))));

    net.disconnect("edge-1");
    net.advance(Duration::from_secs(30));
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    let Some(Answer::Object(stale)) = net["root"].answer(id).cloned() else {
        panic!("{:?}", net["root"].answer(id));
    };
    assert_eq!(stale.json, json.as_bytes());
    assert_eq!(stale.cluster, "edge-1");
    let age = stale.age_ms.expect("marked stale");
    assert!((30_000..31_000).contains(&age), "{age}");
    // Answered by edge-1's parent, the nearest relay that kept it: the
    // agent was not asked again.
    assert_eq!(net["edge-1"].asked().len(), 1);
    // Another question about it was never answered live: nothing to show.
    let other = Query::Events {
        namespace: None,
        limit: 5,
    };
    let id = net.query("root", "edge-1", other).expect("the root");
    let (_, message) = failure(net["root"].answer(id).cloned());
    assert!(message.contains("kept no earlier answer"), "{message}");

    // A relay on the path down: the root kept the answer too.
    net.connect("edge-1");
    assert!(net.settle());
    net.disconnect("eu");
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    assert!(
        matches!(net["root"].answer(id), Some(Answer::Object(o)) if o.age_ms.is_some()),
        "{:?}",
        net["root"].answer(id)
    );
}

#[test]
fn an_agent_that_does_not_answer_in_time_is_answered_stale() {
    let mut net = tree();
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    agent_answers(&mut net, "edge-1", |_| {
        Answer::Object(observed("edge-1", "{}"))
    });
    assert!(matches!(net["root"].answer(id), Some(Answer::Object(_))));
    // Asked again, the agent's daemon never answers.
    let id = net.query("root", "edge-1", deployment()).expect("the root");
    net.advance(QUERY_TIMEOUT);
    let answer = net["root"].answer(id).cloned();
    assert!(
        matches!(&answer, Some(Answer::Object(o)) if o.age_ms.is_some()),
        "{answer:?}"
    );
    // Its late answer goes nowhere.
    agent_answers(&mut net, "edge-1", |_| {
        Answer::Object(observed("edge-1", "{}"))
    });
    assert_eq!(net["root"].answer(id).cloned(), answer);
}

fn placement_answer(answer: Option<Answer>) -> Vec<(String, u64, u64, u64)> {
    match answer {
        Some(Answer::Placement { children, more: 0 }) => children
            .into_iter()
            .map(|child| {
                let counts = child.counts;
                (child.child, counts.ready, counts.failed, counts.offline)
            })
            .collect(),
        other => panic!("expected a placement answer, got {other:?}"),
    }
}

#[test]
fn each_relay_says_how_its_children_do_with_a_placement() {
    let mut net = tree();
    let now = net.now();
    for (agent, ready) in [("edge-1", true), ("edge-2", false), ("edge-3", true)] {
        let status = relaymesh_protocol::PlacementStatus {
            counts: relaymesh_protocol::PhaseCounts {
                ready: u64::from(ready),
                failed: u64::from(!ready),
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(node) = net.core_mut(agent) {
            node.set_own_status(now, "placement/shop/web", Some(status));
        }
    }
    assert!(net.settle());
    let key = "placement/shop/web".to_string();
    let mut asked = |node: &str| {
        let id = net
            .query("root", node, Query::Placement { key: key.clone() })
            .expect("the root");
        placement_answer(net["root"].answer(id).cloned())
    };
    // The root answers for itself at once; deeper relays through the tree.
    assert_eq!(
        asked("root"),
        [("eu".into(), 1, 1, 0), ("us".into(), 1, 0, 0)]
    );
    assert_eq!(asked("eu"), [("eu-west".into(), 1, 1, 0)]);
    assert_eq!(
        asked("eu-west"),
        [("edge-1".into(), 1, 0, 0), ("edge-2".into(), 0, 1, 0)]
    );
    // An agent has no children.
    assert_eq!(asked("edge-1"), []);
    // A disconnected child's clusters are offline.
    net.disconnect("edge-3");
    assert!(net.settle());
    let id = net
        .query("root", "us", Query::Placement { key: key.clone() })
        .expect("the root");
    assert_eq!(
        placement_answer(net["root"].answer(id).cloned()),
        [("edge-3".into(), 0, 0, 1)]
    );
}
