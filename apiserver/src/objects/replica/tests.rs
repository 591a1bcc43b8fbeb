//! The replicated store on an in-memory backend whose feed the test
//! drives: what real etcd cannot be made to do on cue (lose changes to a
//! compaction while the feed is cut off). The rest is tested against real
//! etcd processes in `tests/tests/etcd_store.rs`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use serde_json::json;

use super::super::backend::{
    BackendError, Change, Entry, Expect, FeedItem, ObjectBackend, Replicated, Stored, Write,
};
use super::super::{ObjectError, ObjectKey, ObjectStore};

type Sink = Box<dyn FnMut(FeedItem) + Send>;

/// A replicated backend in memory: every committed change goes to the feed
/// at once, unless the feed is cut off.
#[derive(Default)]
struct Memory {
    state: Mutex<MemoryState>,
    sink: Mutex<Option<Sink>>,
}

#[derive(Default)]
struct MemoryState {
    keys: BTreeMap<Vec<u8>, (Bytes, u64)>,
    revision: u64,
    compacted: u64,
    log: Vec<Change>,
    cut_off: bool,
}

impl Memory {
    fn deliver(&self, item: FeedItem) {
        if let Some(sink) = self.sink.lock().expect("not poisoned").as_mut() {
            sink(item);
        }
    }

    /// Compacts the history up to the latest revision while the feed is
    /// cut off, then lets the feed start again at the present, as the etcd
    /// backend's feed does.
    fn compact_behind_the_feed(&self) {
        let now = {
            let mut state = self.state.lock().expect("not poisoned");
            state.compacted = state.revision;
            state.log.clear();
            state.cut_off = false;
            state.revision
        };
        self.deliver(FeedItem::Restarted(now));
    }

    fn cut_off(&self) {
        self.state.lock().expect("not poisoned").cut_off = true;
    }
}

impl ObjectBackend for Memory {
    fn get(&self, key: &[u8]) -> Result<Option<Stored>, BackendError> {
        let state = self.state.lock().expect("not poisoned");
        Ok(state.keys.get(key).map(|(value, revision)| Stored {
            value: value.clone(),
            revision: Some(*revision),
        }))
    }

    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a> {
        let entries = self.scan_latest(prefix).map(|(entries, _)| entries);
        match entries {
            Ok(entries) => Box::new(entries.into_iter().map(Ok)),
            Err(error) => Box::new(std::iter::once(Err(error))),
        }
    }

    fn apply(&self, _writes: Vec<Write>) -> Result<(), BackendError> {
        Err(BackendError::Failed("a replicated store commits".into()))
    }

    fn replicated(&self) -> Option<&dyn Replicated> {
        Some(self)
    }
}

impl Replicated for Memory {
    fn commit(
        &self,
        key: &[u8],
        value: Option<Vec<u8>>,
        expect: Expect,
    ) -> Result<Option<u64>, BackendError> {
        let (change, deliver) = {
            let mut state = self.state.lock().expect("not poisoned");
            let held = state.keys.get(key).map(|(_, revision)| *revision);
            let holds = match expect {
                Expect::Absent => held.is_none(),
                Expect::Revision(revision) => held == Some(revision),
            };
            if !holds {
                return Ok(None);
            }
            state.revision += 1;
            let revision = state.revision;
            let previous = state.keys.get(key).map(|(value, at)| Stored {
                value: value.clone(),
                revision: Some(*at),
            });
            match &value {
                Some(value) => {
                    state
                        .keys
                        .insert(key.to_vec(), (Bytes::from(value.clone()), revision));
                }
                None => {
                    state.keys.remove(key);
                }
            }
            let change = Change {
                key: Bytes::copy_from_slice(key),
                revision,
                created: held.is_none(),
                value: value.map(Bytes::from),
                previous,
            };
            state.log.push(change.clone());
            (change, !state.cut_off)
        };
        let revision = change.revision;
        if deliver {
            self.deliver(FeedItem::Change(change));
        }
        Ok(Some(revision))
    }

    fn revision(&self) -> Result<u64, BackendError> {
        Ok(self.state.lock().expect("not poisoned").revision)
    }

