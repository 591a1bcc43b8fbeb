//! Migrations and refusals on real sled directories.

use std::path::Path;

use super::*;
use crate::store::Store;

/// A store as format `format` left it, written with sled directly: a node
/// identity, a state record, and `written_by` if given.
fn write_old_store(dir: &Path, format: u32, written_by: Option<&str>) -> anyhow::Result<()> {
    let db = sled::open(dir.join("store"))?;
    let node = db.open_tree("node")?;
    node.insert(FORMAT, &format.to_be_bytes())?;
    node.insert(b"identity", &b"who"[..])?;
    if let Some(version) = written_by {
        node.insert(WRITTEN_BY, version.as_bytes())?;
    }
    db.open_tree("state")?.insert(b"m/head", &b"7"[..])?;
    db.flush()?;
    Ok(())
}

/// The format, `written-by` and identity of a store, read with sled
/// directly (the store must be closed).
fn read_raw(store_dir: &Path) -> anyhow::Result<(u32, Option<String>, Option<Vec<u8>>)> {
    let db = sled::open(store_dir)?;
    let node = db.open_tree("node")?;
    let format = node
        .get(FORMAT)?
        .map(|value| u32::from_be_bytes(value.as_ref().try_into().unwrap_or([0; 4])))
        .unwrap_or(0);
    let written_by = node
        .get(WRITTEN_BY)?
        .map(|value| String::from_utf8_lossy(&value).into_owned());
    let identity = node.get(b"identity")?.map(|value| value.to_vec());
    Ok((format, written_by, identity))
}

#[test]
fn a_format_2_store_migrates_forward_keeping_a_backup() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_old_store(dir.path(), 2, None)?;

    let store = Store::open(dir.path())?;
    let backup = backup_path(dir.path(), 2);
    assert_eq!(
        store.opened(),
        &Opened {
            found: 2,
            written_by: None,
            backup: Some(backup.clone()),
        }
    );
    assert_eq!(
        store.state.get(b"m/head")?.as_deref(),
        Some(&b"7"[..]),
        "the state survives"
    );
    drop(store);

    // The backup is format 2 as it was; the store is this build's format.
    assert_eq!(
        read_raw(&backup)?,
        (2, None, Some(b"who".to_vec())),
        "the backup"
    );
    assert_eq!(
        read_raw(&dir.path().join("store"))?,
        (
            STORE_FORMAT,
            Some(THIS_BUILD.to_string()),
            Some(b"who".to_vec())
        ),
        "the migrated store"
    );
    // The backup is as private as the data directory.
    crate::store::permissions::check_private(&backup)?;

    // A second open has nothing to migrate.
    let store = Store::open(dir.path())?;
    assert_eq!(store.opened().found, STORE_FORMAT);
    assert_eq!(store.opened().backup, None);
    assert_eq!(store.opened().written_by.as_deref(), Some(THIS_BUILD));
    Ok(())
}

#[test]
fn an_upgrade_after_a_downgrade_takes_a_fresh_backup() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_old_store(dir.path(), 2, None)?;
    drop(Store::open(dir.path())?);
    let backup = backup_path(dir.path(), 2);

    // The downgrade: the backup put back, and the old build writes on.
    std::fs::remove_dir_all(dir.path().join("store"))?;
    std::fs::rename(&backup, dir.path().join("store"))?;
    {
        let db = sled::open(dir.path().join("store"))?;
        db.open_tree("node")?.insert(b"identity", &b"renewed"[..])?;
        db.flush()?;
    }

    let store = Store::open(dir.path())?;
    assert_eq!(store.opened().backup.as_ref(), Some(&backup));
    drop(store);
    assert_eq!(
        read_raw(&backup)?,
        (2, None, Some(b"renewed".to_vec())),
        "the backup is the store as the old build left it"
    );
    Ok(())
}

#[test]
fn a_store_of_a_newer_format_is_refused_untouched() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_old_store(dir.path(), STORE_FORMAT + 1, Some("9.9.9"))?;

    let Err(error) = Store::open(dir.path()) else {
        panic!("a newer store must be refused");
    };
    let message = error.to_string();
    assert!(
        matches!(error, StoreError::NewerFormat { found, .. } if found == STORE_FORMAT + 1),
        "{message}"
    );
    assert!(
        message.contains("written by relaymesh 9.9.9")
            && message.contains(&format!("store.format-{STORE_FORMAT}.backup")),
        "{message}"
    );
    assert_eq!(
        read_raw(&dir.path().join("store"))?,
        (
            STORE_FORMAT + 1,
            Some("9.9.9".to_string()),
            Some(b"who".to_vec())
        ),
        "nothing written"
    );
    assert!(!backup_path(dir.path(), STORE_FORMAT + 1).exists());
    Ok(())
}

#[test]
fn the_migrations_chain_from_the_oldest_format_to_this_one() {
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        assert_eq!(migration.from, OLDEST_MIGRATED_FORMAT + index as u32);
    }
    assert_eq!(
        OLDEST_MIGRATED_FORMAT + MIGRATIONS.len() as u32,
        STORE_FORMAT
    );
}
