//! The sled store against its in-memory model, reopen included.

use proptest::prelude::*;
use relaymesh_protocol::message::Resume;
use relaymesh_protocol::{BundleId, NodeRecord, Role, SliceEntry, Target};

use super::*;

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c", "placement/x"]).prop_map(str::to_string)
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (1u64..50, key(), any::<u8>()).prop_map(|(revision, key, byte)| Mutation::PutEntry {
            revision,
            entry: SliceEntry {
                key,
                target: Target::Everywhere,
                bundles: vec![BundleId::of(&[byte])],
                body: vec![byte],
                serial: 0,
                signature: Vec::new(),
            },
        }),
        key().prop_map(Mutation::RemoveEntry),
        (1u64..50, key()).prop_map(|(revision, key)| Mutation::LogChange { revision, key }),
        (0u64..50).prop_map(|floor| Mutation::TrimLog { floor }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(epoch, revision)| Mutation::SetParentPosition(Resume { epoch, revision })),
        Just(Mutation::ClearParentPosition),
        prop::collection::vec(key(), 0..3).prop_map(Mutation::SetAncestors),
        (key(), proptest::option::of(key())).prop_map(|(name, via)| Mutation::PutNode {
            record: NodeRecord {
                name,
                role: Role::Relay,
                parent: Some("root".into()),
                labels: Default::default(),
                addresses: vec![],
                version: "test".into(),
                link: None,
                capacity: Default::default(),
                refused_entries: 0,
                limit_refusals: Default::default(),
            },
            via,
        }),
        key().prop_map(Mutation::RemoveNode),
        any::<u64>().prop_map(Mutation::SetEpoch),
        (key(), 0u8..3, any::<[u64; 4]>()).prop_map(|(child, byte, n)| Mutation::RecordServed {
            child,
            bundle: BundleId::of(&[byte]),
            bundle_total: Served {
                times: n[0],
                bytes: n[1]
            },
            link_total: Served {
                times: n[2],
                bytes: n[3]
            },
        }),
        (0u8..3).prop_map(|byte| Mutation::ForgetServed(BundleId::of(&[byte]))),
        (key(), proptest::option::of(any::<[u8; 32]>()))
            .prop_map(|(key, digest)| Mutation::SetCutDigest { key, digest }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn sled_store_matches_the_model(
        batches in prop::collection::vec((prop::collection::vec(mutation(), 0..6), any::<bool>()), 1..12)
    ) {
        let mut dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let fail = |e: StoreError| TestCaseError::fail(e.to_string());
        let mut store = Store::open(dir.path()).map_err(fail)?;
        let mut model = Persisted::default();
        for (batch, reopen) in batches {
            store.apply(&batch).map_err(fail)?;
            for mutation in &batch {
                model.apply(mutation);
            }
            if reopen {
                // A crash image: the files as they are on disk once flushed,
                // opened by a new process (a copy, so no lock is shared).
                store.flush().map_err(fail)?;
                let image = crash_image(dir.path()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                drop(store);
                store = Store::open(image.path()).map_err(fail)?;
                dir = image;
            }
            prop_assert_eq!(store.load().map_err(fail)?, model.clone());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The hollow agents' temporary store is the same store: it matches the
    /// model batch by batch, and its bundles are kept and read in chunks.
    #[test]
    fn a_temporary_store_matches_the_model(
        batches in prop::collection::vec(prop::collection::vec(mutation(), 0..6), 1..12),
        bundle in prop::collection::vec(any::<u8>(), 0..(3 * BUNDLE_CHUNK_LEN)),
    ) {
        let fail = |e: StoreError| TestCaseError::fail(e.to_string());
        let store = Store::temporary("hollow-1").map_err(fail)?;
        let other = Store::temporary("hollow-2").map_err(fail)?;
        let mut model = Persisted::default();
        for batch in batches {
            store.apply(&batch).map_err(fail)?;
            for mutation in &batch {
                model.apply(mutation);
            }
            prop_assert_eq!(store.load().map_err(fail)?, model.clone());
        }
        let id = BundleId::of(&bundle);
        store.put_bundle(&id, &bundle).map_err(fail)?;
        prop_assert_eq!(store.bundle(&id).map_err(fail)?, Some(bundle));
        // Two temporary stores share nothing.
        prop_assert!(!other.has_bundle(&id).map_err(fail)?);
        prop_assert_eq!(other.load().map_err(fail)?, Persisted::default());
    }
}

/// Copies a data directory, as a crash would leave it, to a new directory.
fn crash_image(from: &std::path::Path) -> std::io::Result<tempfile::TempDir> {
    fn copy(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                copy(&entry.path(), &target)?;
            } else {
                std::fs::copy(entry.path(), target)?;
            }
        }
        Ok(())
    }
    let image = tempfile::tempdir()?;
    copy(from, image.path())?;
    Ok(image)
}

#[test]
fn tokens_are_claimed_once_and_expire() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    assert!(store.claim_token([1; 16], 100, 10)?);
    assert!(!store.claim_token([1; 16], 100, 10)?);
    // An expired claim no longer holds its id, forgotten or not.
    assert!(store.claim_token([2; 16], 300, 200)?);
    assert!(store.claim_token([1; 16], 400, 200)?);
    assert!(!store.claim_token([1; 16], 400, 300)?);
    assert!(!store.claim_token([2; 16], 300, 300)?, "expires after 300");
    Ok(())
}

