//! The clusters below each direct child, summarised by label set for
//! placement, and a version that tells readers when they changed.

use std::collections::BTreeMap;

use relaymesh_protocol::{NodeRecord, Role};
use relaymesh_topology::aggregate::Aggregate;

/// The aggregates of a relay's direct children.
#[derive(Debug, Default)]
pub(crate) struct ChildAggregates {
    by_child: BTreeMap<String, Aggregate>,
    /// Counts changes of `by_child`.
    version: u64,
    /// The version when a recut last took the change.
    taken: u64,
}

impl ChildAggregates {
    /// The aggregate of each direct child.
    pub fn by_child(&self) -> &BTreeMap<String, Aggregate> {
        &self.by_child
    }

    /// A number that changes whenever the aggregates do.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the aggregates changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        let changed = self.taken != self.version;
        self.taken = self.version;
        changed
    }

    /// Adds or removes a cluster from the aggregate of the child it is
    /// under; other nodes count for nothing.
    pub fn count(&mut self, record: &NodeRecord, via: &str, add: bool) {
        if record.role != Role::Agent {
            return;
        }
        let aggregate = self.by_child.entry(via.to_string()).or_default();
        if add {
            aggregate.add(&record.labels);
        } else {
            aggregate.remove(&record.labels);
        }
        self.version += 1;
    }
}
