//! The heap a relay's core holds per child and per record below a child,
//! counted by an allocator that tracks the bytes live: the slope, not the
//! total (issue 35, "memory per idle link"). Deterministic for a build, so
//! it bounds what a change may add; docs/performance.md, "The core's
//! records of each child", has the figures.
//!
//! One test drives both measurements in turn: the counter is the whole
//! process's, and tests of one binary run on parallel threads.
// A counting allocator wraps the system's, which takes `unsafe`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use relaymesh_core::state::Persisted;
use relaymesh_core::{Core, CoreConfig, LinkStats, Now};
use relaymesh_protocol::message::{DownMessage, Hello, UpMessage, Welcome};
use relaymesh_protocol::{InventoryUpdate, LinkStatus, NodeRecord, Role, PROTOCOL_VERSION};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter only adds sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The bytes a direct agent child may cost its relay's core, with a joined
/// cluster's seven labels: 1,656; 2,093 before a label set was one packed
/// buffer.
const MAX_PER_CHILD: isize = 1_800;
/// The bytes a record below a child may cost: 856; 1,366 before.
const MAX_PER_RECORD_BELOW: isize = 950;

/// A cluster as the hollow agents of `testbed up` report themselves: three
/// planned labels from a few regions, two detected from its cluster, and
/// the two its join gave it, which no other cluster shares (the token's
/// id and the time; `relaymesh_node::store::with_join_token_label`).
fn cluster(name: &str, parent: &str, i: usize) -> NodeRecord {
    let region = ["eu", "us", "ap"][i % 3];
    NodeRecord {
        name: name.into(),
        role: Role::Agent,
        parent: Some(parent.into()),
        labels: [
            ("region".to_string(), region.to_string()),
            ("tier".to_string(), "edge".to_string()),
            ("zone".to_string(), format!("{region}-west")),
            (
                "relaymesh.dev/kubernetes-version".to_string(),
                "1.33".to_string(),
            ),
            ("relaymesh.dev/nodes".to_string(), "3".to_string()),
            (
                "relaymesh.dev/join-token".to_string(),
                format!("{:032x}", 0x1ff6_0099_2dd2_2fbe_u128 * (i as u128 + 1)),
            ),
            (
                "relaymesh.dev/joined-at".to_string(),
                (1_796_023_735 + i).to_string(),
            ),
        ]
        .into(),
        addresses: vec![],
        version: "0.9.0".into(),
        link: None,
        capacity: BTreeMap::new(),
        refused_entries: 0,
        limit_refusals: BTreeMap::new(),
    }
}

struct Relay {
    core: Core,
    start: Instant,
    seconds: u64,
}

impl Relay {
    /// A relay `name` under `parent`, welcomed by it, so that what it owes
    /// its parent leaves instead of piling up.
    fn welcomed(name: &str, ancestors: &[&str]) -> Self {
        let start = Instant::now();
        let config = CoreConfig {
            name: name.into(),
            role: Role::Relay,
            parent: ancestors.last().map(|parent| parent.to_string()),
            labels: BTreeMap::new(),
            capacity: BTreeMap::new(),
            addresses: vec![format!("{name}:7443")],
            version: "0.9.0".into(),
            log_keep: 1_000,
            root_key: vec![0; 32],
            max_records_per_child: 100_000,
            max_status_keys_per_child: 10_000,
        };
        let mut relay = Self {
            core: Core::new(config, Persisted::default(), BTreeSet::new(), at(start, 0)),
            start,
            seconds: 0,
        };
        let welcome = Welcome {
            version: PROTOCOL_VERSION,
            parent: ancestors
                .last()
                .map(|parent| parent.to_string())
                .unwrap_or_default(),
            epoch: 1,
            ancestors: ancestors.iter().map(|name| name.to_string()).collect(),
        };
        let now = relay.now();
        relay
            .core
            .handle_parent_message(now, DownMessage::Welcome(welcome));
        relay.settle();
        relay
    }

