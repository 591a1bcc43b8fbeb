//! At the root: the tree as its API serves it, republished after the core's
//! inventory, its link measurements or the clusters' annotations changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use relaymesh_protocol::NodeRecord;

use super::{now, unix_ms, Daemon};

impl Daemon {
    /// Hands the API a new copy of the inventory, only of what changed
    /// since the last: the node list when a record changed, the root's
    /// measurements of its children's links (O(children)) when those did.
    pub(super) fn publish_inventory(&mut self) {
        if self.shared.config.api_listen.is_none() {
            return;
        }
        let head = self.core.head();
        let labels = match self.labels_counted {
            Some((counted_at, labels)) if counted_at == head => labels,
            _ => {
                let labels = self
                    .core
                    .prefix_version(relaymesh_protocol::cluster_labels::KEY_PREFIX);
                self.labels_counted = Some((head, labels));
                labels
            }
        };
        let current = (
            self.core.inventory_version(),
            self.core.link_measurements_version(),
            labels,
        );
        let last = self.inventory_published.replace(current);
        if last == Some(current) {
            return;
        }
        // Annotations are read again only when a `labels/` entry changed,
        // not on every change of the slice (every placement's).
        let annotations = (last.map(|(_, _, labels)| labels) != Some(current.2))
            .then(|| self.cluster_annotations())
            .filter(|annotations| {
                self.shared
                    .inventory
                    .read()
                    .map_or(true, |inventory| *inventory.annotations != *annotations)
            });
        let records_changed = last.map(|(records, _, _)| records) != Some(current.0);
        let measured_changed = last.map(|(_, measured, _)| measured) != Some(current.1);
        if !records_changed && !measured_changed && annotations.is_none() {
            return;
        }
        let Ok(mut inventory) = self.shared.inventory.write() else {
            return;
        };
        let mut keys_changed = false;
        if records_changed {
            let rotating = self
                .core
                .mesh_trust()
                .filter(|trust| trust.anchors.len() > 1)
                .map(|trust| trust.signer_key);
            let changes = self
                .core
                .take_inventory_changes()
                .filter(|_| self.rotating_published == Recorded::During(rotating));
            self.rotating_published = Recorded::During(rotating);
            // Most often no request holds the copy: it changes in place.
            let records = Arc::make_mut(&mut inventory.records);
            let changed: Vec<Arc<NodeRecord>> = match changes {
                Some(names) => names
                    .iter()
                    .filter_map(|name| {
                        let record = self.core.inventory_record_shared(name);
                        put_sorted(records, name, record);
                        record.cloned()
                    })
                    .collect(),
                None => {
                    *records = self.core.inventory_records_shared().cloned().collect();
                    records.clone()
                }
            };
            if self.shared.identity.get().token_signing_key.is_some() {
                match self
                    .shared
                    .store
                    .record_issuer_keys(&changed, unix_ms() / 1000, rotating)
                {
                    Ok(changed) => keys_changed = changed,
                    Err(error) => {
                        tracing::error!(%error, "cannot record the relays' issuer keys")
                    }
                }
            }
        }
        if measured_changed {
            // Every acknowledgement changes one child's: put those, in
            // place unless a request holds the map.
            let changes = self.core.take_link_measurement_changes();
            let all = self.core.link_measurements();
            let measured = Arc::make_mut(&mut inventory.measured);
            match changes {
                Some(children) => {
                    for child in children {
                        match all.get(&child) {
                            Some(link) => {
                                measured.insert(child, link.clone());
                            }
                            None => {
                                measured.remove(&child);
                            }
                        }
                    }
                }
                None => measured.clone_from(all),
            }
        }
        if let Some(annotations) = annotations {
            inventory.annotations = Arc::new(annotations);
        }
        inventory.version += 1;
        drop(inventory);
        if keys_changed {
            self.regrant_current_keys(now());
        }
    }

    /// Every cluster's annotations, as the root set them (from its
    /// `labels/` entries): the API shows them on `Cluster` objects.
    fn cluster_annotations(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.core
            .entries_with_prefix(relaymesh_protocol::cluster_labels::KEY_PREFIX)
            .filter_map(relaymesh_protocol::ClusterLabels::from_entry)
            .filter_map(Result::ok)
            .filter(|labels| !labels.annotations.is_empty())
            .map(|labels| (labels.node, labels.annotations))
            .collect()
    }
}

/// Puts `record` (or, if `None`, the absence of `name`) into `records`,
/// which hold this node's own record first and the others by name, as
/// [`relaymesh_core::Core::inventory_records`] yields them: O(log n) to
/// find, and a move of pointers to insert or remove.
fn put_sorted(records: &mut Vec<Arc<NodeRecord>>, name: &str, record: Option<&Arc<NodeRecord>>) {
    if records.first().is_some_and(|own| own.name == name) {
        if let (Some(record), Some(own)) = (record, records.first_mut()) {
            *own = Arc::clone(record);
        }
        return;
    }
    let below = records.len().min(1);
    match records[below..].binary_search_by(|held| held.name.as_str().cmp(name)) {
        Ok(at) => match record {
            Some(record) => records[below + at] = Arc::clone(record),
            None => {
                records.remove(below + at);
            }
        },
        Err(at) => {
            if let Some(record) = record {
                records.insert(below + at, Arc::clone(record));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use proptest::prelude::*;
    use relaymesh_protocol::{NodeRecord, Role};

    use super::put_sorted;

    fn node(name: &str, version: u8) -> Arc<NodeRecord> {
        Arc::new(NodeRecord {
            name: name.into(),
            role: Role::Agent,
            parent: Some("root".into()),
            labels: Default::default(),
            addresses: vec![],
            version: version.to_string(),
            link: None,
            capacity: Default::default(),
            refused_entries: 0,
            limit_refusals: Default::default(),
        })
    }

    proptest! {
        /// Kept current change by change, the copy is what a whole copy
        /// would be: the own record first, the others by name.
        #[test]
        fn changes_put_in_place_match_a_whole_copy(
            changes in proptest::collection::vec((0u8..40, proptest::option::of(0u8..4)), 0..200)
        ) {
            let own = node("root", 0);
            let mut held = BTreeMap::new();
            let mut records = vec![Arc::clone(&own)];
            for (at, change) in changes {
                let name = format!("edge-{at}");
                let record = change.map(|version| node(&name, version));
                match &record {
                    Some(record) => held.insert(name.clone(), Arc::clone(record)),
                    None => held.remove(&name),
                };
                put_sorted(&mut records, &name, record.as_ref());
            }
            let whole: Vec<_> = std::iter::once(own).chain(held.into_values()).collect();
            prop_assert_eq!(records, whole);
        }
    }

    #[test]
    fn the_own_record_stays_first_whatever_its_name() {
        let mut records = vec![node("zz-root", 0), node("a", 0)];
        put_sorted(&mut records, "zz-root", Some(&node("zz-root", 1)));
        put_sorted(&mut records, "b", Some(&node("b", 0)));
        let names: Vec<_> = records.iter().map(|record| record.name.as_str()).collect();
        assert_eq!(names, ["zz-root", "a", "b"]);
        assert_eq!(records[0].version, "1");
    }
}

/// What the relays' issuer keys were last recorded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recorded {
    /// Not recorded yet.
    Never,
    /// Recorded while the mesh CA rotation with this signer key was under
    /// way (`None`: no rotation).
    During(Option<[u8; 32]>),
}
