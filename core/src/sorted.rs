//! Lookups in a name-keyed map for names asked in ascending order: the
//! reports walk every child in name order and ask several other maps
//! keyed by child name about each, and a search per child costs a string
//! comparison per level of the map (most of a report at 5,000 children).
//! A cursor walks the map once instead.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::iter::Peekable;

/// A cursor over a `BTreeMap<String, V>` for keys asked in ascending order.
pub(crate) struct Cursor<'a, V> {
    entries: Peekable<btree_map::Iter<'a, String, V>>,
}

impl<'a, V> Cursor<'a, V> {
    pub(crate) fn new(map: &'a BTreeMap<String, V>) -> Self {
        Self {
            entries: map.iter().peekable(),
        }
    }

    /// The value of `key`. Keys must be asked in ascending order: the
    /// cursor never moves back, so a smaller key than the last is not
    /// found.
    pub(crate) fn get(&mut self, key: &str) -> Option<&'a V> {
        while self
            .entries
            .next_if(|(candidate, _)| candidate.as_str() < key)
            .is_some()
        {}
        match self.entries.peek() {
            Some((candidate, value)) if candidate.as_str() == key => Some(*value),
            _ => None,
        }
    }

    /// Whether `key` is in the map (see [`Cursor::get`]).
    pub(crate) fn contains(&mut self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn finds_what_the_map_holds(
            map in proptest::collection::btree_map("[a-c]{0,3}", 0u8..10, 0..20),
            asked in proptest::collection::btree_set("[a-c]{0,3}", 0..20),
        ) {
            let mut cursor = Cursor::new(&map);
            for key in &asked {
                // Asked twice: the second ask finds it too.
                prop_assert_eq!(cursor.get(key), map.get(key));
                prop_assert_eq!(cursor.get(key), map.get(key));
            }
        }
    }
}