#[test]
fn claims_forget_expired_ones_at_most_once_per_prune_period() -> anyhow::Result<()> {
    use crate::store::issued_tokens::PRUNE_EVERY_SECS;
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let claimed = |store: &Store| store.tokens.iter().count();
    assert!(store.claim_token([1; 16], 100, 10)?);
    // Expired, but the last prune was at 10: kept.
    assert!(store.claim_token([2; 16], 1_000_000, 200)?);
    assert_eq!(claimed(&store), 2);
    // A prune period later, the next claim forgets it.
    assert!(store.claim_token([3; 16], 1_000_000, 10 + PRUNE_EVERY_SECS)?);
    assert_eq!(claimed(&store), 2, "[1] forgotten, [2] and [3] held");
    assert!(!store.claim_token([2; 16], 1_000_000, 10 + PRUNE_EVERY_SECS)?);
    Ok(())
}

#[test]
fn digest_changes_only_with_content() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let before = store.digest()?;
    assert_eq!(before, store.digest()?);
    let id = BundleId::of(b"bytes");
    store.put_bundle(&id, b"bytes")?;
    assert_ne!(before, store.digest()?);
    assert_eq!(store.bundle(&id)?.as_deref(), Some(&b"bytes"[..]));
    assert_eq!(store.bundle_sizes()?, vec![(id, 5)]);
    store.remove_bundle(&id)?;
    assert_eq!(before, store.digest()?);
    Ok(())
}

#[test]
fn bundles_are_stored_and_read_in_chunks() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let bytes: Vec<u8> = (0..BUNDLE_CHUNK_LEN * 3 + 100)
        .map(|n| (n % 251) as u8)
        .collect();
    let id = BundleId::of(&bytes);
    // Written in pieces that do not line up with chunks, as they arrive.
    let mut writer = store.bundle_writer(&id);
    for piece in bytes.chunks(1000) {
        writer.write(piece)?;
    }
    assert!(!store.has_bundle(&id)?, "not held before it is committed");
    writer.commit()?;
    assert_eq!(store.bundle_len(&id)?, Some(bytes.len() as u64));
    let mut chunks = store.bundle_chunks(&id)?.expect("held");
    let mut sizes = Vec::new();
    let mut read = Vec::new();
    while let Some(chunk) = chunks.next_chunk()? {
        sizes.push(chunk.len());
        read.extend_from_slice(&chunk);
    }
    assert_eq!(
        sizes,
        [BUNDLE_CHUNK_LEN, BUNDLE_CHUNK_LEN, BUNDLE_CHUNK_LEN, 100]
    );
    assert_eq!(read, bytes);
    assert_eq!(store.bundle(&id)?, Some(bytes));
    assert_eq!(store.bundle_sizes()?, vec![(id, read.len() as u64)]);
    Ok(())
}

#[test]
fn partial_bundles_are_never_held_and_are_cleaned_up() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let before = store.digest()?;
    let held = BundleId::of(b"held");
    store.put_bundle(&held, b"held")?;
    let with_held = store.digest()?;
    // A transfer that failed: aborted, nothing is left.
    let failed = BundleId::of(b"failed");
    let mut writer = store.bundle_writer(&failed);
    writer.write(&vec![1u8; BUNDLE_CHUNK_LEN + 5])?;
    writer.abort()?;
    assert_eq!(store.digest()?, with_held);
    // A transfer cut by a crash: its chunks stay until the next start.
    let cut = BundleId::of(b"cut");
    let mut writer = store.bundle_writer(&cut);
    writer.write(&vec![2u8; BUNDLE_CHUNK_LEN * 2])?;
    drop(writer);
    assert!(!store.has_bundle(&cut)?);
    assert_ne!(store.digest()?, with_held);
    assert_eq!(store.remove_partial_bundles()?, 1);
    assert_eq!(store.digest()?, with_held);
    assert_eq!(store.bundle(&held)?.as_deref(), Some(&b"held"[..]));
    store.remove_bundle(&held)?;
    assert_eq!(store.digest()?, before);
    assert_eq!(store.remove_partial_bundles()?, 0);
    Ok(())
}

