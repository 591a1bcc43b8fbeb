//! `testbed`: relaymesh's local trees, simulations and benchmarks.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use relaymesh_testbed::bench;

/// relaymesh's testbed.
#[derive(Debug, Parser)]
#[command(name = "testbed", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks of the tree logic, in memory.
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Hierarchical placement resolution over a simulated fleet.
    Placement {
        /// Clusters in the fleet.
        #[arg(long, default_value_t = 1_000_000)]
        clusters: u64,
        /// Placements to resolve.
        #[arg(long, default_value_t = 1000)]
        placements: usize,
        /// Relays per level below the root, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "100,100")]
        fanout: Vec<usize>,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/bench/placement.json")]
        out: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(Bench::Placement {
            clusters,
            placements,
            fanout,
            out,
        }) => {
            let config = bench::placement::Config {
                clusters,
                placements,
                fanout,
            };
            let report = bench::placement::run(&config);
            if let Some(dir) = out.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let json = serde_json::to_string_pretty(&report)?;
            std::fs::write(&out, json + "\n")
                .with_context(|| format!("writing {}", out.display()))?;
            print_summary(&report);
            println!("report: {}", out.display());
        }
    }
    Ok(())
}

fn print_summary(report: &bench::placement::Report) {
    println!(
        "fleet: {} clusters, {} relays (fanout {:?}), {} distinct label sets",
        report.clusters, report.relays, report.fanout, report.distinct_label_sets
    );
    println!(
        "build: tree {:.0} ms, aggregates {:.0} ms",
        report.build_tree_ms, report.build_aggregates_ms
    );
    for (what, timing) in [("root alone", &report.root), ("whole tree", &report.tree)] {
        println!(
            "{what}: {} placements in {:.1} ms; per placement mean {:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            timing.placements, timing.total_ms, timing.mean_us, timing.p50_us, timing.p99_us, timing.max_us
        );
    }
    println!(
        "work: root examines {} label sets over {} children per placement; whole tree: {:.0} relays, {:.0} label sets per placement",
        report.root_label_sets_per_placement,
        report.root_children,
        report.mean_relays_visited,
        report.mean_label_sets_per_placement
    );
    println!("selected: {} clusters in all", report.selected_clusters);
    if let Some(rss) = report.peak_rss_mib {
        println!("peak RSS: {rss:.0} MiB");
    }
}
