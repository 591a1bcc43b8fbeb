//! A relay's slice: its entries by key, its revision history, and the log of
//! which key changed at which revision, from which deltas are cut.

use std::collections::BTreeMap;

use relaymesh_protocol::{BundleId, SliceChange, SliceEntry};

use crate::state::{Mutation, Persisted};

/// A key that changed, with the entry it held before (to tell a child that
/// lost interest in it).
#[derive(Debug, Clone)]
pub(crate) struct Changed {
    pub key: String,
    pub before: Option<SliceEntry>,
}

#[derive(Debug, Default)]
pub(crate) struct Slice {
    head: u64,
    floor: u64,
    log: BTreeMap<u64, String>,
    /// Boxed: a map's node holds eleven values, and most slices at the
    /// edge hold one or two entries.
    entries: BTreeMap<String, (u64, Box<SliceEntry>)>,
    log_keep: u64,
}

impl Slice {
    pub fn restore(persisted: &Persisted, log_keep: u64) -> Self {
        Self {
            head: persisted.head,
            floor: persisted.log_floor,
            log: persisted.log.clone(),
            entries: persisted
                .entries
                .iter()
                .map(|(key, (revision, entry))| (key.clone(), (*revision, Box::new(entry.clone()))))
                .collect(),
            log_keep: log_keep.max(1),
        }
    }

    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn entry(&self, key: &str) -> Option<&SliceEntry> {
        self.entries.get(key).map(|(_, entry)| &**entry)
    }

    pub fn entries(&self) -> impl Iterator<Item = &SliceEntry> {
        self.entries.values().map(|(_, entry)| &**entry)
    }

