//! `testbed bench …`: runs the benchmark asked for and writes its report.

use std::path::Path;

use anyhow::Context;
use relaymesh_testbed::bench;

use crate::cli::Bench;
use crate::support::{bench_logging, bin_dir, write_report};

pub(crate) fn run(chosen: Bench) -> anyhow::Result<()> {
    match chosen {
        Bench::Store {
            writes,
            writers,
            etcd_members,
            dir,
            out_dir,
        } => {
            anyhow::ensure!(
                writers > 0 && writes > 0,
                "--writes and --writers must be more than 0"
            );
            let report = bench::store::run(&bench::store::StoreOptions {
                writes,
                writers,
                etcd_members,
                dir,
                bin_dir: bin_dir()?,
            })?;
            println!("report: {}", report.write(&out_dir)?.display());
            Ok(())
        }
        Bench::SledChurn {
            live,
            replacements,
            bundle_bytes,
            dir,
            out_dir,
        } => {
            let report = bench::sled_churn::run(&bench::sled_churn::ChurnOptions {
                live,
                replacements,
                bundle_bytes,
                dir,
            })?;
            println!("report: {}", report.write(&out_dir)?.display());
            Ok(())
        }
        Bench::Peers {
            clusters,
            relays_per_level,
            kubectl,
            timeout,
            dir,
            out_dir,
        } => {
            let options = bench::peers::PeersOptions {
                clusters,
                relays_per_level,
                dir,
                bin_dir: bin_dir()?,
                kubectl,
                timeout,
            };
            fleet_bench(
                &options.dir,
                &out_dir,
                bench::peers::run_fleet(&options),
                |run| bench::peers::report(&options, run),
            )
        }
        Bench::Nats {
            subscribers,
            relays_per_level,
            payload_bytes,
            timeout,
            dir,
            out_dir,
        } => {
            let options = bench::nats::NatsOptions {
                subscribers,
                relays_per_level,
                payload_bytes,
                dir,
                bin_dir: bin_dir()?,
                timeout,
            };
            bench_logging(&options.dir)?;
            let runtime = tokio::runtime::Runtime::new()?;
            let runs = runtime.block_on(bench::nats::run(&options))?;
            let report = bench::nats::report(&options, &runs);
            println!("report: {}", report.write(&out_dir)?.display());
            Ok(())
        }
        Bench::Decode {
            depths,
            runs,
            clients,
            duration,
            dir,
            out,
        } => {
            let options = bench::decode::DecodeOptions {
                depths,
                runs,
                clients,
                duration,
                dir,
                bin_dir: bin_dir()?,
            };
            bench_logging(&options.dir)?;
            let report = bench::decode::run(&options)?;
            write_report(&out, &report)?;
            println!("report: {}", out.display());
            let unmet = bench::decode::unmet_goals(&report);
            anyhow::ensure!(unmet.is_empty(), "goals not met: {}", unmet.join("; "));
            Ok(())
        }
        Bench::Docs {
            reports,
            page,
            plots,
            note,
        } => {
            let used = bench::docs::write(&reports, &page, &plots, note.as_deref())?;
            println!("{} from {used} reports", page.display());
            Ok(())
        }
        Bench::Fanout {
            agents,
            relays_per_level,
            star,
            payload_bytes,
            timeout,
            runs,
            dir,
            out_dir,
            run_json,
        } => {
            let options = bench::fanout::FanoutOptions {
                agents,
                relays_per_level: if star { Vec::new() } else { relays_per_level },
                payload_bytes,
                dir,
                bin_dir: bin_dir()?,
                timeout,
                name: if star { "fanout-star" } else { "fanout" }.to_string(),
                runs: usize::from(runs),
            };
            bench_logging(&options.dir)?;
            if let Some(path) = run_json {
                // One size, for the parent below: its runs, no reports.
                let runtime = tokio::runtime::Runtime::new()?;
                let runs = runtime.block_on(bench::fanout::run_fleets(&options))?;
                std::fs::write(&path, serde_json::to_vec(&runs)?)
                    .with_context(|| format!("writing {}", path.display()))?;
                return Ok(());
            }
            let runs = bench::fanout::median_runs(fanout_sizes_apart(&options)?);
            let (fanout, egress, memory) = bench::fanout::reports(&options, &runs);
            for report in [fanout, egress, memory] {
                println!("report: {}", report.write(&out_dir)?.display());
            }
            Ok(())
        }
        Bench::Failover {
            kills,
            agents,
            relays_per_level,
            timeout,
            dir,
            out_dir,
        } => {
            anyhow::ensure!(kills > 0, "--kills must be more than 0");
            let options = bench::failover::FailoverOptions {
                kills,
                agents,
                relays_per_level,
                dir,
                bin_dir: bin_dir()?,
                timeout,
            };
            fleet_bench(
                &options.dir,
                &out_dir,
                bench::failover::run_fleet(&options),
                |run| bench::failover::report(&options, run),
            )
        }
        Bench::Latency {
            agents,
            relays_per_level,
            changes,
            timeout,
            dir,
            out_dir,
        } => {
            let options = bench::latency::LatencyOptions {
                agents,
                relays_per_level,
                changes,
                dir,
                bin_dir: bin_dir()?,
                timeout,
            };
            fleet_bench(
                &options.dir,
                &out_dir,
                bench::latency::run_fleet(&options),
                |run| bench::latency::report(&options, run),
            )
        }
        Bench::Fanin {
            agents,
            relays_per_level,
            timeout,
            dir,
            out_dir,
        } => {
            let options = bench::fanin::FaninOptions {
                agents,
                relays_per_level,
                dir,
                bin_dir: bin_dir()?,
                timeout,
            };
            fleet_bench(
                &options.dir,
                &out_dir,
                bench::fanin::run_fleet(&options),
                |run| bench::fanin::report(&options, run),
            )
        }
        Bench::Storm {
            agents_per_relay,
            payload_bytes,
            timeout,
            dir,
            out_dir,
        } => {
            let options = bench::storm::StormOptions {
                agents_per_relay,
                payload_bytes,
                dir,
                bin_dir: bin_dir()?,
                timeout,
            };
            fleet_bench(
                &options.dir,
                &out_dir,
                bench::storm::run_fleet(&options),
                |run| bench::storm::report(&options, run),
            )
        }
        Bench::Placement {
            clusters,
            placements,
            fanout,
            out,
        } => {
            let config = bench::placement::Config {
                clusters,
                placements,
                fanout,
            };
            let report = bench::placement::run(&config)?;
            write_report(&out, &report.to_report()?)?;
            println!("report: {}", out.display());
            Ok(())
        }
        Bench::Simulation {
            destinations,
            levels,
            keep_state,
            out,
        } => {
            let config = bench::simulation::Config {
                destinations,
                levels,
                keep_state,
            };
            let report = bench::simulation::run(&config)?;
            let common = report.to_report()?;
            write_report(&out, &common)?;
            println!("report: {}", out.display());
            Ok(())
        }
    }
}