#[test]
fn a_store_of_another_format_is_refused_clearly() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    {
        // What a relay before format 2 left: a node, and no format.
        let db = sled::open(dir.path().join("store"))?;
        db.open_tree("node")?.insert(IDENTITY, &b"old"[..])?;
        db.flush()?;
    }
    let Err(error) = Store::open(dir.path()) else {
        panic!("an old store must be refused");
    };
    let message = error.to_string();
    assert!(
        matches!(error, StoreError::Format { found: 1, .. }),
        "{message}"
    );
    assert!(
        message.contains("format 1") && message.contains("re-create the node"),
        "{message}"
    );
    // A new store gets this build's format, and opens again.
    let fresh = tempfile::tempdir()?;
    drop(Store::open(fresh.path())?);
    Store::open(fresh.path())?;
    Ok(())
}

/// Many stores in one process flushing at once (the testbed's hollow
/// agents) all finish. sled's own `flush_async` waits on the IO pool that
/// also does the writes, and hung here for good within a few rounds (so
/// hard that a tokio timeout in the same runtime never fired: the rounds
/// run on a thread of their own, watched from this one).
#[test]
fn many_stores_flushing_at_once_all_finish() -> anyhow::Result<()> {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(flush_rounds()));
        let _ = done.send(result);
    });
    // A hang detector, not a timing: all the rounds take milliseconds.
    finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .map_err(|_| anyhow::anyhow!("the flushes never finished"))?
}

async fn flush_rounds() -> anyhow::Result<()> {
    let stores: Vec<Store> = (0..64)
        .map(|index| Store::temporary(&format!("hollow-{index}")))
        .collect::<Result<_, _>>()?;
    for round in 0..20u64 {
        let flushes = stores.iter().map(|store| {
            let store = store.clone();
            async move {
                store.apply(&[Mutation::SetEpoch(round)])?;
                store.flush_async().await
            }
        });
        futures::future::try_join_all(flushes).await?;
    }
    for store in &stores {
        anyhow::ensure!(store.load()?.epoch == 19, "a store lost its last write");
    }
    Ok(())
}

/// A store whose lock another open handle holds for good is refused with
/// [`StoreError::Locked`] (sled reports the lock as an `Other` I/O error
/// naming it, never as `WouldBlock`).
#[test]
fn a_store_held_open_is_refused_as_locked() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let _held = Store::open(dir.path())?;
    match Store::open(dir.path()) {
        Err(StoreError::Locked { path }) => assert_eq!(path, dir.path().display().to_string()),
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("a second open of a held store succeeded"),
    }
    Ok(())
}

/// A mirror in memory: the groups it took, and how many more to refuse
/// (`Refused`) or put off (`Unavailable`) first.
#[derive(Default)]
struct MemoryMirror {
    groups: std::sync::Mutex<Vec<Vec<journal::Op>>>,
    refuse: std::sync::atomic::AtomicUsize,
    put_off: std::sync::atomic::AtomicUsize,
}

impl journal::Mirror for MemoryMirror {
    fn ship(
        &self,
        ops: &[journal::Op],
        _image: &dyn Fn() -> Vec<journal::Op>,
    ) -> Result<(), journal::MirrorError> {
        use std::sync::atomic::Ordering;
        let take = |counter: &std::sync::atomic::AtomicUsize| {
            counter
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        };
        if take(&self.refuse) {
            return Err(journal::MirrorError::Refused("not the leader".into()));
        }
        if take(&self.put_off) {
            return Err(journal::MirrorError::Unavailable("no quorum".into()));
        }
        self.groups.lock().expect("not poisoned").push(ops.to_vec());
        Ok(())
    }
}

