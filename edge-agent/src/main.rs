//! `edge-agent`: the leaf of a relaymesh tree, in front of one cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use relaymesh_protocol::Role;
use relaymesh_relay::config::NodeConfig;
use relaymesh_relay::logging::{self, LogFormat};
use relaymesh_relay::store::Store;
use relaymesh_relay::{daemon, transport};

const LONG_ABOUT: &str = "\
The relaymesh edge agent.

An agent stands in front of one Kubernetes cluster. It joins the tree below a relay \
with a token, registers its cluster with its labels, and keeps the desired state its \
relay assigns it in a local sled store, so it keeps working when its uplink is down.";

const EXAMPLES: &str = "\
Examples:
  TOKEN=$(relayctl token create --role agent --name edge-1 --parent eu-west)
  edge-agent join --data-dir ./edge-1 --name edge-1 --token \"$TOKEN\" --labels region=eu,zone=eu-west-1a,tier=edge
  edge-agent run --data-dir ./edge-1";

/// The relaymesh edge agent.
#[derive(Debug, Parser)]
#[command(name = "edge-agent", version, long_about = LONG_ABOUT, after_help = EXAMPLES)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Join the tree below the relay the token names, as cluster NAME.
    Join {
        /// Where the agent keeps its store.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// The cluster's name; it must be the one the token was issued for.
        #[arg(long)]
        name: String,
        /// The join token from `relayctl token create --role agent`.
        #[arg(long, env = "RELAYMESH_TOKEN", hide_env_values = true)]
        token: String,
        /// The cluster's labels, `key=value,…` (placements select on them).
        #[arg(long, default_value = "")]
        labels: String,
    },
    /// Run a joined agent until SIGTERM or Ctrl-C.
    Run {
        /// The agent's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Print what a stopped agent's store holds, as JSON.
    Inspect {
        /// The agent's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, "info");
    relaymesh_relay::process::block_on_main(execute(cli.command))
}

async fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Join {
            data_dir,
            name,
            token,
            labels,
        } => join(&data_dir, &name, &token, &labels).await,
        Command::Run { data_dir } => {
            daemon::run(&data_dir, daemon::cancel_on_signals()).await?;
            Ok(())
        }
        Command::Inspect { data_dir } => {
            let store = open_store(&data_dir)?;
            let summary = relaymesh_relay::inspect::summary(&store)?
                .with_context(|| format!("{} is not initialized", data_dir.display()))?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(())
        }
    }
}

async fn join(data_dir: &Path, name: &str, token: &str, labels: &str) -> anyhow::Result<()> {
    relaymesh_protocol::name::validate(name).context("--name")?;
    let labels = relaymesh_edge_agent::labels::parse(labels).context("--labels")?;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let store = Store::open(data_dir).with_context(|| {
        format!(
            "cannot open the store in {} (is a node running on it?)",
            data_dir.display()
        )
    })?;
    if store.identity()?.is_some() {
        bail!(
            "{} already holds an agent; run it with `edge-agent run --data-dir {}`",
            data_dir.display(),
            data_dir.display()
        );
    }
    let joined = transport::join::join(token.trim(), name, Role::Agent).await?;
    let config = NodeConfig {
        listen: None,
        advertise: Vec::new(),
        api_listen: None,
        parent: Some(joined.parent.clone()),
        labels,
        capacity: Default::default(),
    };
    store.initialize(&joined.identity, &config, rand::random())?;
    println!(
        "joined as cluster {name:?} under {:?}; next: edge-agent run --data-dir {}",
        joined.parent.name,
        data_dir.display()
    );
    Ok(())
}

fn open_store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open_existing(data_dir)?)
}
