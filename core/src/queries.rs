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
//!
//! A query about an agent's cluster ([`Query::Object`], [`Query::Events`])
//! is answered by the agent's daemon, which reads its cluster: the core
//! hands it over as [`Action::Asked`] and waits for
//! [`Core::handle_local_answer`] under the same bound and timeout. On the
//! way back every relay keeps the last live answer to each such query
//! ([`cache`]); when the link towards the cluster is down, or the answer
//! does not come, it answers from there, marked stale with its age. An
//! answer of the wrong kind, about another cluster, or larger than
//! [`MAX_ANSWER_JSON_LEN`] is replaced by a failure saying so.

mod cache;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use relaymesh_protocol::message::{DownMessage, UpMessage};
use relaymesh_protocol::query::{Answer, Query, MAX_ANSWER_JSON_LEN, MAX_CHILDREN_ANSWERED};
use relaymesh_protocol::{ErrorCode, Refusal, Role};

use super::{Action, Core, LinkId, Now};
use cache::AnswerCache;
pub use cache::{MAX_CACHED_ANSWERS, MAX_CACHED_BYTES};

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
    /// The child link the query went down; only it may answer. `None`:
    /// this node's daemon was asked ([`Action::Asked`]).
    link: Option<LinkId>,
    /// The node asked about, and what was asked.
    node: String,
    query: Query,
    expires: Instant,
}

/// The queries this node forwarded and still waits on.
#[derive(Debug, Default)]
pub(crate) struct Queries {
    /// The next id, for queries this node forwards and for [`Core::query`]
    /// (one counter, so an id never names two things).
    next: u64,
    pending: BTreeMap<u64, Pending>,
    /// The last live answers about clusters that passed through here.
    cache: AnswerCache,
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

