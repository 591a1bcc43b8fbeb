//! Keeping a node's data directory private: it holds the node's private
//! keys (and, at the root, the mesh CA's key and every stored Secret), so it
//! must be readable by its owner only.
//!
//! New directories are made 0700 and new files 0600 (the daemons also set a
//! 0077 umask, so files sled creates later are private too); an existing
//! directory with anything looser is refused, with the command that fixes it,
//! rather than used.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::StoreError;

/// The permission bits that must be clear on everything in a data directory.
const OTHERS: u32 = 0o077;

/// How deep the check descends: sled's layout is two levels below the data
/// directory (`store/blobs/…`); anything deeper is not ours to police.
const MAX_DEPTH: usize = 4;

/// Makes the files this process creates from now on private to its user
/// (umask 0077). The daemons call it first thing, so every file sled, the
/// object store or a kubeconfig writer creates is 0600 and every directory
/// 0700.
pub fn restrict_new_files() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(OTHERS));
}

/// Creates `dir` (and missing parents) if needed and makes it 0700.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(|source| io_error(dir, source))?;
    set_mode(dir, 0o700)
}

/// Makes everything under `dir`, and `dir` itself, private: directories 0700,
/// files 0600.
pub fn make_private(dir: &Path) -> Result<(), StoreError> {
    for (path, is_dir) in walk(dir)? {
        set_mode(&path, if is_dir { 0o700 } else { 0o600 })?;
    }
    Ok(())
}

/// Refuses a data directory in which anything is readable, writable or
/// searchable by the group or others.
pub fn check_private(dir: &Path) -> Result<(), StoreError> {
    for (path, _) in walk(dir)? {
        let mode = std::fs::symlink_metadata(&path)
            .map_err(|source| io_error(&path, source))?
            .permissions()
            .mode()
            & 0o777;
        if mode & OTHERS != 0 {
            return Err(StoreError::NotPrivate {
                path: path.display().to_string(),
                mode,
                data_dir: dir.display().to_string(),
            });
        }
    }
    Ok(())
}

/// `dir` and everything below it (to [`MAX_DEPTH`]), with whether each is a
/// directory. Symbolic links are listed but not followed.
fn walk(dir: &Path) -> Result<Vec<(PathBuf, bool)>, StoreError> {
    let mut found = vec![(dir.to_path_buf(), true)];
    let mut index = 0;
    while index < found.len() {
        let (path, is_dir) = found[index].clone();
        index += 1;
        let depth = path
            .strip_prefix(dir)
            .map_or(0, |rest| rest.components().count());
        if !is_dir || depth >= MAX_DEPTH {
            continue;
        }
        let entries = std::fs::read_dir(&path).map_err(|source| io_error(&path, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| io_error(&path, source))?;
            let kind = entry
                .file_type()
                .map_err(|source| io_error(&entry.path(), source))?;
            if kind.is_symlink() {
                continue;
            }
            found.push((entry.path(), kind.is_dir()));
        }
    }
    Ok(found)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), StoreError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| io_error(path, source))
}

fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_directory_is_private_and_a_loose_one_is_refused_with_the_fix() {
        let top = tempfile::tempdir().expect("a temp dir");
        let dir = top.path().join("node");
        create_private_dir(&dir).expect("created");
        assert_eq!(mode(&dir), 0o700);
        let key = dir.join("store").join("db");
        std::fs::create_dir_all(key.parent().expect("a parent")).expect("created");
        std::fs::write(&key, b"secret").expect("written");
        set_mode(&key, 0o644).expect("chmod");

        set_mode(&dir.join("store"), 0o755).expect("chmod");
        let refused = check_private(&dir).expect_err("a 0755 directory is refused");
        let message = refused.to_string();
        assert!(
            message.contains("store has mode 0755") && message.contains("chmod -R go-rwx"),
            "{message}"
        );
        set_mode(&dir.join("store"), 0o700).expect("chmod");
        let refused = check_private(&dir).expect_err("a 0644 file is refused");
        assert!(
            refused.to_string().contains("db has mode 0644"),
            "{refused}"
        );

        make_private(&dir).expect("tightened");
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&dir.join("store")), 0o700);
        check_private(&dir).expect("now private");

        set_mode(&dir, 0o755).expect("chmod");
        assert!(check_private(&dir).is_err(), "a 0755 directory is refused");
    }
}
