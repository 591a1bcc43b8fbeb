//! `testbed`: relaymesh's local trees, simulations and benchmarks.
#![forbid(unsafe_code)]

mod benches;
mod cli;
mod fleet;
mod support;

use clap::{CommandFactory as _, Parser};

use cli::{Cli, Command};
use fleet::{run_chaos, run_fleet};

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Up(args) => run_fleet(args, None),
        Command::Chaos(args) => run_chaos(args),
        Command::Demo {
            up,
            manifests,
            watch_for,
        } => run_fleet(up, Some((manifests, watch_for))),
        Command::Bench(bench) => benches::run(bench),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "testbed",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}
