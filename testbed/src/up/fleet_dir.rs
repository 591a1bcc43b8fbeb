//! The fleet's directory: made fresh, and marked so that the next `up`
//! may clear it (and no other directory).

use std::path::Path;

use anyhow::{bail, Context as _};

/// The file that marks a directory as a testbed's, so `up` may clear it.
const MARKER: &str = ".testbed";

/// Makes `dir` a fresh fleet directory: creates it, or clears it if a
/// testbed made it; refuses any other non-empty directory. Creates its
/// `logs`, `clusters` and `nodes` subdirectories.
pub fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_none();
        if !empty {
            if !dir.join(MARKER).exists() {
                bail!(
                    "{} is not empty and was not made by the testbed; choose another --dir",
                    dir.display()
                );
            }
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot clear {}", dir.display()))?;
        }
    }
    for sub in ["logs", "clusters", "nodes"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    std::fs::write(
        dir.join(MARKER),
        "made by `testbed up`; it clears this directory when it starts\n",
    )?;
    Ok(())
}
