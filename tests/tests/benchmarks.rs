//! Short versions of the benchmarks that use real connections (what CI runs
//! of `scripts/bench`): a few dozen hollow agents below relay processes, for
//! the fanout (tree and star), status fan-in, the reconnect storm and the
//! kubectl-loop peer.
//!
//! What is asserted are facts of the application: every hollow cluster
//! recorded the bundle's object (a run fails otherwise), the root's
//! Placement status counted every cluster, the bundle crossed each of the
//! root's links exactly once (the root's own transfer counters), and the
//! reports hold a figure for every size. The times are reported, never
//! asserted.

use std::time::Duration;

use relaymesh_testbed::bench::fanout::{self, FanoutOptions};
use relaymesh_testbed::bench::nats::{self, NatsOptions};
use relaymesh_tests::bin_dir;

fn options(
    name: &str,
    relays_per_level: Vec<usize>,
    agents: Vec<usize>,
) -> anyhow::Result<FanoutOptions> {
    Ok(FanoutOptions {
        agents,
        relays_per_level,
        payload_bytes: 20_000,
        dir: tempfile::tempdir()?.keep(),
        bin_dir: bin_dir()?,
        timeout: Duration::from_secs(180),
        name: name.to_string(),
        runs: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_reaches_every_hollow_agent_through_a_tree_once_per_link() -> anyhow::Result<()> {
    let options = options("fanout", vec![1, 2], vec![24])?;
    let runs = fanout::run_fleets(&options).await?;
    for run in &runs {
        assert_eq!(run.root_children, 1, "the root has one relay below it");
        assert_eq!(
            run.root_bundles_served, 1,
            "N = {}: the bundle crossed the root's one link once",
            run.agents
        );
        // The fleet's root compresses bundles; 20,000 random lowercase
        // letters hold at least log2(26) bits each, 59 % of their bytes.
        assert!(
            run.bundle_bytes >= 20_000 * 59 / 100,
            "the bundle carries the payload: {} bytes",
            run.bundle_bytes
        );
        assert!(run.p50 <= run.p99 && run.p99 <= run.all_applied);
        // Fails unless every agent's store was seen to hold the bundle.
        assert!(run.stored_p50 <= run.stored_p99 && run.stored_p99 <= run.all_stored);
        assert!(
            run.all_stored > 0.0,
            "the stores were watched from the Placement on"
        );
        assert!(run.relays == 4, "root, eu and two relays below it");
        assert!(run.udp_receive_drops.is_some(), "Linux counts UDP drops");
    }
    let (fanout, egress, memory) = fanout::reports(&options, &runs);
    assert_eq!(fanout.figures.len(), 10 * runs.len());
    assert_eq!(egress.figures.len(), 3 * runs.len());
    assert_eq!(memory.figures.len(), runs.len());
    std::fs::remove_dir_all(&options.dir)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flat_star_serves_the_bundle_once_to_every_agent() -> anyhow::Result<()> {
    let options = options("fanout-star", Vec::new(), vec![16])?;
    let runs = fanout::run_fleets(&options).await?;
    let run = &runs[0];
    assert_eq!(run.root_children, 16, "every agent is the root's child");
    assert_eq!(run.root_bundles_served, 16, "one transfer per agent");
    assert_eq!(run.root_bundle_bytes, 16 * run.bundle_bytes);
    std::fs::remove_dir_all(&options.dir)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaymesh_and_the_kubectl_loop_deliver_to_every_cluster() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = relaymesh_testbed::bench::peers::PeersOptions {
        clusters: 4,
        relays_per_level: vec![1],
        dir: dir.path().to_path_buf(),
        bin_dir: bin_dir()?,
        kubectl: "/usr/bin/kubectl".into(),
        timeout: Duration::from_secs(120),
    };
    // Fails unless every kubectl apply succeeded and every cluster's store
    // came to hold the namespace's ConfigMap, Deployment and Service.
    let run = relaymesh_testbed::bench::peers::run_fleet(&options).await?;
    assert_eq!(run.clusters, 4);
    let report = relaymesh_testbed::bench::peers::report(&options, &run);
    assert_eq!(report.figures.len(), 4);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_change_on_every_agent_reaches_the_root_summarized() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = relaymesh_testbed::bench::fanin::FaninOptions {
        agents: 24,
        relays_per_level: vec![1, 2],
        dir: dir.path().to_path_buf(),
        bin_dir: bin_dir()?,
        timeout: Duration::from_secs(120),
    };
    // Fails unless the root first counted all 24 ready, then none ready and
    // all 24 applied after every hollow cluster marked the Deployment
    // unavailable.
    let run = relaymesh_testbed::bench::fanin::run_fleet(&options).await?;
    assert_eq!(run.counts.applied, 24);
    assert_eq!(run.counts.ready, 0);
    assert!(
        run.agents_bytes > 0,
        "the agents' sockets counted their reports"
    );
    let report = relaymesh_testbed::bench::fanin::report(&options, &run);
    assert_eq!(report.figures.len(), 4);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_at_one_leaf_reaches_the_root_and_is_timed() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = relaymesh_testbed::bench::latency::LatencyOptions {
        agents: 12,
        relays_per_level: vec![1, 2],
        changes: 3,
        dir: dir.path().to_path_buf(),
        bin_dir: bin_dir()?,
        timeout: Duration::from_secs(120),
    };
    // Fails unless the root saw each of the 3 clusters go unavailable
    // (11 of 12 ready) and ready again (12 of 12).
    let run = relaymesh_testbed::bench::latency::run_fleet(&options).await?;
    assert_eq!(run.latencies.len(), 6);
    let report = relaymesh_testbed::bench::latency::report(&options, &run);
    assert_eq!(report.figures.len(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_of_a_killed_and_restarted_relay_reconnect_and_converge() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = relaymesh_testbed::bench::storm::StormOptions {
        agents_per_relay: 12,
        payload_bytes: 20_000,
        dir: dir.path().to_path_buf(),
        bin_dir: bin_dir()?,
        timeout: Duration::from_secs(120),
    };
    // Fails unless every agent below the killed relay applied the object
    // the Placement moved to while it was down, and the busy link completed
    // its baseline revisions.
    let run = relaymesh_testbed::bench::storm::run_fleet(&options).await?;
    assert_eq!(run.agents, 12);
    assert!(run.busy_before > 0.0);
    assert!(run.udp_receive_drops.is_some(), "Linux counts UDP drops");
    let report = relaymesh_testbed::bench::storm::report(&options, &run);
    assert_eq!(
        report.figures.len(),
        9,
        "with the CPU the relay and the agents used, and the datagrams dropped"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_and_relaymesh_deliver_the_same_payload_to_every_receiver() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let options = NatsOptions {
        subscribers: vec![16],
        relays_per_level: vec![1, 2],
        payload_bytes: 20_000,
        dir: dir.path().to_path_buf(),
        bin_dir: bin_dir()?,
        timeout: Duration::from_secs(120),
    };
    // Fails unless every subscriber received the payload byte for byte and
    // every hollow cluster recorded the bundle's object.
    let runs = nats::run(&options).await?;
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.nats.subscribers, 16);
    assert_eq!(
        run.nats.received, 16,
        "every subscriber got the exact payload"
    );
    assert_eq!(run.nats.servers, 1 + 1 + 2, "a hub, one leaf, two below it");
    assert!(run.nats.p50 <= run.nats.p99 && run.nats.p99 <= run.nats.all_received);
    assert_eq!(run.relaymesh.agents, 16);
    assert_eq!(
        run.relaymesh.relays, 4,
        "the same shape: root, eu and two below"
    );
    // Compressed at the root, at least 59 % of random letters (above).
    assert!(
        run.relaymesh.bundle_bytes >= 20_000 * 59 / 100,
        "the bundle carries the payload: {} bytes",
        run.relaymesh.bundle_bytes
    );
    let report = nats::report(&options, &runs);
    assert_eq!(report.benchmark, "peers-nats");
    assert_eq!(report.figures.len(), 10);
    let goals: Vec<&str> = report
        .figures
        .iter()
        .filter(|figure| figure.goal.is_some())
        .map(|figure| figure.name.as_str())
        .collect();
    assert_eq!(
        goals,
        ["relaymesh stored / NATS received, N = 16"],
        "the stores' time is held against NATS's"
    );
    Ok(())
}
