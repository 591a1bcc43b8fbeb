//! The leader's mirror of the root's node state in a real etcd: what a
//! store flushes through it, loaded by another store, is that store's
//! state, across checkpoints (the log is compacted into them as it grows);
//! a replica that does not hold the leader key is refused; and nothing in
//! etcd is readable without the secrets key.

use std::sync::Arc;

use anyhow::Result;
use relaymesh_node::store::journal::{Mirror, MirrorError, Op};
use relaymesh_node::store::{Mutation, Store};
use relaymesh_root::replicas::election::LEADER_KEY;
use relaymesh_root::replicas::mirror::{self, EtcdMirror, Head};
use relaymesh_root::state::SecretsKey;
use relaymesh_testbed::etcd::EtcdCluster;

const PREFIX: &str = "/relaymesh-mirror/";

#[test]
fn a_store_loaded_from_etcd_is_the_leaders_at_its_last_flush() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let etcd_cluster = EtcdCluster::start(&dir.path().join("etcd"), 1)?;
    let etcd = etcd_cluster.connect(PREFIX)?;
    let key = Arc::new(SecretsKey::create(&dir.path().join("secrets.key"))?);
    let lease = etcd.grant_lease(60)?;
    assert!(etcd.claim(LEADER_KEY, b"me", lease)?);
    assert!(
        !etcd.claim(LEADER_KEY, b"other", lease)?,
        "a second replica took the leader key"
    );

    let leader = Store::temporary("leader")?;
    let first = EtcdMirror::new(etcd.clone(), key.clone(), "me", Head::default());
    first
        .checkpoint(&leader.image()?, 0)
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    assert!(leader.set_mirror(Arc::new(first)));
    // More flushes than one checkpoint covers: the log is compacted.
    for epoch in 1..=600u64 {
        leader.apply(&[
            Mutation::SetEpoch(epoch),
            Mutation::SetAncestors(vec![format!("a-{epoch}")]),
        ])?;
        leader.flush()?;
    }
    let bundle = vec![7u8; 200 * 1024];
    let id = relaymesh_protocol::BundleId::of(&bundle);
    leader.put_bundle(&id, &bundle)?;
    leader.flush()?;

    let (head, ops) = mirror::load(&etcd, &key)?.expect("a mirror");
    assert!(head.generation > 2, "never compacted: {head:?}");
    let (log, _) = etcd.range(b"r/l/", None)?;
    assert!(log.len() < 300, "the log keeps {} parts", log.len());
    let next = Store::temporary("next")?;
    next.replace_image(&ops)?;
    assert_eq!(next.load()?, leader.load()?);
    assert_eq!(next.bundle(&id)?, Some(bundle));

    // Sealed: no value decodes as the journal's writes.
    let (all, _) = etcd.range(b"r/", None)?;
    for (key, value, _) in &all {
        if key.starts_with(b"r/c/") || key.starts_with(b"r/l/") {
            assert!(
                relaymesh_protocol::codec::decode::<Vec<Op>>(value).is_err(),
                "{} is plaintext",
                String::from_utf8_lossy(key)
            );
        }
    }

    // A replica that does not lead is refused, and writes nothing.
    let stale = EtcdMirror::new(etcd.clone(), key.clone(), "other", head);
    let write = Op {
        tree: "state".into(),
        key: b"m/epoch".to_vec(),
        value: Some(vec![0]),
    };
    let refused = stale.ship(&[write], &Vec::new);
    assert!(
        matches!(&refused, Err(MirrorError::Refused(reason)) if reason.contains("no longer")),
        "{refused:?}"
    );
    let (after, ops_after) = mirror::load(&etcd, &key)?.expect("a mirror");
    assert_eq!(after, head);
    assert_eq!(ops_after, ops);

    // Another key cannot open it.
    let stranger = SecretsKey::create(&dir.path().join("other.key"))?;
    assert!(mirror::load(&etcd, &stranger).is_err());
    Ok(())
}
