//! Queries routed down the tree to the one node that can answer them, and
//! their answers routed back up.
//!
//! A query starts at a daemon ([`Core::query`], at the root for the API) or
//! arrives from the parent. The core answers what it knows itself (the link
//! of a direct child, which it measures), refuses what cannot lie below it,
//! and forwards the rest to the child whose subtree holds the node, under an
//! id of its own. Each forwarded query waits in a bounded table until its
//! answer comes back on the same link, the link drops, or it expires; an
//! answer on any other link, or for an id not waiting, is dropped. So a
//! child can neither answer a question it was not asked nor fill this
//! relay's memory, and a parent's flood of queries costs at most the bound.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use relaymesh_protocol::message::{DownMessage, UpMessage};
use relaymesh_protocol::query::{Answer, Query};
use relaymesh_protocol::{ErrorCode, Refusal};

use super::{Action, Core, LinkId, Now};

/// Names a query the daemon started with [`Core::query`]; its answer comes
/// back as [`Action::Answered`] with the same id.
pub type QueryId = u64;

/// How long a forwarded query waits for its answer. Each level waits as
/// long; a query that finds no answer in time is answered as failed where
/// it started.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many forwarded queries may wait at once; more are refused at once.
pub const MAX_PENDING_QUERIES: usize = 1024;

/// Where the answer to a forwarded query goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// To this node's daemon, under this id.
    Local(QueryId),
    /// Up to the parent, under the id the parent chose.
    Parent(u64),
}

#[derive(Debug)]
struct Pending {
    origin: Origin,
    /// The child link the query went down; only it may answer.
    link: LinkId,
    expires: Instant,
}

/// The queries this node forwarded and still waits on.
#[derive(Debug, Default)]
pub(crate) struct Queries {
    /// The next id, for queries this node forwards and for [`Core::query`]
    /// (one counter, so an id never names two things).
    next: u64,
    pending: BTreeMap<u64, Pending>,
}

impl Queries {
    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// When the oldest waiting query expires.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.pending.values().map(|pending| pending.expires).min()
    }
}

impl Core {
    /// Asks `node` (or, for [`Query::Link`], its parent) `query` on behalf
    /// of this node's daemon. The answer, possibly at once and possibly a
    /// failure, is [`Action::Answered`] with the returned id.
    pub fn query(&mut self, now: Now, node: &str, query: Query) -> QueryId {
        let id = self.queries.next_id();
        self.route_query(now, Origin::Local(id), node, query);
        id
    }

    /// A query from the parent.
    pub(super) fn parent_query(&mut self, now: Now, id: u64, node: String, query: Query) {
        self.route_query(now, Origin::Parent(id), &node, query);
    }

    /// An answer from a child: passed on only if this relay asked that
    /// child that question.
    pub(super) fn child_answered(&mut self, link: LinkId, id: u64, answer: Answer) {
        match self.queries.pending.get(&id) {
            Some(pending) if pending.link == link => {
                let origin = pending.origin;
                self.queries.pending.remove(&id);
                self.answer(origin, answer);
            }
            _ => tracing::warn!(link, id, "dropped an answer to no query asked on this link"),
        }
    }

    /// Fails every query waiting on a child link that ended.
    pub(super) fn queries_link_lost(&mut self, link: LinkId, child: &str) {
        let why = format!("{child} disconnected before it answered");
        self.fail_queries(|pending| pending.link == link, &why);
    }

    /// Forgets the queries the parent asked: their answers have nowhere to
    /// go once its link ended (it failed them on its side).
    pub(super) fn queries_parent_lost(&mut self) {
        self.queries
            .pending
            .retain(|_, pending| matches!(pending.origin, Origin::Local(_)));
    }

    /// Fails the queries whose time ran out.
    pub(super) fn expire_queries(&mut self, now: Now) {
        let why = format!("no answer within {}s", QUERY_TIMEOUT.as_secs());
        self.fail_queries(|pending| pending.expires <= now.instant, &why);
    }

    /// Answers the waiting queries `which` selects as failed, `why`.
    fn fail_queries(&mut self, which: impl Fn(&Pending) -> bool, why: &str) {
        let failed: Vec<u64> = self
            .queries
            .pending
            .iter()
            .filter(|(_, pending)| which(pending))
            .map(|(id, _)| *id)
            .collect();
        for id in failed {
            if let Some(pending) = self.queries.pending.remove(&id) {
                let refusal = Refusal::new(ErrorCode::Unavailable, why);
                self.answer(pending.origin, Answer::Failed(refusal));
            }
        }
    }

    fn route_query(&mut self, now: Now, origin: Origin, node: &str, query: Query) {
        let failed = |code, message: String| Answer::Failed(Refusal::new(code, message));
        if let Some(answer) = self.answer_here(node, &query) {
            self.answer(origin, answer);
            return;
        }
        let Some(child) = self.inventory.index().via(node).map(str::to_string) else {
            let message = format!("no node {node:?} below {}", self.name);
            self.answer(origin, failed(ErrorCode::NotFound, message));
            return;
        };
        let Some(&link) = self.links_by_name.get(&child) else {
            let message = format!("{child}, on the path to {node}, is not connected");
            self.answer(origin, failed(ErrorCode::Unavailable, message));
            return;
        };
        if self.queries.pending.len() >= MAX_PENDING_QUERIES {
            let message = format!(
                "{} has {MAX_PENDING_QUERIES} queries in flight; try again",
                self.name
            );
            self.answer(origin, failed(ErrorCode::Unavailable, message));
            return;
        }
        let id = self.queries.next_id();
        self.queries.pending.insert(
            id,
            Pending {
                origin,
                link,
                expires: now.instant + QUERY_TIMEOUT,
            },
        );
        self.actions.push_back(Action::SendDown {
            link,
            message: DownMessage::Query {
                id,
                node: node.to_string(),
                query,
            },
        });
    }

    /// The answer this node gives itself, if it is the one that knows.
    fn answer_here(&self, node: &str, query: &Query) -> Option<Answer> {
        match query {
            Query::Link if node == self.name => {
                let message = match self.upstream.has_parent() {
                    true => format!("{node}'s link is measured by its parent, not by {node}"),
                    false => format!("{node} is the root: it has no parent link"),
                };
                Some(Answer::Failed(Refusal::new(ErrorCode::NotFound, message)))
            }
            // A direct child is its own way down (the index knows which
            // link reported each node; a record's parent field is the
            // child's word).
            Query::Link if self.inventory.index().via(node) == Some(node) => {
                let status = self.inventory.measured_link(node)?;
                Some(Answer::Link {
                    parent: self.name.clone(),
                    status,
                })
            }
            Query::Link => None,
        }
    }

    fn answer(&mut self, origin: Origin, answer: Answer) {
        match origin {
            Origin::Local(query) => self.actions.push_back(Action::Answered { query, answer }),
            Origin::Parent(id) => self
                .actions
                .push_back(Action::SendUp(UpMessage::Answer { id, answer })),
        }
    }
}