    /// How many answers about clusters this node keeps for stale answers.
    pub fn cached(&self) -> usize {
        self.cache.len()
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

    /// How many answers about clusters this node keeps, to answer with
    /// when a cluster cannot be reached (at most [`MAX_CACHED_ANSWERS`]).
    pub fn cached_answers(&self) -> usize {
        self.queries.cached()
    }

    /// A query from the parent.
    pub(super) fn parent_query(&mut self, now: Now, id: u64, node: String, query: Query) {
        self.route_query(now, Origin::Parent(id), &node, query);
    }

    /// The daemon's answer to the [`Action::Asked`] with this id (an
    /// agent's reading of its cluster). An id no longer waiting (expired,
    /// or its parent link ended) is ignored.
    pub fn handle_local_answer(&mut self, now: Now, id: QueryId, answer: Answer) {
        self.take_answer(now, None, id, answer);
    }

    /// An answer from a child: passed on only if this relay asked that
    /// child that question.
    pub(super) fn child_answered(&mut self, now: Now, link: LinkId, id: u64, answer: Answer) {
        self.take_answer(now, Some(link), id, answer);
    }

    /// Fails every query waiting on a child link that ended (with a stale
    /// answer where one is kept).
    pub(super) fn queries_link_lost(&mut self, now: Now, link: LinkId, child: &str) {
        let why = format!("{child} disconnected before it answered");
        self.fail_queries(now, |pending| pending.link == Some(link), &why);
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
        self.fail_queries(now, |pending| pending.expires <= now.instant, &why);
    }

    /// Passes on the answer to `id` if it was asked on `link` (`None`: of
    /// this node's daemon), checked against what was asked, and keeps a
    /// live observation for stale answers later.
    fn take_answer(&mut self, now: Now, link: Option<LinkId>, id: u64, answer: Answer) {
        let asked = self.queries.pending.get(&id).map(|pending| pending.link);
        if asked != Some(link) {
            tracing::warn!(
                ?link,
                id,
                "dropped an answer to no query asked on this link"
            );
            return;
        }
        let Some(pending) = self.queries.pending.remove(&id) else {
            return;
        };
        let answer = checked(&pending.node, &pending.query, answer);
        if link.is_some() {
            self.queries
                .cache
                .keep(now.instant, &pending.node, &pending.query, &answer);
        }
        self.answer(pending.origin, answer);
    }

    /// Answers the waiting queries `which` selects as failed, `why`, or
    /// with a stale answer where one is kept.
    fn fail_queries(&mut self, now: Now, which: impl Fn(&Pending) -> bool, why: &str) {
        let failed: Vec<u64> = self
            .queries
            .pending
            .iter()
            .filter(|(_, pending)| which(pending))
            .map(|(id, _)| *id)
            .collect();
        for id in failed {
            if let Some(pending) = self.queries.pending.remove(&id) {
                let answer = self
                    .queries
                    .cache
                    .stale(now.instant, &pending.node, &pending.query)
                    .unwrap_or_else(|| Answer::Failed(Refusal::new(ErrorCode::Unavailable, why)));
                self.answer(pending.origin, answer);
            }
        }
    }

    fn route_query(&mut self, now: Now, origin: Origin, node: &str, query: Query) {
        let failed = |code, message: String| Answer::Failed(Refusal::new(code, message));
        if let Some(answer) = self.answer_here(node, &query) {
            self.answer(origin, answer);
            return;
        }
        let own = node == self.name;
        let child = match own {
            true => None,
            false => self.inventory.index().via(node).map(str::to_string),
        };
        if !own && child.is_none() {
            let message = format!("no node {node:?} below {}", self.name);
            self.answer(origin, failed(ErrorCode::NotFound, message));
            return;
        }
        let link = child
            .as_ref()
            .and_then(|child| self.links_by_name.get(child).copied());
        if let (Some(child), None) = (&child, link) {
            if let Some(stale) = self.queries.cache.stale(now.instant, node, &query) {
                self.answer(origin, stale);
                return;
            }
            let mut message = match child == node {
                true => format!("{node} is not connected"),
                false => format!("{child}, on the path to {node}, is not connected"),
            };
            if query != Query::Link {
                message.push_str(&format!(
                    ", and {} kept no earlier answer to show",
                    self.name
                ));
            }
            self.answer(origin, failed(ErrorCode::Unavailable, message));
            return;
        }
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
                node: node.to_string(),
                query: query.clone(),
                expires: now.instant + QUERY_TIMEOUT,
            },
        );
        self.actions.push_back(match link {
            Some(link) => Action::SendDown {
                link,
                message: DownMessage::Query {
                    id,
                    node: node.to_string(),
                    query,
                },
            },
            None => Action::Asked { id, query },
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
            Query::Object { .. } | Query::Events { .. } if node == self.name => {
                let role = Some(self.inventory.own().role);
                (role != Some(Role::Agent)).then(|| {
                    let message = format!(
                        "{node} is a relay: it has no cluster to read; ask one of its agents"
                    );
                    Answer::Failed(Refusal::new(ErrorCode::NotFound, message))
                })
            }
            Query::Object { .. } | Query::Events { .. } => None,
            Query::Placement { key } if node == self.name => {
                let mut children = self.placement_by_child(key);
                let more = children.len().saturating_sub(MAX_CHILDREN_ANSWERED) as u64;
                children.truncate(MAX_CHILDREN_ANSWERED);
                Some(Answer::Placement { children, more })
            }
            Query::Placement { .. } => None,
            Query::Split { key } if node == self.name => {
                let (quota, mut children) = self.placement_cut(key).unwrap_or_default();
                let more = children.len().saturating_sub(MAX_CHILDREN_ANSWERED) as u64;
                children.truncate(MAX_CHILDREN_ANSWERED);
                Some(Answer::Split {
                    quota,
                    children,
                    more,
                })
            }
            Query::Split { .. } => None,
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

/// `answer`, if it is an answer to `query` about `node` within the limits;
/// otherwise a failure saying what was wrong with it.
fn checked(node: &str, query: &Query, answer: Answer) -> Answer {
    let fits = matches!(
        (query, &answer),
        (_, Answer::Failed(_))
            | (Query::Link, Answer::Link { .. })
            | (Query::Object { .. }, Answer::Object(_))
            | (Query::Events { .. }, Answer::Events(_))
            | (Query::Placement { .. }, Answer::Placement { .. })
            | (Query::Split { .. }, Answer::Split { .. })
    );
    let refused = |code, message: String| Answer::Failed(Refusal::new(code, message));
    if !fits {
        return refused(
            ErrorCode::Malformed,
            format!("the answer about {node} was not an answer to the question"),
        );
    }
    let named_children = match &answer {
        Answer::Placement { children, .. } => Some(children.len()),
        Answer::Split { children, .. } => Some(children.len()),
        _ => None,
    };
    if let Some(named) = named_children.filter(|named| *named > MAX_CHILDREN_ANSWERED) {
        return refused(
            ErrorCode::TooLarge,
            format!(
                "the answer about {node} names {named} children, more than the {MAX_CHILDREN_ANSWERED} allowed"
            ),
        );
    }
    match answer.observation() {
        Some(observation) if observation.cluster != node => refused(
            ErrorCode::Malformed,
            format!(
                "the answer about {node} came as {:?}'s",
                observation.cluster
            ),
        ),
        Some(observation) if observation.json.len() > MAX_ANSWER_JSON_LEN => refused(
            ErrorCode::TooLarge,
            format!(
                "the answer about {node} is {} bytes, more than the {MAX_ANSWER_JSON_LEN} allowed",
                observation.json.len()
            ),
        ),
        _ => answer,
    }
}
