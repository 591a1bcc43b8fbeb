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
//! version, and every relay must decide how to route it.

use serde::{Deserialize, Serialize};

use crate::{LinkStatus, Refusal};

/// What is asked of the node named in the query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Query {
    /// The node's link to its parent, as its parent measures it. The
    /// node's parent answers; the node itself is never asked.
    Link,
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
}
