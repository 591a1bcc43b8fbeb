//! How a relay holds one placement's entries per child: alike children
//! share one entry.

use std::collections::BTreeMap;
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
}
