//! What `testbed`'s commands share: where the daemons are (and building
//! them), logging to a file, and writing a report.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Writes a benchmark's JSON report, making its directory.
pub(crate) fn write_report(out: &Path, report: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(dir) = out.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(out, json + "\n").with_context(|| format!("writing {}", out.display()))
}

/// Under `cargo run` (which sets `CARGO`), builds the workspace's binaries,
/// so the daemons are never stale. Not under `scripts/test`, which built
/// them already and says so with `RELAYMESH_BINARIES_BUILT` (a `cargo
/// build` there would undo the test build's units of some dependencies).
pub(crate) fn build_daemons(bin_dir: &Path) -> anyhow::Result<()> {
    if std::env::var_os("RELAYMESH_BINARIES_BUILT").is_some() {
        return Ok(());
    }
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut command = std::process::Command::new(cargo);
    command
        .args([
            "build",
            "--quiet",
            "--workspace",
            "--bins",
            "--manifest-path",
        ])
        .arg(manifest);
    if bin_dir.file_name().is_some_and(|name| name == "release") {
        command.arg("--release");
    }
    let status = command.status().context("cannot run cargo build")?;
    anyhow::ensure!(status.success(), "building the daemons failed");
    Ok(())
}

/// A benchmark's fleets log to `dir/testbed.log`, so stdout keeps one line
/// per figure.
pub(crate) fn bench_logging(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    init_logging(&dir.join("testbed.log"))
}

/// The directory of the testbed binary, where the daemons are too.
pub(crate) fn bin_dir() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_exe()?
        .parent()
        .context("the testbed binary has no directory")?
        .to_path_buf())
}

/// The testbed's own logs (and its simulated clusters') go to `path`;
/// the terminal gets only what the user should read.
pub(crate) fn init_logging(path: &Path) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .init();
    Ok(())
}
