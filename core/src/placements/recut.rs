//! When a relay decides its placements again, and what it records of it:
//! each cut's digest (persisted) and, for a cut that changed, a revision of
//! its own in the slice's log, so that a child resuming from before it is
//! sent it and one resuming from after it is not.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use relaymesh_protocol::{SliceChange, SliceEntry, Target};

use crate::cut::{digest, Cut};
use crate::state::Mutation;
use crate::{Core, Now, INVENTORY_COALESCE};

impl Core {
    /// Re-decides one placement entry; returns the cut it had before, and
    /// whether the new one differs from the last one persisted (a
    /// restarted relay's first cut is compared with the one before the
    /// restart). The new digest goes into `mutations`, for the caller to
    /// persist in one batch with the log record of the change.
    pub(crate) fn recut(
        &mut self,
        now: Instant,
        key: &str,
        mutations: &mut Vec<Mutation>,
    ) -> (Cut, bool) {
        let old = self.decide(now, key);
        let stored = self.cuts.digests.get(key);
        let digest = match self.cuts.by_key.get(key) {
            // A cut whose digest fails is always taken for changed.
            Some(cut) => match digest(cut) {
                Some(digest) if stored == Some(&digest) => return (old, false),
                digest => digest,
            },
            None if stored.is_none() => return (old, false),
            None => None,
        };
        match digest {
            Some(digest) => self.cuts.digests.insert(key.to_string(), digest),
            None => self.cuts.digests.remove(key),
        };
        mutations.push(Mutation::SetCutDigest {
            key: key.to_string(),
            digest,
        });
        (old, true)
    }

    /// Decides every placement again without telling anyone (at start-up).
    /// A cut that differs from the one before the restart is logged, so
    /// children resuming from before it are sent it again.
    pub(crate) fn recut_all_quietly(&mut self, now: Instant) {
        let keys = self.placement_keys();
        let current: BTreeSet<&String> = keys.iter().collect();
        let gone: Vec<String> = self
            .cuts
            .digests
            .keys()
            .filter(|key| !current.contains(key))
            .cloned()
            .collect();
        let mut mutations = Vec::new();
        for key in gone {
            self.cuts.digests.remove(&key);
            mutations.push(Mutation::SetCutDigest { key, digest: None });
        }
        for key in keys {
            if self.recut(now, &key, &mut mutations).1 {
                self.slice.touch(&key, &mut mutations);
            }
        }
        self.persist(mutations);
    }

    /// After the clusters below changed: decides every placement again and
    /// tells each connected child what changed for it.
    pub(crate) fn recut_all(&mut self, now: Instant) {
        let mut changes: BTreeMap<String, Vec<SliceChange>> = BTreeMap::new();
        let mut forgotten = Vec::new();
        let mut logged = Vec::new();
        for key in self.placement_keys() {
            let (old, changed) = self.recut(now, &key, &mut logged);
            if changed {
                // Before any delta goes out, so that one carrying the new
                // cut ends at a revision after it.
                self.slice.touch(&key, &mut logged);
            }
            let new = self.cuts.by_key.get(&key).cloned().unwrap_or_default();
            for child in old.keys().chain(new.keys()) {
                if old.get(child) == new.get(child) {
                    continue;
                }
                let change = match new.get(child) {
                    Some(entry) => SliceChange::Upsert(SliceEntry::clone(entry)),
                    None => {
                        if !self.links_by_name.contains_key(child) {
                            // A disconnected child cannot withdraw what it
                            // reported of a placement it no longer has.
                            forgotten.push((child.clone(), key.clone()));
                        }
                        SliceChange::Remove(key.clone())
                    }
                };
                let pending = changes.entry(child.clone()).or_default();
                if !pending.iter().any(|c| c.key() == key) {
                    pending.push(change);
                }
            }
        }
        self.persist(logged);
        for (child, changes) in changes {
            if let Some(&link) = self.links_by_name.get(&child) {
                let base = self.children.get(&link).map_or(0, |c| c.sent());
                self.send_delta(link, base, changes);
            }
        }
        for (child, key) in forgotten {
            self.forget_child_placement_status(&child, &key);
        }
    }

    /// Whether placements are to be decided again soon (the clusters below
    /// changed): their counts are about to change.
    pub fn recut_pending(&self) -> bool {
        self.cuts.recut_at.is_some()
    }

    pub(crate) fn schedule_recut(&mut self, now: Now) {
        if self.cuts.recut_at.is_none() {
            self.cuts.recut_at = Some(now.instant + INVENTORY_COALESCE);
        }
    }

    fn placement_keys(&self) -> Vec<String> {
        self.slice
            .entries()
            .filter(|entry| matches!(entry.target, Target::Placement(_)))
            .map(|entry| entry.key.clone())
            .collect()
    }
}
