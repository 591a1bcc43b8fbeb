//! Questions the root asks one node deep in the tree, and their answers.
//!
//! Some things are known only below: what a relay measured of its link to a
//! child stays with that relay (see docs/architecture.md, "Inventory"), so
//! nothing per-node and per-second ever climbs the tree. When an operator
//! asks for one node, the question travels down the path to the node that
//! knows, as a [`DownMessage::Query`](crate::message::DownMessage::Query),
//! and the answer comes back up the same path as an
//! [`UpMessage::Answer`](crate::message::UpMessage::Answer). Each relay
//! numbers the questions it forwards itself, so an id means something only
//! on one link.
//!
//! Neither enum is `non_exhaustive`: a new kind of query is a new protocol
//! version, and every relay must decide how to route it. (`Object` and
//! `Events` were appended within version 5, which was not yet released.)
//!
//! [`Query::Object`] and [`Query::Events`] are answered by the cluster's
//! edge agent itself, with JSON it read from its cluster, at most
//! [`MAX_ANSWER_JSON_LEN`] bytes of it. When the agent cannot be reached, a
//! relay on the path answers with the last live answer it passed up, marked
//! with its age ([`Observation::age_ms`]).

use serde::{Deserialize, Serialize};

use crate::{LinkStatus, PhaseCounts, Quota, Refusal};

/// The most JSON bytes an [`Observation`] carries. An agent refuses to send
/// more (the answer is a failure saying so) and a relay passes on or keeps
/// nothing larger; the frame limit bounds what a decoder reads regardless.
pub const MAX_ANSWER_JSON_LEN: usize = 256 * 1024;

/// The most events one [`Query::Events`] may ask for; a larger `limit` is
/// read as this.
pub const MAX_EVENTS: u32 = 500;

/// What is asked of the node named in the query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Query {
    /// The node's link to its parent, as its parent measures it. The
    /// node's parent answers; the node itself is never asked.
    Link,
    /// One live object of the agent's cluster, status included. The agent
    /// answers (a relay refuses: it has no cluster), and only for an
    /// object it manages (see docs/security.md, "Reading from clusters").
    Object {
        /// The API group; empty for the core group.
        group: String,
        /// The version, as `v1`.
        version: String,
        /// The kind, as `Deployment`.
        kind: String,
        /// The namespace; `None` for a cluster-scoped object, or, to list,
        /// every namespace.
        namespace: Option<String>,
        /// The object's name; empty to list every object of the kind the
        /// agent manages (the answer's JSON is then a `List`).
        name: String,
    },
    /// The recent events of the agent's cluster, newest first, in
    /// `namespace` or in every namespace the agent manages objects in.
    Events {
        /// One namespace, or `None` for all the agent may show.
        namespace: Option<String>,
        /// At most this many (and never more than [`MAX_EVENTS`]).
        limit: u32,
    },
    /// How each child of the node is doing with one placement: what each
    /// reported for its subtree, so `relayctl tree --placement` can show
    /// per-subtree counts without anything per-cluster climbing the tree.
    /// The node itself answers, relay or agent.
    Placement {
        /// The placement's slice key (`placement/NAMESPACE/NAME`).
        key: String,
    },
    /// How the node last split one placement over its children: the cut
    /// each child receives, so `relayctl explain` shows the decisions the
    /// relays made rather than a simulation of them. The node itself
    /// answers, relay or agent (an agent has no children to name).
    Split {
        /// The placement's slice key (`placement/NAMESPACE/NAME`).
        key: String,
    },
}

/// What one child receives of a placement, as its parent cut it: the
/// answer to [`Query::Split`] names one per child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildCut {
    /// The child's name.
    pub child: String,
    /// How many matching clusters below it it must select (per value of
    /// the spread label); `None` for every matching cluster.
    pub quota: Option<Quota>,
    /// How many of the placement's named clusters it reaches.
    pub named: u32,
    /// With a rollout under way, how many of its clusters run the newest
    /// revision.
    pub wave: Option<u32>,
    /// It keeps what it had until the clusters replacing it are ready (a
    /// handover, or a drain), although its new share is smaller.
    pub kept: bool,
}

/// The most children an [`Answer::Placement`] names; the rest are only
/// counted in its `more`. At well under 100 bytes each, they fit one frame.
pub const MAX_CHILDREN_ANSWERED: usize = 65_536;

/// One child's subtree and how its clusters are doing with a placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildCounts {
    /// The child's name.
    pub child: String,
    /// Its subtree's clusters by phase (all offline while its link is down).
    pub counts: PhaseCounts,
}

/// What a cluster's agent read from its cluster, or a relay remembered of
/// it: the answer to [`Query::Object`] and [`Query::Events`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The cluster (agent) that read it.
    pub cluster: String,
    /// UTF-8 JSON: the object, or an array of events; at most
    /// [`MAX_ANSWER_JSON_LEN`] bytes.
    pub json: Vec<u8>,
    /// `None` when read from the cluster for this query; otherwise the
    /// answer is stale: a relay answered with what it last passed up, this
    /// many milliseconds ago (by its own clock), because the agent could
    /// not be reached.
    pub age_ms: Option<u64>,
}

/// The answer to a [`Query`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// The node's link, as its parent sees it now: whether it is connected
    /// and since when, and what the parent measured of it.
    Link {
        /// The parent that measured the link.
        parent: String,
        /// The link.
        status: LinkStatus,
    },
    /// The query could not be answered: no such node below, a relay on
    /// the path is not connected, too many queries in flight, or no answer
    /// in time.
    Failed(Refusal),
    /// The answer to [`Query::Object`]: the object's JSON.
    Object(Observation),
    /// The answer to [`Query::Events`]: a JSON array of events, newest
    /// first, each `{lastSeen, type, reason, object, namespace, message,
    /// count}` (the agent's summary of a Kubernetes Event).
    Events(Observation),
    /// The answer to [`Query::Placement`]: the children that reported the
    /// placement, by name, at most [`MAX_CHILDREN_ANSWERED`].
    Placement {
        /// The children, sorted by name.
        children: Vec<ChildCounts>,
        /// How many more children reported it.
        more: u64,
    },
    /// The answer to [`Query::Split`]: the children that receive the
    /// placement, by name, at most [`MAX_CHILDREN_ANSWERED`].
    Split {
        /// The share the node itself received (`None`: every matching
        /// cluster, or the root, which starts from `maxClusters`).
        quota: Option<Quota>,
        /// The children, sorted by name.
        children: Vec<ChildCut>,
        /// How many more children receive it.
        more: u64,
    },
}

impl Answer {
    /// The observation an `Object` or `Events` answer carries.
    pub fn observation(&self) -> Option<&Observation> {
        match self {
            Self::Object(observation) | Self::Events(observation) => Some(observation),
            Self::Link { .. } | Self::Failed(_) | Self::Placement { .. } | Self::Split { .. } => {
                None
            }
        }
    }
}
