//! `testbed bench sled-churn`: what a relay's store costs on disk after
//! its bundles were replaced many times, against the data still live.
//!
//! It opens a relay's own [`Store`] (the same sled configuration `relay run`
//! uses) in a fresh directory, keeps a working set of bundles, and replaces
//! the oldest one a thousand times, flushing after each replacement as the
//! daemon does before it acknowledges. Then it measures the directory
//! (apparent file sizes) against the bytes of the bundles still held, once
//! with the store open and once after a reopen (sled may reclaim segments
//! at start-up).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use relaymesh_node::store::Store;
use relaymesh_protocol::BundleId;
use serde_json::json;

use super::report::{Figure, Line, Report, Series};

/// What to run.
#[derive(Debug, Clone)]
pub struct ChurnOptions {
    /// Bundles held at any time.
    pub live: usize,
    /// Replacements.
    pub replacements: usize,
    /// Bytes per bundle.
    pub bundle_bytes: usize,
    /// A directory to make the store in (emptied first).
    pub dir: PathBuf,
}

/// Runs the churn and returns the report.
pub fn run(options: &ChurnOptions) -> anyhow::Result<Report> {
    let dir = options.dir.join("sled-churn");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    let store = Store::create(&dir)?;
    let mut held = VecDeque::new();
    let mut sizes = Vec::new();
    let checkpoints = (options.replacements / 10).max(1);
    for index in 0..options.live + options.replacements {
        let bytes = super::root::filler(index as u64, options.bundle_bytes).into_bytes();
        let id = BundleId::of(&bytes);
        store.put_bundle(&id, &bytes)?;
        held.push_back(id);
        if held.len() > options.live {
            if let Some(oldest) = held.pop_front() {
                store.remove_bundle(&oldest)?;
            }
        }
        store.flush()?;
        if index >= options.live && (index - options.live).is_multiple_of(checkpoints) {
            sizes.push(((index - options.live) as f64, directory_bytes(&dir)? as f64));
        }
    }
    let live_bytes = (options.live * options.bundle_bytes) as f64;
    let open_bytes = directory_bytes(&dir)? as f64;
    drop(store);
    let reopened = Store::open(&dir)?;
    reopened.flush()?;
    let held_after = reopened.bundle_ids()?.len();
    anyhow::ensure!(
        held_after == options.live,
        "the store holds {held_after} bundles after the churn, not {}",
        options.live
    );
    drop(reopened);
    let reopened_bytes = directory_bytes(&dir)? as f64;

    let mut report = Report::new(
        "sled-churn",
        json!({
            "live": options.live,
            "replacements": options.replacements,
            "bundleBytes": options.bundle_bytes,
        }),
    );
    report.description = format!(
        "A relay's sled store (the configuration `relay run` uses) holding {} bundles of {} \
         bytes, the oldest replaced {} times with a flush after each: the directory's size \
         against the bundle bytes still live.",
        options.live, options.bundle_bytes, options.replacements
    );
    report.figure(Figure::new("live bundle bytes", live_bytes / 1024.0, "KiB"));
    report.figure(Figure::new(
        "on disk, store open",
        open_bytes / 1024.0,
        "KiB",
    ));
    report.figure(
        Figure::new(
            "on disk / live, store open",
            open_bytes / live_bytes,
            "ratio",
        )
        .with_goal("under 1.5×", |v| v < 1.5),
    );
    report.figure(
        Figure::new(
            "on disk / live, after a reopen",
            reopened_bytes / live_bytes,
            "ratio",
        )
        .with_goal("under 1.5×", |v| v < 1.5),
    );
    report.series.push(Series {
        title: "A relay's store on disk while bundles are replaced".into(),
        x_label: "replacements".into(),
        y_label: "bytes on disk".into(),
        lines: vec![
            Line {
                label: "directory".into(),
                points: sizes,
            },
            Line {
                label: "live bundles".into(),
                points: vec![(0.0, live_bytes), (options.replacements as f64, live_bytes)],
            },
        ],
    });
    Ok(report)
}

/// The apparent size of every file under `dir`.
fn directory_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() {
            directory_bytes(&entry.path())?
        } else {
            metadata.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_churn_keeps_exactly_the_live_bundles() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let report = run(&ChurnOptions {
            live: 4,
            replacements: 20,
            bundle_bytes: 10_000,
            dir: dir.path().to_path_buf(),
        })?;
        let live = &report.figures[0];
        assert_eq!(live.value, 40_000.0 / 1024.0);
        assert!(report.figures[1].value > 0.0, "the store has a size");
        assert_eq!(report.series[0].lines[0].points.len(), 10);
        Ok(())
    }
}
