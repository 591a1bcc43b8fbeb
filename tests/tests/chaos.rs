//! A short `testbed chaos` run (what CI runs of it): 24 hollow agents below
//! a root and three relay processes, with a minute of relays killed and
//! restarted, relays' uplinks partitioned and healed, hollow agents
//! stopped and restarted, and placements and workloads changing at the
//! root; then everything healed.
//!
//! What is asserted is the application's end state: every cluster holds
//! exactly the workloads its placements select, with their latest content,
//! and nothing that was deleted or unplaced; no daemon or agent stopped on
//! its own; and the run did do each kind of fault. The timings are
//! reported, never asserted. docs/reliability.md has the long run.

use std::time::Duration;

use relaymesh_testbed::chaos::{self, ChaosOptions};
use relaymesh_tests::bin_dir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cluster_converges_to_exactly_its_desired_state_after_chaos() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = ChaosOptions {
        duration: Duration::from_secs(50),
        agents: 24,
        relays_per_level: vec![1, 2],
        // Fixed, so every CI run makes the same choices; the fleet's timing
        // still differs from run to run.
        seed: 7,
        dir: dir.path().join("fleet"),
        bin_dir: bin_dir()?,
        settle_timeout: Duration::from_secs(240),
        pause: (Duration::from_millis(500), Duration::from_millis(2000)),
    };
    relaymesh_testbed::up::prepare_dir(&options.dir)?;
    let summary = chaos::run(&options).await?;
    println!("{}", summary.render());
    for kind in [
        "kill-relay",
        "restart-relay",
        "partition",
        "heal",
        "stop-agents",
        "restart-agents",
        "apply-workload",
        "apply-placement",
    ] {
        assert!(
            summary.actions_by_kind.get(kind).copied().unwrap_or(0) > 0,
            "the run did no {kind}: {:?}",
            summary.actions_by_kind
        );
    }
    assert_eq!(summary.clusters_checked, 24);
    assert!(
        summary.converged,
        "not every cluster converged:\n{}",
        summary.render()
    );
    assert!(summary.differences.is_empty());
    assert!(
        summary.unexpected_exits.is_empty(),
        "{:?}",
        summary.unexpected_exits
    );
    Ok(())
}
