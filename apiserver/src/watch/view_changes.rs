//! Watch events for the read-only resources an extension makes (relaymesh's
//! Clusters, Relays and ClusterProfiles, from the tree's inventory). A view
//! keeps no event history, so a watch remembers what it last sent and
//! compares it with the view as it is now: new objects are `ADDED`, changed ones `MODIFIED`,
//! vanished ones `DELETED` (with what was last sent of them).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::collection::object_name as name;

/// What one watch has sent of a read-only view, by object name.
#[derive(Debug, Default)]
pub(super) struct Sent {
    objects: BTreeMap<String, Value>,
}

impl Sent {
    /// What the watch's first `ADDED` events carried.
    pub(super) fn new(objects: &[Value]) -> Self {
        let mut sent = Self::default();
        for object in objects {
            sent.objects.insert(name(object), object.clone());
        }
        sent
    }

    /// The events that bring a client from what was sent to `now` (the
    /// objects the watch wants, filtered), and remembers `now`.
    pub(super) fn changes(&mut self, now: Vec<Value>) -> Vec<(&'static str, Value)> {
        let mut now: BTreeMap<String, Value> = now
            .into_iter()
            .map(|object| (name(&object), object))
            .collect();
        let mut events = Vec::new();
        for (name, before) in std::mem::take(&mut self.objects) {
            match now.remove(&name) {
                Some(after) if after == before => {
                    self.objects.insert(name, after);
                }
                Some(after) => {
                    events.push(("MODIFIED", after.clone()));
                    self.objects.insert(name, after);
                }
                None => events.push(("DELETED", before)),
            }
        }
        for (name, object) in now {
            events.push(("ADDED", object.clone()));
            self.objects.insert(name, object);
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(name: &str, connected: bool) -> Value {
        json!({"metadata": {"name": name}, "status": {"connected": connected}})
    }

    #[test]
    fn added_modified_and_deleted_each_once() {
        let mut sent = Sent::new(&[cluster("a", true), cluster("b", true)]);
        assert!(sent
            .changes(vec![cluster("a", true), cluster("b", true)])
            .is_empty());
        let events = sent.changes(vec![cluster("b", false), cluster("c", true)]);
        assert_eq!(
            events,
            vec![
                ("DELETED", cluster("a", true)),
                ("MODIFIED", cluster("b", false)),
                ("ADDED", cluster("c", true)),
            ]
        );
        assert!(sent
            .changes(vec![cluster("b", false), cluster("c", true)])
            .is_empty());
    }
}