    /// The entries whose key starts with `prefix`, without visiting the
    /// others.
    pub fn entries_with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a SliceEntry> + 'a {
        self.entries
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(|(_, (_, entry))| &**entry)
    }

    /// How many entries start with `prefix` and the newest revision any of
    /// them changed at: it differs whenever one of them is added, changed
    /// or removed, so a reader of those entries alone can tell when to read
    /// them again without reading them.
    pub fn prefix_version(&self, prefix: &str) -> (usize, u64) {
        self.entries
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(key, _)| key.starts_with(prefix))
            .fold((0, 0), |(count, newest), (_, (revision, _))| {
                (count + 1, newest.max(*revision))
            })
    }

    /// Applies changes, each that alters something at a new revision, and
    /// returns what changed. Re-applying what is already there is a no-op, so
    /// a delta received twice changes nothing.
    pub fn apply(
        &mut self,
        changes: impl IntoIterator<Item = SliceChange>,
        mutations: &mut Vec<Mutation>,
    ) -> Vec<Changed> {
        let mut changed = Vec::new();
        for change in changes {
            let key = change.key().to_string();
            let current = self.entries.get(&key).map(|(_, entry)| &**entry);
            let before = match change {
                SliceChange::Upsert(entry) => {
                    if current == Some(&entry) {
                        continue;
                    }
                    self.head += 1;
                    mutations.push(Mutation::PutEntry {
                        revision: self.head,
                        entry: entry.clone(),
                    });
                    self.entries
                        .insert(key.clone(), (self.head, Box::new(entry)))
                        .map(|(_, before)| *before)
                }
                SliceChange::Remove(_) => {
                    if current.is_none() {
                        continue;
                    }
                    self.head += 1;
                    mutations.push(Mutation::RemoveEntry(key.clone()));
                    self.entries.remove(&key).map(|(_, before)| *before)
                }
            };
            self.log_change(&key, mutations);
            changed.push(Changed { key, before });
        }
        self.trim(mutations);
        changed
    }

    /// Records that what `key` gives the children changed although its
    /// entry did not (a placement cut anew): a revision of its own, so a
    /// child that resumes from before it is sent the key again
    /// ([`Slice::keys_since`]), and one from after it is not.
    pub fn touch(&mut self, key: &str, mutations: &mut Vec<Mutation>) {
        self.head += 1;
        self.log_change(key, mutations);
        self.trim(mutations);
    }

    /// Logs `key` at the head, which the caller has just moved on.
    fn log_change(&mut self, key: &str, mutations: &mut Vec<Mutation>) {
        mutations.push(Mutation::LogChange {
            revision: self.head,
            key: key.to_string(),
        });
        self.log.insert(self.head, key.to_string());
    }

    fn trim(&mut self, mutations: &mut Vec<Mutation>) {
        if self.log.len() as u64 > self.log_keep {
            let floor = self.head - self.log_keep;
            self.log.retain(|revision, _| *revision > floor);
            self.floor = floor;
            mutations.push(Mutation::TrimLog { floor });
        }
    }

    /// Whether a child at revision `base` may stay there while the head
    /// moves on without changes for it: its position is still within the
    /// newer half of the log, so that a link resumed from it gets a delta
    /// ([`Slice::keys_since`]), not a snapshot. Past that, the child is sent
    /// an empty delta that moves it to the head; that costs one message per
    /// child every `log_keep / 2` changes instead of one every change.
    pub fn keeps(&self, base: u64) -> bool {
        base <= self.head && self.head - base < (self.log_keep / 2).max(1)
    }

    /// The keys changed after `base`, oldest change first, or `None` if the
    /// log no longer reaches back to `base` (or `base` is from the future).
    pub fn keys_since(&self, base: u64) -> Option<Vec<String>> {
        if base < self.floor || base > self.head {
            return None;
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut keys = Vec::new();
        for key in self.log.range(base + 1..).map(|(_, key)| key) {
            if seen.insert(key) {
                keys.push(key.clone());
            }
        }
        Some(keys)
    }

    /// How many entries reference each bundle.
    pub fn referenced_bundles(&self) -> BTreeMap<BundleId, usize> {
        let mut counts = BTreeMap::new();
        for entry in self.entries() {
            for id in &entry.bundles {
                *counts.entry(*id).or_default() += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaymesh_protocol::Target;

    fn entry(key: &str, byte: u8) -> SliceEntry {
        SliceEntry {
            key: key.into(),
            target: Target::Everywhere,
            bundles: vec![],
            body: vec![byte],
            serial: 0,
            signature: Vec::new(),
        }
    }

    #[test]
    fn revisions_advance_only_on_real_changes() {
        let mut slice = Slice::restore(&Persisted::default(), 3);
        let mut mutations = Vec::new();
        let changed = slice.apply(
            [
                SliceChange::Upsert(entry("a", 1)),
                SliceChange::Upsert(entry("a", 1)),
                SliceChange::Remove("zz".into()),
            ],
            &mut mutations,
        );
        assert_eq!(changed.len(), 1);
        assert_eq!(slice.head(), 1);
        slice.apply([SliceChange::Upsert(entry("b", 1))], &mut mutations);
        slice.apply([SliceChange::Upsert(entry("a", 2))], &mut mutations);
        assert_eq!(slice.keys_since(0), Some(vec!["a".into(), "b".into()]));
        assert_eq!(slice.keys_since(2), Some(vec!["a".into()]));
        assert_eq!(slice.keys_since(4), None);
        // Beyond log_keep the oldest records go, and a child that far behind
        // must take a snapshot.
        slice.apply([SliceChange::Remove("b".into())], &mut mutations);
        assert_eq!(slice.keys_since(0), None);
        assert_eq!(slice.keys_since(1), Some(vec!["b".into(), "a".into()]));
        assert!(mutations.contains(&Mutation::TrimLog { floor: 1 }));

        // The mutations rebuild the same slice.
        let mut persisted = Persisted::default();
        for mutation in &mutations {
            persisted.apply(mutation);
        }
        let restored = Slice::restore(&persisted, 3);
        assert_eq!(restored.head(), slice.head());
        assert_eq!(restored.keys_since(1), slice.keys_since(1));
        assert_eq!(restored.entry("a"), slice.entry("a"));
    }

    #[test]
    fn a_prefix_version_moves_with_its_entries_alone() {
        let mut slice = Slice::restore(&Persisted::default(), 16);
        let mut mutations = Vec::new();
        assert_eq!(slice.prefix_version("labels/"), (0, 0));
        slice.apply([SliceChange::Upsert(entry("labels/a", 1))], &mut mutations);
        let first = slice.prefix_version("labels/");
        assert_eq!(first.0, 1);
        // Entries under other keys, before or after the prefix, leave it be.
        slice.apply(
            [
                SliceChange::Upsert(entry("bundle/x", 1)),
                SliceChange::Upsert(entry("placement/p", 1)),
            ],
            &mut mutations,
        );
        assert_eq!(slice.prefix_version("labels/"), first);
        slice.apply([SliceChange::Upsert(entry("labels/a", 2))], &mut mutations);
        let changed = slice.prefix_version("labels/");
        assert_ne!(changed, first);
        slice.apply([SliceChange::Upsert(entry("labels/b", 1))], &mut mutations);
        let added = slice.prefix_version("labels/");
        assert_eq!(added.0, 2);
        // Removing one that is not the newest still shows.
        slice.apply([SliceChange::Remove("labels/a".into())], &mut mutations);
        assert_ne!(slice.prefix_version("labels/"), added);
        assert_eq!(slice.entries_with_prefix("labels/").count(), 1);
    }

    #[test]
    fn a_touch_logs_a_key_at_a_revision_of_its_own_and_survives_a_restart() {
        let mut slice = Slice::restore(&Persisted::default(), 3);
        let mut mutations = Vec::new();
        slice.apply([SliceChange::Upsert(entry("p", 1))], &mut mutations);
        slice.apply([SliceChange::Upsert(entry("q", 1))], &mut mutations);
        slice.touch("p", &mut mutations);
        assert_eq!(slice.head(), 3);
        assert_eq!(slice.keys_since(2), Some(vec!["p".into()]));
        assert_eq!(slice.keys_since(3), Some(vec![]));
        assert_eq!(
            slice.entry("p"),
            Some(&entry("p", 1)),
            "the entry is as it was"
        );
        // Touches count against the log like any change.
        slice.touch("p", &mut mutations);
        assert_eq!(slice.keys_since(0), None);

        let mut persisted = Persisted::default();
        for mutation in &mutations {
            persisted.apply(mutation);
        }
        let restored = Slice::restore(&persisted, 3);
        assert_eq!(restored.head(), 4);
        assert_eq!(restored.keys_since(2), Some(vec!["p".into()]));
    }
}