impl MemoryMirror {
    fn shipped(&self) -> Vec<journal::Op> {
        self.groups.lock().expect("not poisoned").concat()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// What a leader's flushes hand its mirror, replayed into another
    /// store, is that leader's core state: the next leader starts exactly
    /// where the last flush left it.
    #[test]
    fn a_store_loaded_from_its_mirror_is_the_store_at_its_last_flush(
        batches in prop::collection::vec(prop::collection::vec(mutation(), 0..6), 1..10),
        bundle in prop::collection::vec(any::<u8>(), 0..(2 * BUNDLE_CHUNK_LEN)),
    ) {
        let fail = |e: StoreError| TestCaseError::fail(e.to_string());
        let leader = Store::temporary("leader").map_err(fail)?;
        let mirror = std::sync::Arc::new(MemoryMirror::default());
        prop_assert!(leader.set_mirror(mirror.clone()));
        for batch in &batches {
            leader.apply(batch).map_err(fail)?;
            leader.flush().map_err(fail)?;
        }
        let id = BundleId::of(&bundle);
        leader.put_bundle(&id, &bundle).map_err(fail)?;
        leader.flush().map_err(fail)?;

        let next = Store::temporary("next").map_err(fail)?;
        next.replace_image(&mirror.shipped()).map_err(fail)?;
        prop_assert_eq!(next.load().map_err(fail)?, leader.load().map_err(fail)?);
        prop_assert_eq!(next.bundle(&id).map_err(fail)?, Some(bundle));
        prop_assert_eq!(next.image().map_err(fail)?, leader.image().map_err(fail)?);
    }
}

/// A replica's own keys (its configuration, candidates, where its objects
/// live) never reach the mirror, and loading a mirror keeps them.
#[test]
fn a_replicas_own_keys_stay_its_own() -> anyhow::Result<()> {
    let mesh = crate::pki::create_mesh("root", &["127.0.0.1".to_string()])?;
    let config = |listen: &str| crate::config::NodeConfig {
        advertise: vec![listen.to_string()],
        listen: Some(listen.to_string()),
        api_listen: Some("127.0.0.1:6443".into()),
        parent: None,
        labels: Default::default(),
        capacity: Default::default(),
    };
    let leader = Store::temporary("leader")?;
    let mirror = std::sync::Arc::new(MemoryMirror::default());
    assert!(leader.set_mirror(mirror.clone()));
    assert!(
        !leader.set_mirror(mirror.clone()),
        "a second mirror was set"
    );
    leader.initialize(&mesh.identity, &config("127.0.0.1:7001"), 7)?;
    let shipped = mirror.shipped();
    assert!(shipped.iter().any(|op| op.key == IDENTITY), "{shipped:?}");
    assert!(
        !shipped.iter().any(|op| op.key == CONFIG),
        "the configuration was mirrored"
    );

    let standby = Store::temporary("standby")?;
    standby.set_config(&config("127.0.0.1:7002"))?;
    standby.replace_image(&shipped)?;
    assert_eq!(
        standby.identity()?.map(|identity| identity.name),
        Some("root".into())
    );
    assert_eq!(
        standby.config()?.and_then(|config| config.listen),
        Some("127.0.0.1:7002".into())
    );
    // A mirror that names a replica's own key is refused, not applied.
    let foreign = journal::Op {
        tree: "node".into(),
        key: CONFIG.to_vec(),
        value: Some(vec![1]),
    };
    assert!(standby.replace_image(&[foreign]).is_err());
    Ok(())
}

/// A flush waits out a mirror that is unavailable (no etcd quorum) and
/// ships once; a refusal (another replica leads) is an error that keeps
/// the writes, in order, for the next flush.
#[test]
fn a_flush_waits_for_an_unavailable_mirror_and_keeps_refused_writes() -> anyhow::Result<()> {
    let store = Store::temporary("leader")?;
    let mirror = std::sync::Arc::new(MemoryMirror::default());
    store.set_mirror(mirror.clone());
    mirror.put_off.store(2, std::sync::atomic::Ordering::SeqCst);
    store.apply(&[Mutation::SetEpoch(1)])?;
    store.flush()?;
    assert_eq!(mirror.groups.lock().expect("not poisoned").len(), 1);

    mirror.refuse.store(1, std::sync::atomic::Ordering::SeqCst);
    store.apply(&[Mutation::SetEpoch(2)])?;
    let error = store.flush().expect_err("refused");
    assert!(error.to_string().contains("not the leader"), "{error}");
    store.apply(&[Mutation::SetEpoch(3)])?;
    store.flush()?;
    let groups = mirror.groups.lock().expect("not poisoned").clone();
    assert_eq!(groups.len(), 2);
    let epochs: Vec<u64> = groups[1]
        .iter()
        .filter(|op| op.key == EPOCH)
        .filter_map(|op| op.value.as_deref())
        .map(codec::decode::<u64>)
        .collect::<Result<_, _>>()?;
    assert_eq!(epochs, vec![2, 3], "the refused write first, then the next");
    Ok(())
}
