//! A node's labels, shared between the copies a relay keeps of them.
//!
//! A relay holds a record of every node below it and, per child, counts of
//! the label sets below it, keyed by the records' own sets. A
//! [`LabelSet`] is a pointer to one shared map, so the count's key costs a
//! reference count, not a second copy. Records do not share sets with each
//! other: each carries labels its join gave it alone
//! (`relaymesh.dev/join-token`, `relaymesh.dev/joined-at`).
//!
//! On the wire it is the map itself: the encoding is the same as a
//! `BTreeMap<String, String>`'s.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Labels by key, shared on clone and copied on write.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LabelSet(Arc<BTreeMap<String, String>>);

impl Default for LabelSet {
    /// The empty set, one copy for the whole process: a child's record
    /// carries none until the child reports.
    fn default() -> Self {
        static EMPTY: LazyLock<LabelSet> = LazyLock::new(|| LabelSet(Arc::default()));
        EMPTY.clone()
    }
}

impl LabelSet {
    /// Whether both are the same shared map (not only equal ones).
    pub fn shares_with(&self, other: &LabelSet) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for LabelSet {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for LabelSet {
    /// Copies the map first if another holder shares it.
    fn deref_mut(&mut self) -> &mut Self::Target {
        Arc::make_mut(&mut self.0)
    }
}

impl PartialOrd for LabelSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LabelSet {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.shares_with(other) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl std::fmt::Debug for LabelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<BTreeMap<String, String>> for LabelSet {
    fn from(labels: BTreeMap<String, String>) -> Self {
        Self(Arc::new(labels))
    }
}

impl<const N: usize> From<[(String, String); N]> for LabelSet {
    fn from(pairs: [(String, String); N]) -> Self {
        Self(Arc::new(BTreeMap::from(pairs)))
    }
}

impl FromIterator<(String, String)> for LabelSet {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Self(Arc::new(pairs.into_iter().collect()))
    }
}

impl PartialEq<BTreeMap<String, String>> for LabelSet {
    fn eq(&self, other: &BTreeMap<String, String>) -> bool {
        *self.0 == *other
    }
}

impl Serialize for LabelSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LabelSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The wire keeps the map's encoding: old and new peers read each
        /// other's records.
        #[test]
        fn encodes_as_the_map_it_holds(
            labels in prop::collection::btree_map("[a-z/.]{1,12}", "[a-z0-9-]{0,12}", 0..6)
        ) {
            let set = LabelSet::from(labels.clone());
            let encoded = crate::codec::encode(&set).expect("encodes");
            prop_assert_eq!(&encoded, &crate::codec::encode(&labels).expect("encodes"));
            let decoded: LabelSet = crate::codec::decode(&encoded).expect("decodes");
            prop_assert_eq!(decoded, labels);
        }
    }

    #[test]
    fn a_write_to_a_shared_set_copies_it_first() {
        let mut one = LabelSet::from([("region".to_string(), "eu".to_string())]);
        let two = one.clone();
        assert!(one.shares_with(&two));
        one.insert("tier".into(), "edge".into());
        assert!(!one.shares_with(&two));
        assert_eq!(two.len(), 1);
        assert_eq!(one.len(), 2);
    }
}
