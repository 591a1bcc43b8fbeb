//! One copy of each distinct label set among a relay's records.
//!
//! Records arrive decoded, each with its own copy of its labels; a fleet
//! has few distinct sets, so the inventory swaps each record's copy for the
//! one it already holds. Sets no record holds any more are swept once the
//! table has doubled since the last sweep, so the work stays O(1) amortized
//! per record.

use std::collections::HashSet;

use relaymesh_protocol::LabelSet;

/// Below this many sets, no sweep: they cost less than the sweep.
const SWEEP_FLOOR: usize = 64;

#[derive(Debug, Default)]
pub(super) struct LabelSets {
    sets: HashSet<LabelSet>,
    /// How many sets were held after the last sweep.
    swept_at: usize,
}

impl LabelSets {
    /// Makes `labels` share the copy held of an equal set, or holds it.
    pub fn intern(&mut self, labels: &mut LabelSet) {
        if let Some(held) = self.sets.get(labels) {
            if !held.shares_with(labels) {
                *labels = held.clone();
            }
            return;
        }
        if self.sets.len() >= SWEEP_FLOOR.max(2 * self.swept_at) {
            // Held here alone: no record has it any more.
            self.sets.retain(|set| set.holders() > 1);
            self.swept_at = self.sets.len();
        }
        self.sets.insert(labels.clone());
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(region: &str) -> LabelSet {
        LabelSet::from([("region".to_string(), region.to_string())])
    }

    #[test]
    fn equal_sets_share_one_copy() {
        let mut sets = LabelSets::default();
        let mut one = set("eu");
        let mut two = set("eu");
        let mut other = set("us");
        sets.intern(&mut one);
        sets.intern(&mut two);
        sets.intern(&mut other);
        assert!(one.shares_with(&two));
        assert!(!one.shares_with(&other));
        assert_eq!(sets.len(), 2);
    }

    #[test]
    fn sets_no_record_holds_are_swept_as_the_table_grows() {
        let mut sets = LabelSets::default();
        let mut kept = set("kept");
        sets.intern(&mut kept);
        for i in 0..10 * SWEEP_FLOOR {
            // Each dropped at once, as a record replaced by a newer one.
            sets.intern(&mut set(&format!("gone-{i}")));
        }
        assert!(sets.len() <= 2 * SWEEP_FLOOR, "{} sets held", sets.len());
        let mut again = set("kept");
        sets.intern(&mut again);
        assert!(again.shares_with(&kept), "a set still held is never swept");
    }
}
