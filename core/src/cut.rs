//! How a relay holds one placement's entries per child: alike children
//! share one entry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use relaymesh_protocol::SliceEntry;

/// One placement's entries per child. Shared: the children a relay cuts
/// alike (every child of a placement without a bound, most of a bounded
/// one's) hold one entry between them, not a copy each.
pub(crate) type Cut = BTreeMap<String, Arc<SliceEntry>>;

/// `per_child` as a [`Cut`], each entry equal to one of the last few
/// distinct ones shared with it (children come in name order, and alike
/// ones mostly in runs), so a relay keeps few copies whatever its children.
pub(crate) fn shared(per_child: BTreeMap<String, SliceEntry>) -> Cut {
    const RECENT: usize = 4;
    let mut recent: Vec<Arc<SliceEntry>> = Vec::with_capacity(RECENT);
    per_child
        .into_iter()
        .map(|(child, entry)| {
            let entry = match recent.iter().find(|seen| ***seen == entry) {
                Some(seen) => Arc::clone(seen),
                None => {
                    let entry = Arc::new(entry);
                    if recent.len() == RECENT {
                        recent.remove(0);
                    }
                    recent.push(Arc::clone(&entry));
                    entry
                }
            };
            (child, entry)
        })
        .collect()
}

/// A digest of what `cut` gives each child: equal cuts, equal digests.
/// Persisted per placement, it tells a restarted relay whether its first
/// cut is the one its children hold. Each distinct entry is encoded once,
/// however many children share it. `None` if an entry does not encode
/// (then it never compares equal, and children are sent the cut again).
pub(crate) fn digest(cut: &Cut) -> Option<[u8; 32]> {
    let mut entries: HashMap<*const SliceEntry, ring::digest::Digest> = HashMap::new();
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for (child, entry) in cut {
        let pointer = Arc::as_ptr(entry);
        let of_entry = match entries.get(&pointer) {
            Some(of_entry) => *of_entry,
            None => {
                let bytes = relaymesh_protocol::codec::encode(&**entry).ok()?;
                let of_entry = ring::digest::digest(&ring::digest::SHA256, &bytes);
                entries.insert(pointer, of_entry);
                of_entry
            }
        };
        context.update(&(child.len() as u64).to_le_bytes());
        context.update(child.as_bytes());
        context.update(of_entry.as_ref());
    }
    context.finish().as_ref().try_into().ok()
}

#[cfg(test)]
mod tests {
    use relaymesh_protocol::Target;

    use super::*;

    fn entry(byte: u8) -> SliceEntry {
        SliceEntry {
            key: "placement/a/b".into(),
            target: Target::Everywhere,
            bundles: vec![],
            body: vec![byte],
            serial: 1,
            signature: vec![],
        }
    }

    #[test]
    fn children_cut_alike_share_one_entry() {
        let per_child: BTreeMap<String, SliceEntry> = (0..100)
            .map(|index| {
                // Every tenth child's cut differs.
                let byte = u8::from(index % 10 == 0);
                (format!("c{index:03}"), entry(byte))
            })
            .collect();
        let cut = shared(per_child.clone());
        assert_eq!(cut.len(), 100);
        for (child, entry) in &cut {
            assert_eq!(**entry, per_child[child], "{child}");
        }
        let distinct: Vec<*const SliceEntry> =
            cut.values()
                .map(Arc::as_ptr)
                .fold(Vec::new(), |mut seen, pointer| {
                    if !seen.contains(&pointer) {
                        seen.push(pointer);
                    }
                    seen
                });
        assert_eq!(distinct.len(), 2, "one copy of each distinct entry");
    }

    proptest::proptest! {
        /// The digest sees what each child gets, not how entries are
        /// shared: equal cuts digest alike, a cut that differs for one
        /// child (its entry, or whether it has one) does not.
        #[test]
        fn the_digest_tells_cuts_apart_by_what_each_child_gets(
            bytes in proptest::collection::vec(0u8..3, 0..12),
            changed in 0usize..12,
            drop in proptest::bool::ANY,
        ) {
            let per_child: BTreeMap<String, SliceEntry> = bytes
                .iter()
                .enumerate()
                .map(|(index, byte)| (format!("c{index}"), entry(*byte)))
                .collect();
            let unshared: Cut = per_child
                .iter()
                .map(|(child, entry)| (child.clone(), Arc::new(entry.clone())))
                .collect();
            proptest::prop_assert_eq!(digest(&shared(per_child.clone())), digest(&unshared));
            if let Some(child) = per_child.keys().nth(changed % per_child.len().max(1)).cloned() {
                let mut other = per_child.clone();
                if drop {
                    other.remove(&child);
                } else if let Some(entry) = other.get_mut(&child) {
                    entry.body[0] += 3;
                }
                proptest::prop_assert_ne!(digest(&shared(per_child)), digest(&shared(other)));
            }
        }
    }
}
