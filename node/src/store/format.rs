//! The store's layout version, and the forward migrations between layouts.
//!
//! A store records its format under the `node` tree's `format` key. A build
//! opening a store of an older format it knows migrates it on open, after
//! copying the whole sled directory to `DIR/store.format-N.backup` (N the
//! old format), so that a downgrade is "stop, put the backup back, start the
//! old build" (docs/production.md, "Downgrades"). A store of a newer format
//! is refused without a write: this build would misread it.
//!
//! Each migration leaves the store at its old format or its new one, never
//! between, by writing its changes and the new format in one sled batch; so
//! a store still at an old format is as that format wrote it, and its
//! backup can always be taken afresh.

use std::path::{Path, PathBuf};

use super::StoreError;

/// The layout of the store this build reads and writes.
///
/// - 1 (never written down: a store without a format is one) kept each
///   bundle whole in one value and inventory records of protocol version 3.
///   No migration: this build cannot talk to such a relay either.
/// - 2 keeps bundles in chunks and records of protocol version 4 (0.1.0).
/// - 3 records which release last opened the store (`written-by`), so that
///   `inspect` and a refusal of a newer store can name it (0.2.0).
pub const STORE_FORMAT: u32 = 3;

/// The oldest format this build migrates from.
pub const OLDEST_MIGRATED_FORMAT: u32 = 2;

/// The `node` tree key of the format (4 bytes, big-endian).
pub(super) const FORMAT: &[u8] = b"format";

/// The `node` tree key of the version of the relaymesh build that last
/// opened the store (UTF-8).
pub(super) const WRITTEN_BY: &[u8] = b"written-by";

/// This build's version, as [`WRITTEN_BY`] records it.
const THIS_BUILD: &str = env!("CARGO_PKG_VERSION");

/// One step: the changes that take a store from `from` to `from + 1`, added
/// to `batch` (which the caller applies together with the new format).
struct Migration {
    from: u32,
    what: &'static str,
    changes: fn(&sled::Tree, &mut sled::Batch) -> Result<(), sled::Error>,
}

/// Every migration, oldest first; `MIGRATIONS[i].from` is
/// `OLDEST_MIGRATED_FORMAT + i`, and the last one ends at [`STORE_FORMAT`].
const MIGRATIONS: &[Migration] = &[Migration {
    from: 2,
    what: "record the release that last opened the store",
    changes: |_node, batch| {
        batch.insert(WRITTEN_BY, THIS_BUILD.as_bytes());
        Ok(())
    },
}];

/// What opening the store found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The format the store had before this open.
    pub found: u32,
    /// The release that last opened it before this one, if it said.
    pub written_by: Option<String>,
    /// Where the backup of the old format went, if this open migrated.
    pub backup: Option<PathBuf>,
}

/// Checks the format of the store whose `node` tree this is, marks a new
/// store with this build's, and migrates an older one forward (after a
/// backup of `dir/store`, when the store lives in a directory). `label`
/// names the store in errors.
pub(super) fn open(
    db: &sled::Db,
    node: &sled::Tree,
    dir: Option<&Path>,
    label: &str,
) -> Result<Opened, StoreError> {
    let sled_error = |source| StoreError::Sled {
        path: label.to_string(),
        source,
    };
    let written_by = node
        .get(WRITTEN_BY)
        .map_err(sled_error)?
        .map(|value| String::from_utf8_lossy(&value).into_owned());
    let found = match node.get(FORMAT).map_err(sled_error)? {
        Some(value) => <[u8; 4]>::try_from(value.as_ref())
            .map(u32::from_be_bytes)
            .map_err(|_| StoreError::CorruptKey {
                path: label.to_string(),
                key: String::from_utf8_lossy(FORMAT).into_owned(),
            })?,
        None if is_empty(db).map_err(sled_error)? => {
            let mut batch = sled::Batch::default();
            batch.insert(FORMAT, &STORE_FORMAT.to_be_bytes());
            batch.insert(WRITTEN_BY, THIS_BUILD.as_bytes());
            node.apply_batch(batch).map_err(sled_error)?;
            db.flush().map_err(sled_error)?;
            return Ok(Opened {
                found: STORE_FORMAT,
                written_by: None,
                backup: None,
            });
        }
        None => 1,
    };
    if found > STORE_FORMAT {
        return Err(StoreError::NewerFormat {
            path: label.to_string(),
            found,
            written_by: written_by.unwrap_or_else(|| "a newer relaymesh".to_string()),
        });
    }
    if found < OLDEST_MIGRATED_FORMAT {
        return Err(StoreError::Format {
            path: label.to_string(),
            found,
        });
    }
    let mut backup = None;
    if found < STORE_FORMAT {
        db.flush().map_err(sled_error)?;
        if let Some(dir) = dir {
            backup = Some(back_up(dir, found)?);
        }
        for migration in &MIGRATIONS[(found - OLDEST_MIGRATED_FORMAT) as usize..] {
            let mut batch = sled::Batch::default();
            (migration.changes)(node, &mut batch).map_err(sled_error)?;
            batch.insert(FORMAT, &(migration.from + 1).to_be_bytes());
            node.apply_batch(batch).map_err(sled_error)?;
            tracing::info!(
                store = label,
                from = migration.from,
                to = migration.from + 1,
                what = migration.what,
                "store migrated"
            );
        }
    }
    if written_by.as_deref() != Some(THIS_BUILD) {
        node.insert(WRITTEN_BY, THIS_BUILD.as_bytes())
            .map_err(sled_error)?;
    }
    db.flush().map_err(sled_error)?;
    Ok(Opened {
        found,
        written_by,
        backup,
    })
}

/// Whether the database holds nothing at all: a store being created.
fn is_empty(db: &sled::Db) -> Result<bool, sled::Error> {
    for name in db.tree_names() {
        if !db.open_tree(&name)?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where the backup of a store of format `format` in `dir` goes.
pub fn backup_path(dir: &Path, format: u32) -> PathBuf {
    dir.join(format!("store.format-{format}.backup"))
}

/// Copies `dir/store` (flushed, and not written while this runs) to
/// [`backup_path`], replacing an earlier backup of the same format: a store
/// still at that format is exactly what the format wrote (see the module
/// comment), so the fresh copy is the one to restore.
fn back_up(dir: &Path, format: u32) -> Result<PathBuf, StoreError> {
    let target = backup_path(dir, format);
    let partial = target.with_extension("backup.partial");
    remove_if_present(&partial)?;
    copy_dir(&dir.join("store"), &partial)?;
    super::permissions::make_private(&partial)?;
    remove_if_present(&target)?;
    std::fs::rename(&partial, &target).map_err(|source| io_error(&target, source))?;
    tracing::info!(backup = %target.display(), format, "store backed up before migrating");
    Ok(target)
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io_error(path, error)),
        _ => Ok(()),
    }
}

/// A recursive copy.
fn copy_dir(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(to).map_err(|source| io_error(to, source))?;
    let entries = std::fs::read_dir(from).map_err(|source| io_error(from, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| io_error(from, source))?;
        let source_path = entry.path();
        let target_path = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|source| io_error(&source_path, source))?;
        if kind.is_dir() {
            copy_dir(&source_path, &target_path)?;
        } else {
            std::fs::copy(&source_path, &target_path)
                .map_err(|source| io_error(&source_path, source))?;
        }
    }
    Ok(())
}

fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests;
