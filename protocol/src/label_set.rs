//! A node's labels, packed into one shared buffer.
//!
//! A relay holds a record of every node below it, and every record its
//! labels: seven for a joined cluster, two of them its own
//! (`relaymesh.dev/join-token`, `relaymesh.dev/joined-at`), so no two
//! records share a set. A `BTreeMap<String, String>` of seven labels took
//! about 800 bytes of heap (a node and fourteen strings); a [`LabelSet`]
//! keeps them in one allocation of about 250, as length-prefixed text
//! (`6:region2:eu…`, keys sorted and unique). Cloning one costs a
//! reference count: a relay's counts per label set key on the records'
//! own sets.
//!
//! Lookups walk the pairs: a node's labels are few, and a set is never
//! larger than the frame it arrived in, which it took as long to decode.
//! On the wire it is a map: the encoding is the same as a
//! `BTreeMap<String, String>`'s.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Labels by key, in one buffer shared on clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LabelSet(Arc<str>);

impl Default for LabelSet {
    /// The empty set, one copy for the whole process: a child's record
    /// carries none until the child reports.
    fn default() -> Self {
        static EMPTY: LazyLock<LabelSet> = LazyLock::new(|| LabelSet(Arc::from("")));
        EMPTY.clone()
    }
}

impl LabelSet {
    /// Whether both are the same shared buffer (not only equal ones).
    pub fn shares_with(&self, other: &LabelSet) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { rest: &self.0 }
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter()
            .find(|(held, _)| *held == key)
            .map(|(_, value)| value)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A map of the labels, for code that edits or keeps them apart.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    /// Sets `key` to `value`; returns the value it replaced. The set is
    /// packed anew, so another holder keeps the old one.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        let mut labels = self.to_map();
        let replaced = labels.insert(key, value);
        *self = Self::from(labels);
        replaced
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        if !self.contains_key(key) {
            return None;
        }
        let mut labels = self.to_map();
        let removed = labels.remove(key);
        *self = Self::from(labels);
        removed
    }
}

/// The pairs of a [`LabelSet`], in key order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let key = take_field(&mut self.rest)?;
        let value = take_field(&mut self.rest)?;
        Some((key, value))
    }
}

impl<'a> IntoIterator for &'a LabelSet {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Takes one `len:text` field off the front of `rest`. Only [`pack`]
/// writes the buffer, so every field is whole; a short one ends the walk
/// rather than panic.
fn take_field<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let colon = rest.find(':')?;
    let len: usize = rest.get(..colon)?.parse().ok()?;
    let start = colon + 1;
    let field = rest.get(start..start.checked_add(len)?)?;
    *rest = rest.get(start + len..)?;
    Some(field)
}

/// Packs pairs given in key order, each key once.
fn pack<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Arc<str> {
    let mut packed = String::new();
    for (key, value) in pairs {
        for field in [key, value] {
            packed.push_str(&field.len().to_string());
            packed.push(':');
            packed.push_str(field);
        }
    }
    Arc::from(packed)
}

impl PartialOrd for LabelSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LabelSet {
    /// The order of the maps they hold: pair by pair, in key order.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.shares_with(other) {
            return std::cmp::Ordering::Equal;
        }
        self.iter().cmp(other.iter())
    }
}

impl std::fmt::Debug for LabelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<BTreeMap<String, String>> for LabelSet {
    fn from(labels: BTreeMap<String, String>) -> Self {
        Self::from(&labels)
    }
}

impl From<&BTreeMap<String, String>> for LabelSet {
    fn from(labels: &BTreeMap<String, String>) -> Self {
        if labels.is_empty() {
            return Self::default();
        }
        Self(pack(
            labels
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
        ))
    }
}

impl<const N: usize> From<[(String, String); N]> for LabelSet {
    fn from(pairs: [(String, String); N]) -> Self {
        Self::from(BTreeMap::from(pairs))
    }
}

impl FromIterator<(String, String)> for LabelSet {
    /// As a map collects them: a later value of a key wins.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Self::from(pairs.into_iter().collect::<BTreeMap<_, _>>())
    }
}

impl PartialEq<BTreeMap<String, String>> for LabelSet {
    fn eq(&self, other: &BTreeMap<String, String>) -> bool {
        self.iter().eq(other
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str())))
    }
}

impl Serialize for LabelSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The length first: bincode writes it before the pairs.
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
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

    fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
        // Digits and colons in keys and values: the packing's own signs.
        prop::collection::btree_map("[a-z0-9:/.]{1,12}", "[a-z0-9:-]{0,12}", 0..8)
    }

    proptest! {
        /// The wire keeps the map's encoding: old and new peers read each
        /// other's records.
        #[test]
        fn encodes_as_the_map_it_holds(labels in labels()) {
            let set = LabelSet::from(labels.clone());
            let encoded = crate::codec::encode(&set).expect("encodes");
            prop_assert_eq!(&encoded, &crate::codec::encode(&labels).expect("encodes"));
            let decoded: LabelSet = crate::codec::decode(&encoded).expect("decodes");
            prop_assert_eq!(decoded, labels);
        }

        /// Lookups, order and equality are the map's.
        #[test]
        fn reads_and_orders_as_the_map(one in labels(), two in labels(), probe in "[a-z0-9:/.]{1,12}") {
            let (set_one, set_two) = (LabelSet::from(one.clone()), LabelSet::from(two.clone()));
            prop_assert_eq!(set_one.to_map(), one.clone());
            prop_assert_eq!(set_one.len(), one.len());
            prop_assert_eq!(set_one.get(&probe), one.get(&probe).map(String::as_str));
            for (key, value) in &one {
                prop_assert_eq!(set_one.get(key), Some(value.as_str()));
            }
            prop_assert_eq!(set_one.cmp(&set_two), one.cmp(&two));
            prop_assert_eq!(set_one == set_two, one == two);
        }

        /// An edit is the map's edit.
        #[test]
        fn edits_as_the_map(mut map in labels(), key in "[a-z0-9:/.]{1,12}", value in "[a-z0-9:-]{0,12}") {
            let mut set = LabelSet::from(map.clone());
            prop_assert_eq!(set.insert(key.clone(), value.clone()), map.insert(key.clone(), value));
            prop_assert_eq!(&set, &map);
            prop_assert_eq!(set.remove(&key), map.remove(&key));
            prop_assert_eq!(&set, &map);
        }
    }

    #[test]
    fn a_write_to_a_shared_set_leaves_the_other_holder_its_own() {
        let mut one = LabelSet::from([("region".to_string(), "eu".to_string())]);
        let two = one.clone();
        assert!(one.shares_with(&two));
        one.insert("tier".into(), "edge".into());
        assert!(!one.shares_with(&two));
        assert_eq!(two.len(), 1);
        assert_eq!(one.len(), 2);
        assert_eq!(one.get("tier"), Some("edge"));
    }
}