    fn scan_latest(&self, prefix: &[u8]) -> Result<(Vec<Entry>, u64), BackendError> {
        let state = self.state.lock().expect("not poisoned");
        let entries = state
            .keys
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, (value, revision))| {
                (
                    Bytes::copy_from_slice(key),
                    Stored {
                        value: value.clone(),
                        revision: Some(*revision),
                    },
                )
            })
            .collect();
        Ok((entries, state.revision))
    }

    fn scan_at(&self, prefix: &[u8], revision: u64) -> Result<Vec<Entry>, BackendError> {
        let compacted = self.state.lock().expect("not poisoned").compacted;
        if revision < compacted {
            return Err(BackendError::Compacted {
                requested: revision,
                compacted,
            });
        }
        // Only the latest is kept: enough for the tests below.
        Ok(self.scan_latest(prefix)?.0)
    }

    fn changes(&self, after: u64, until: u64) -> Result<Vec<Change>, BackendError> {
        let state = self.state.lock().expect("not poisoned");
        if after < state.compacted {
            return Err(BackendError::Compacted {
                requested: after + 1,
                compacted: state.compacted,
            });
        }
        Ok(state
            .log
            .iter()
            .filter(|change| change.revision > after && change.revision <= until)
            .cloned()
            .collect())
    }

    fn follow(&self, _after: u64, sink: Sink) -> Result<(), BackendError> {
        *self.sink.lock().expect("not poisoned") = Some(sink);
        Ok(())
    }

    fn fence(&self) -> Result<u64, BackendError> {
        let expect = match self.get(b"fence")?.and_then(|stored| stored.revision) {
            Some(revision) => Expect::Revision(revision),
            None => Expect::Absent,
        };
        self.commit(b"fence", Some(Vec::new()), expect)?
            .map_or_else(|| self.revision(), Ok)
    }
}

/// The backend, shared with the store that owns it.
struct Shared(std::sync::Arc<Memory>);

impl ObjectBackend for Shared {
    fn get(&self, key: &[u8]) -> Result<Option<Stored>, BackendError> {
        self.0.get(key)
    }
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Entry, BackendError>> + 'a> {
        self.0.scan_prefix(prefix)
    }
    fn apply(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.0.apply(writes)
    }
    fn replicated(&self) -> Option<&dyn Replicated> {
        Some(self.0.as_ref())
    }
}

fn config_map(name: &str, value: &str) -> (ObjectKey, serde_json::Value) {
    (
        ObjectKey::new("", "configmaps", Some("default"), name),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": value}}),
    )
}

#[test]
fn changes_lost_under_the_feed_restart_the_history_and_say_so() {
    let memory = std::sync::Arc::new(Memory::default());
    let store = ObjectStore::open_on(Box::new(Shared(memory.clone()))).expect("opens");
    let restarts = store.restarts();
    let (key, object) = config_map("a", "1");
    let created = store.create(&key, object).expect("created");
    let seen: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|version| version.parse().ok())
        .expect("a version");
    let (events, _) = store.watch(seen - 1).expect("the feed's history");
    assert_eq!(
        events.len(),
        1,
        "the store saw its own write through the feed"
    );

    // Another replica writes while this one's feed is cut off, and the
    // backend compacts those changes away.
    memory.cut_off();
    let (other, mut object) = config_map("b", "2");
    object["metadata"]["uid"] = json!("uid-of-b");
    memory
        .commit(
            other.encode().as_bytes(),
            Some(serde_json::to_vec(&object).expect("json")),
            Expect::Absent,
        )
        .expect("written");
    assert!(!restarts.has_changed().expect("open"));
    memory.compact_behind_the_feed();

    assert!(
        restarts.has_changed().expect("open"),
        "watchers and controllers are told to start over"
    );
    assert!(matches!(store.watch(seen), Err(ObjectError::Gone { .. })));
    // What is stored now is served, and the owner index knows the object
    // it never saw an event for.
    let (found, _) = store
        .get_by_uid("uid-of-b")
        .expect("read")
        .expect("the owner index was rebuilt from the backend");
    assert_eq!(found, other);
    let (listed, _) = store
        .list("", "configmaps", Some("default"))
        .expect("lists");
    assert_eq!(listed.len(), 2);
}