/// Runs each fleet size of the fanout in a process of its own (this binary
/// again, with `--run-json`), one after the other, `options.runs` times
/// each: ten thousand hollow agents need most of this machine's memory,
/// and what an earlier run's agents leave behind in a process must not
/// count against the next.
pub(crate) fn fanout_sizes_apart(
    options: &bench::fanout::FanoutOptions,
) -> anyhow::Result<Vec<bench::fanout::FanoutRun>> {
    let exe = std::env::current_exe().context("cannot find the testbed binary")?;
    let mut runs = Vec::new();
    let repeated = options
        .agents
        .iter()
        .flat_map(|agents| std::iter::repeat_n(agents, options.runs.max(1)));
    for agents in repeated {
        let json = options.dir.join(format!("{}-{agents}.json", options.name));
        let mut command = std::process::Command::new(&exe);
        command
            .args(["bench", "fanout", "--agents", &agents.to_string()])
            .arg("--payload-bytes")
            .arg(options.payload_bytes.to_string())
            .arg("--timeout")
            .arg(humantime::format_duration(options.timeout).to_string())
            .arg("--dir")
            .arg(&options.dir)
            .arg("--run-json")
            .arg(&json);
        if options.relays_per_level.is_empty() {
            command.arg("--star");
        } else {
            let levels: Vec<String> = options
                .relays_per_level
                .iter()
                .map(usize::to_string)
                .collect();
            command.arg("--relays-per-level").arg(levels.join(","));
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {}", exe.display()))?;
        if !status.success() {
            anyhow::bail!("the fanout to {agents} hollow agents failed ({status})");
        }
        let text =
            std::fs::read(&json).with_context(|| format!("cannot read {}", json.display()))?;
        let mut these: Vec<bench::fanout::FanoutRun> = serde_json::from_slice(&text)?;
        runs.append(&mut these);
    }
    Ok(runs)
}

/// Runs a benchmark that brings up a fleet in `dir` (its log there too) and
/// writes the one report it makes to `out_dir`.
pub(crate) fn fleet_bench<R>(
    dir: &Path,
    out_dir: &Path,
    run: impl std::future::Future<Output = anyhow::Result<R>>,
    report: impl FnOnce(&R) -> bench::report::Report,
) -> anyhow::Result<()> {
    bench_logging(dir)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let run = runtime.block_on(run)?;
    println!("report: {}", report(&run).write(out_dir)?.display());
    Ok(())
}