    fn now(&mut self) -> Now {
        self.seconds += 1;
        at(self.start, self.seconds)
    }

    /// Runs the timers due (the inventory's flush up) and drops the
    /// actions, as the daemon would once it has carried them out.
    fn settle(&mut self) {
        self.seconds += 10;
        self.core.handle_timeout(at(self.start, self.seconds));
        while self.core.poll_action().is_some() {}
    }

    fn connect(&mut self, link: u64, name: &str, role: Role) {
        let hello = Hello {
            min_version: 1,
            max_version: PROTOCOL_VERSION,
            resume: None,
        };
        let now = self.now();
        self.core
            .handle_child_connected(now, link, name, role, hello)
            .expect("the child is accepted");
    }

    fn report(&mut self, link: u64, update: InventoryUpdate) {
        let now = self.now();
        self.core
            .handle_child_message(now, link, UpMessage::Inventory(update));
    }
}

fn at(start: Instant, seconds: u64) -> Now {
    Now {
        instant: start + Duration::from_secs(seconds),
        unix_ms: 1_700_000_000_000 + seconds * 1_000,
    }
}

/// What each of `count` agent children costs a leaf relay once connected,
/// reported, acknowledged and measured.
fn per_direct_child(count: u64) -> isize {
    let mut leaf = Relay::welcomed("leaf-0", &["root", "mid-0"]);
    let before = live();
    for link in 0..count {
        let name = format!("hollow-{link:05}");
        leaf.connect(link, &name, Role::Agent);
        let record = cluster(&name, "leaf-0", link as usize);
        leaf.report(
            link,
            InventoryUpdate::Full {
                records: vec![record],
                first: true,
                last: true,
            },
        );
        let now = leaf.now();
        leaf.core
            .handle_child_message(now, link, UpMessage::Ack { revision: 0 });
        let stats = LinkStats {
            rtt: Duration::from_millis(1),
            bytes_sent: 100,
            bytes_received: 100,
        };
        leaf.core.handle_link_stats(now, link, stats);
        leaf.settle();
    }
    let _ = leaf.core.take_inventory_changes();
    let _ = leaf.core.take_link_measurement_changes();
    leaf.settle();
    (live() - before) / count as isize
}

/// What each of `count` clusters below one relay child costs its parent.
fn per_record_below_a_child(count: u64) -> isize {
    let mut mid = Relay::welcomed("mid-0", &["root"]);
    mid.connect(1, "leaf-0", Role::Relay);
    mid.settle();
    let before = live();
    for chunk in 0..count / 100 {
        let upserts = (chunk * 100..(chunk + 1) * 100)
            .map(|i| NodeRecord {
                link: Some(LinkStatus {
                    connected: true,
                    changed_unix_ms: 1_700_000_000_000,
                    ..LinkStatus::default()
                }),
                ..cluster(&format!("hollow-{i:05}"), "leaf-0", i as usize)
            })
            .collect();
        mid.report(
            1,
            InventoryUpdate::Delta {
                upserts,
                removals: vec![],
            },
        );
        mid.settle();
    }
    let _ = mid.core.take_inventory_changes();
    mid.settle();
    (live() - before) / count as isize
}

#[test]
fn a_relay_holds_little_per_child_and_per_record_below() {
    let per_child = per_direct_child(2_000);
    eprintln!("a leaf's core holds {per_child} bytes per agent child");
    assert!(
        per_child <= MAX_PER_CHILD,
        "{per_child} bytes per child, over {MAX_PER_CHILD}"
    );
    let per_record = per_record_below_a_child(3_000);
    eprintln!("a relay's core holds {per_record} bytes per record below a child");
    assert!(
        per_record <= MAX_PER_RECORD_BELOW,
        "{per_record} bytes per record, over {MAX_PER_RECORD_BELOW}"
    );
}
