//! Queries about this node that only the node can answer: an agent's
//! reading of its own cluster ([`Action::Asked`](relaymesh_core::Action::Asked)).
//!
//! The daemon knows no cluster. It hands each query to whoever
//! [`AgentHooks::queries`](super::AgentHooks::queries) names (the edge
//! agent's answerer), without waiting, and turns the reply into an event
//! the core is handed back. A node with nobody to ask (a relay, or an agent
//! without cluster access) answers at once that it has nothing to read.
//! The queue is bounded; a full one is answered as unavailable at once, so
//! a flood of queries costs the node at most the queue, and the core's
//! timeout answers what the answerer never does.

use relaymesh_protocol::query::{Answer, Query};
use relaymesh_protocol::{ErrorCode, Refusal};
use tokio::sync::{mpsc, oneshot};

use super::Event;

/// How many queries may wait for an agent's answerer at once.
pub const ASKED_QUEUE: usize = 32;

/// One query for the agent's answerer, and where its answer goes.
#[derive(Debug)]
pub struct AskedQuery {
    /// What is asked.
    pub query: Query,
    /// The answer; dropping it unanswered makes the query fail at once.
    pub reply: oneshot::Sender<Answer>,
}

/// What became of handing a query over.
pub(super) enum Handed {
    /// The answer will come as [`Event::LocalAnswer`].
    Waiting,
    /// Nobody could take it: answer this now.
    Answer(Answer),
}

/// Hands `query` (the core's id `id`) to `answerer`; its answer comes back
/// through `events` as [`Event::LocalAnswer`].
pub(super) fn hand_over(
    name: &str,
    answerer: Option<&mpsc::Sender<AskedQuery>>,
    events: &mpsc::Sender<Event>,
    id: relaymesh_core::QueryId,
    query: Query,
) -> Handed {
    let failed =
        |code, message: String| Handed::Answer(Answer::Failed(Refusal::new(code, message)));
    let Some(answerer) = answerer else {
        return failed(
            ErrorCode::NotFound,
            format!("{name} has no cluster access configured: nothing to read"),
        );
    };
    let (reply, answer) = oneshot::channel();
    if answerer.try_send(AskedQuery { query, reply }).is_err() {
        return failed(
            ErrorCode::Unavailable,
            format!("{name} has {ASKED_QUEUE} cluster reads waiting; try again"),
        );
    }
    let events = events.clone();
    let name = name.to_string();
    tokio::spawn(async move {
        let answer = answer.await.unwrap_or_else(|_| {
            let message = format!("{name}'s cluster reader stopped before it answered");
            Answer::Failed(Refusal::new(ErrorCode::Unavailable, message))
        });
        let _ = events.send(Event::LocalAnswer { id, answer }).await;
    });
    Handed::Waiting
}
