//! `testbed up`, `demo` and `chaos`: a local fleet of daemons, built first
//! unless told not to, run until stopped (or, for `chaos`, a fault run).

use std::path::PathBuf;
use std::time::Duration;

use relaymesh_testbed::cluster::SimulatorOptions;
use relaymesh_testbed::demo;
use relaymesh_testbed::up::{self, Fleet, UpOptions};

use crate::cli::{ChaosArgs, UpArgs};
use crate::support::{bin_dir, build_daemons, init_logging, write_report};

/// `up`, and for `demo` the rollout of `demo`'s manifests.
pub(crate) fn run_fleet(args: UpArgs, demo: Option<(PathBuf, Duration)>) -> anyhow::Result<()> {
    let bin_dir = bin_dir()?;
    if !args.no_build {
        build_daemons(&bin_dir)?;
    }
    up::prepare_dir(&args.dir)?;
    init_logging(&args.dir.join("logs").join("testbed.log"))?;
    let options = UpOptions {
        relays_per_level: args.relays_per_level,
        agents: args.hollow.unwrap_or(args.agents),
        hollow: args.hollow.is_some(),
        dir: args.dir,
        base_port: args.base_port,
        ready_file: args.ready_file,
        bin_dir,
        simulator: SimulatorOptions {
            delay: args.status_delay,
            failures: args.failures,
            ..SimulatorOptions::default()
        },
        proxied_uplinks: false,
        etcd_members: args.etcd_members,
        root_replicas: args.root_replicas,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut fleet = Fleet::start(&options).await?;
        let outcome = match &demo {
            Some((manifests, watch_for)) => {
                demo::run(&fleet, manifests, *watch_for).await.map(|_| ())
            }
            None => Ok(()),
        };
        if let Err(error) = outcome {
            eprintln!("demo: {error:#}");
        }
        fleet.print_next_steps();
        fleet.run_until_signal().await;
        fleet.shutdown().await;
        Ok(())
    })
}

/// `chaos`: the run, its summary, and a non-zero exit unless it converged.
pub(crate) fn run_chaos(args: ChaosArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.minutes.is_finite() && args.minutes >= 0.0,
        "--minutes must be a non-negative number"
    );
    let bin_dir = bin_dir()?;
    if !args.no_build {
        build_daemons(&bin_dir)?;
    }
    let options = relaymesh_testbed::chaos::ChaosOptions {
        duration: Duration::from_secs_f64(args.minutes * 60.0),
        agents: args.hollow,
        relays_per_level: args.relays_per_level,
        seed: args.seed,
        dir: args.dir.clone(),
        bin_dir,
        settle_timeout: args.settle_timeout,
        pause: (Duration::from_secs(1), Duration::from_secs(4)),
    };
    up::prepare_dir(&args.dir)?;
    init_logging(&args.dir.join("logs").join("testbed.log"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let summary = runtime.block_on(relaymesh_testbed::chaos::run(&options))?;
    print!("{}", summary.render());
    if let Some(path) = &args.summary {
        write_report(path, &summary)?;
        println!("summary: {}", path.display());
    }
    anyhow::ensure!(summary.converged, "the fleet did not converge");
    Ok(())
}
