//! `relayctl`: the operator's command line for a relaymesh root.
//!
//! Reads the admin kubeconfig `relay init` wrote (found as kubectl finds
//! one), then calls the root's HTTPS API through `relaymesh_root::client`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand, ValueEnum};
use relaymesh_root::client::{Client, ClientError};
use relaymesh_root::kubeconfig;
use tracing_subscriber::EnvFilter;

mod clusters;
mod inspect;
mod nodes;
mod objects;
mod rollout;
mod rotate;
mod tokens;
mod users;
mod waits;

const LONG_ABOUT: &str = "\
The operator's command line for a relaymesh root.

relayctl talks to the root relay of a relaymesh tree over its Kubernetes-compatible \
HTTPS API. It authenticates with the client certificate of a kubeconfig (the one \
`relay init` wrote, or one from `relayctl user create`), found as kubectl finds it: --kubeconfig, else the first existing file in KUBECONFIG, else \
~/.kube/config.";

// Every line shorter than 80 columns, so that none wraps and breaks when
// pasted (`tests/tests/kubectl_plugin.rs`).
const EXAMPLES: &str = "\
Examples:
  # A token for a relay named eu-west under \"eu\", valid 30 minutes
  TOKEN=$(relayctl token create --role relay --name eu-west \\
      --parent eu --ttl 30m)

  # A kubeconfig for alice, who may read but not change anything
  relayctl user create alice --group viewers -o alice.kubeconfig
  kubectl --kubeconfig alice.kubeconfig auth can-i create deployments   # no

  # The tree, with link health
  relayctl tree
  relayctl tree -o json | jq '.children[].name'
  relayctl link edge-7     # measured by edge-7's parent, through the tree

  # Submit workloads and a placement, then see where it went
  relayctl apply -f examples/storefront/
  relayctl get placements -n shop
  relayctl explain storefront -n shop
  relayctl status storefront -n shop   # ready/selected, failures and why
  relayctl watch storefront -n shop --timeout 2m && echo rolled out
  relayctl get clusters

  # One cluster's live copy, asked of its agent through the tree
  relayctl get deploy/storefront -n shop --cluster edge-7 -o yaml
  relayctl events --cluster edge-7 -n shop

  # Send a file to every node (a smoke test of bundle distribution)
  relayctl bundle push ./demo.bin --name demo

  # Use the kubeconfig `relay init` wrote
  relayctl --kubeconfig ./root.kubeconfig tree";

/// The operator's command line for a relaymesh root.
#[derive(Debug, Parser)]
#[command(name = "relayctl", version, long_about = LONG_ABOUT, after_help = EXAMPLES)]
struct Cli {
    /// The kubeconfig to use (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true, value_name = "NAME")]
    context: Option<String>,

    /// Log more to stderr: -v info, -vv debug, -vvv trace (default: RUST_LOG, else warn).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Join tokens, with which new relays and agents join the tree.
    Token {
        #[command(subcommand)]
        command: tokens::TokenCommand,
    },
    /// Users of the API: client certificates for viewers, operators and admins.
    User {
        #[command(subcommand)]
        command: users::UserCommand,
    },
    /// Rotate what trust rests on, with every link up: the mesh CA, the
    /// token-signing key, the API CA, the API's serving certificate.
    ///
    /// Each is rotated in steps that keep everything working in between
    /// (docs/security.md, "Rotation"). Only admins may (verb `rotate`).
    Rotate {
        #[command(subcommand)]
        what: rotate::RotateCommand,
    },
    /// Revoke a node: every relay drops its link and refuses its certificates.
    ///
    /// The node's TLS certificate and, for a relay, its issuer are void from
    /// now on, so its children cannot use theirs either; they come back only
    /// with new join tokens, under another parent. The node and its subtree
    /// leave the inventory, and the node's outstanding join tokens are
    /// revoked with it. A node joined later under the same name, with a new
    /// token, is not affected. With --list, print what the root revoked.
    Revoke {
        /// The node to revoke.
        #[arg(required_unless_present = "list", conflicts_with = "list")]
        node: Option<String>,
        /// List the revoked nodes and tokens instead.
        #[arg(long)]
        list: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Move an agent, or a relay with its subtree, to another parent relay,
    /// keeping what its clusters run.
    ///
    /// The root issues the node a join token under RELAY and sends it the
    /// move down the tree. The node joins RELAY (certificates from RELAY;
    /// an agent makes new keys, a relay keeps its own, so nothing below it
    /// joins again), tells its parent it leaves and dials RELAY, keeping its
    /// store: nothing is removed from or applied again to any cluster. Its
    /// status counts under the old parent until it leaves and under RELAY
    /// once the root has seen it there (the move is then Settled), never
    /// under both. The node's current parent must be reachable; RELAY must
    /// not be above it on its own branch nor, for a relay, in its own
    /// subtree. With --list, print the moves the root holds.
    Move {
        /// The agent or relay to move.
        #[arg(required_unless_present = "list", conflicts_with = "list")]
        node: Option<String>,
        /// The relay to move it under.
        #[arg(long, value_name = "RELAY", required_unless_present = "list")]
        to: Option<String>,
        /// How long the node's join token stays valid: a node offline
        /// longer needs the move ordered again.
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        ttl: Duration,
        /// Wait until the move is settled and every placement's status
        /// shows it (the node counted once, under its new parent); exit
        /// non-zero after --timeout.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// List the moves the root holds instead.
        #[arg(long)]
        list: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Set or remove a cluster's labels at the root, without joining it again.
    ///
    /// Each change is KEY=VALUE (set) or KEY- (remove), as with kubectl
    /// label. The root adds them to what it changed on the cluster before
    /// and sends the result down to it; its agent reports its new labels
    /// up, placements that select by label follow, and its templates and
    /// status rules read them. Labels under relaymesh.dev/ are the agent's
    /// own and cannot be changed.
    Label(clusters::ClusterChange),
    /// Set or remove a cluster's annotations at the root.
    ///
    /// Each change is KEY=VALUE (set) or KEY- (remove), as with kubectl
    /// annotate. The root keeps them with the labels it changed on the
    /// cluster and sends them down to it; its templates read them as
    /// {{ cluster.annotations.KEY }}. They are not reported up and select
    /// nothing. A cluster's annotations take at most 64 KiB.
    Annotate(clusters::ClusterChange),
    /// Cordon a cluster: count-bounded placements (maxClusters) keep what
    /// they have there but add nothing new. Placements to every matching
    /// cluster are not affected (like DaemonSets in `kubectl drain`).
    Cordon {
        /// The cluster.
        cluster: String,
    },
    /// Make a cordoned or drained cluster schedulable again.
    Uncordon {
        /// The cluster.
        cluster: String,
    },
    /// Drain a cluster: place its count-bounded placements on other
    /// clusters; it keeps its copies until those are ready (at most 5
    /// minutes), then removes them. The cluster stays cordoned.
    Drain {
        /// The cluster.
        cluster: String,
        /// Wait until the cluster is drained and every placement's status
        /// shows it (no longer counting the cluster); exit non-zero after
        /// --timeout.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "6m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// A staged placement's rollout: where it stands, and steering it.
    ///
    /// A placement with spec.rollout.strategy Progressive or Canary sends a
    /// new revision of its workloads to its clusters in waves; the clusters
    /// not reached yet keep the previous revision. The state is on the
    /// Placement's status.rollout for kubectl users too.
    Rollout {
        #[command(subcommand)]
        command: rollout::RolloutCommand,
    },
    /// Print the tree of relays and agents with the health of each link.
    Tree {
        /// Also show how each subtree is doing with this placement (ready
        /// of its clusters, failed, offline), asked of every relay.
        #[arg(long, value_name = "PLACEMENT")]
        placement: Option<String>,
        /// The placement's namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Apply manifests (files, directories or - for stdin) at the root, as kubectl apply does.
    Apply {
        /// A manifest file, a directory of them, or - for standard input (repeatable).
        #[arg(
            short = 'f',
            long = "filename",
            required = true,
            value_name = "FILE|DIR|-"
        )]
        files: Vec<String>,
        /// The namespace for namespaced objects that name none.
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// List objects of a resource as a table: placements, clusters, relays, or any kind.
    ///
    /// With --cluster, show objects as that cluster holds them now (status
    /// included), asked of the cluster's agent through the tree: KIND/NAME
    /// for one, KIND for every one relaymesh manages there (-n, or -A; at
    /// most 50). KIND is a short name (deploy, deployment, deployments), one
    /// qualified by its group (deployments.apps), or Kind.version.group. The
    /// agent shows only objects relaymesh manages there, and Secrets without
    /// their data. When the agent is out of reach, the answer is the last
    /// state a relay saw, with a note on stderr saying how old it is.
    Get {
        /// The resource: placements (pl), clusters, relays, clusterprofiles, or a kind's plural;
        /// with --cluster, KIND or KIND/NAME.
        resource: String,
        /// Read from this cluster (its agent), not the root.
        #[arg(long, value_name = "CLUSTER")]
        cluster: Option<String>,
        /// The namespace (namespaced resources).
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetFormat::Table)]
        output: GetFormat,
        /// A LABELS column with every label (tables).
        #[arg(long)]
        show_labels: bool,
        /// A column per label key, with its value (tables; comma-separated
        /// or repeated), as kubectl's -L.
        #[arg(short = 'L', long, value_name = "KEY", value_delimiter = ',')]
        label_columns: Vec<String>,
    },
    /// Show a cluster's recent events, newest first, asked of its agent.
    ///
    /// The agent shows the events of the namespaces holding objects
    /// relaymesh manages there (-n: of one of them). When the agent is out
    /// of reach, the answer is the last list a relay saw, with a note on
    /// stderr saying how old it is.
    Events {
        /// The cluster.
        #[arg(long, value_name = "CLUSTER")]
        cluster: String,
        /// Only this namespace.
        #[arg(short, long)]
        namespace: Option<String>,
        /// At most this many events (1 to 500).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetFormat::Table)]
        output: GetFormat,
    },
    /// Show which clusters a placement resolved to, and why, as the relays
    /// decided it.
    ///
    /// The root asks every relay that receives the placement how it split
    /// it over its children (level by level, at most 1000 relays), and
    /// shows each selected cluster with its relay path and reason, the
    /// clusters kept until their replacement is ready (a handover or a
    /// drain), the share each relay gave each child (with a rollout, how
    /// many run the newest revision), and the relays that did not answer.
    Explain {
        /// The placement's name.
        placement: String,
        /// The placement's namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Show how placements are doing: ready of selected, failed, offline,
    /// pending, the failing clusters with their messages, and conditions.
    ///
    /// Reads the status the root writes on each Placement (merged up the
    /// tree; docs/api.md, "Placement status"). Without a name, every
    /// placement of the namespace (-A: of all namespaces).
    Status {
        /// A placement's name.
        placement: Option<String>,
        /// The namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Every namespace.
        #[arg(short = 'A', long, conflicts_with = "placement")]
        all_namespaces: bool,
        /// Show ready/clusters and failed per value of this cluster label
        /// (one the placement names in spec.statusGroupBy).
        #[arg(long, value_name = "LABEL")]
        by: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Wait until a placement is ready everywhere, showing its progress.
    ///
    /// Follows the placement's status (as `relayctl status` reads it) with
    /// a progress bar of ready clusters, or a line per change when the
    /// output is not a terminal. Exits 0 once every selected cluster is
    /// ready for the placement's latest spec; non-zero once no cluster is
    /// still on its way and some failed (naming them), or at --timeout.
    Watch {
        /// The placement's name.
        placement: String,
        /// The namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// How long to wait.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
        /// Also show progress per value of this cluster label (one the
        /// placement names in spec.statusGroupBy): a bar per group.
        #[arg(long, value_name = "LABEL")]
        by: Option<String>,
    },
    /// Show one node's link to its parent, as the parent measures it now.
    ///
    /// What a relay measures of its children's links (round-trip time,
    /// bytes, the revision each acknowledged) stays with it; this asks the
    /// node's parent through the tree and prints its answer. Fails if a
    /// relay on the path is disconnected or does not answer in 10 s.
    Link {
        /// The agent or relay.
        node: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Raw workload bundles (for debugging distribution).
    Bundle {
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell): `source <(relayctl completions bash)`, or save it where
    /// the shell loads completions (docs/install.md).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
enum BundleCommand {
    /// Store FILE at the root as bundle NAME and send it to every node.
    Push {
        /// The file to send.
        file: PathBuf,
        /// The bundle's name.
        #[arg(long)]
        name: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GetFormat {
    Table,
    /// The table with the kind's wide columns too.
    Wide,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Yaml,
}

/// `value` as JSON or YAML when `output` asks for one of them.
fn structured(output: Format, value: &impl serde::Serialize) -> anyhow::Result<Option<String>> {
    Ok(match output {
        Format::Text => None,
        Format::Json => Some(format!("{}\n", serde_json::to_string_pretty(value)?)),
        Format::Yaml => Some(serde_yaml::to_string(value)?),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Completions { shell } = cli.command {
        // Named for how it was called, so `kubectl-relaymesh` completes too.
        let name = std::env::args()
            .next()
            .and_then(|path| {
                std::path::Path::new(&path)
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "relayctl".into());
        clap_complete::generate(shell, &mut Cli::command(), name, &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    init_tracing(cli.verbose);
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| runtime.block_on(run(cli)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let credentials = kubeconfig::load(cli.kubeconfig.as_deref(), cli.context.as_deref())
        .context("cannot load the kubeconfig")?;
    let client = Client::new(&credentials).context("cannot use the kubeconfig's credentials")?;
    match cli.command {
        Command::Completions { .. } => {}
        Command::Token { command } => tokens::run(&client, command).await?,
        Command::Revoke {
            list: true, output, ..
        } => nodes::revocations(&client, output).await?,
        Command::Revoke {
            node: Some(node),
            output,
            ..
        } => nodes::revoke(&client, &node, output).await?,
        Command::Move {
            list: true, output, ..
        } => nodes::moves(&client, output).await?,
        Command::Move {
            node: Some(node),
            to: Some(to),
            ttl,
            wait,
            timeout,
            output,
            ..
        } => nodes::move_node(&client, &node, &to, ttl, wait, timeout, output).await?,
        Command::Rollout { command } => rollout::run(&client, command).await?,
        Command::Cordon { cluster } => clusters::cordon(&client, &cluster, "Cordoned").await?,
        Command::Uncordon { cluster } => clusters::cordon(&client, &cluster, "Schedulable").await?,
        Command::Drain {
            cluster,
            wait,
            timeout,
        } => clusters::drain(&client, &cluster, wait, timeout).await?,
        Command::Label(change) => {
            clusters::change(&client, &change, clusters::Metadata::Labels).await?
        }
        Command::Annotate(change) => {
            clusters::change(&client, &change, clusters::Metadata::Annotations).await?
        }
        Command::Move { .. } => {
            anyhow::bail!("name the agent to move and --to RELAY, or pass --list")
        }
        Command::Revoke { node: None, .. } => {
            anyhow::bail!("name the node to revoke, or pass --list")
        }
        Command::User { command } => users::run(&client, &credentials, command).await?,
        Command::Rotate { what } => rotate::run(&client, what).await?,
        Command::Tree {
            placement,
            namespace,
            output,
        } => inspect::tree(&client, placement.as_deref(), &namespace, output).await?,
        Command::Apply { files, namespace } => objects::apply(&client, &files, &namespace).await?,
        Command::Get {
            resource,
            cluster: Some(cluster),
            namespace,
            all_namespaces,
            output,
            ..
        } => {
            let namespace = (!all_namespaces).then_some(namespace.as_str());
            objects::get_from(&client, &cluster, &resource, namespace, output).await?
        }
        Command::Events {
            cluster,
            namespace,
            limit,
            output,
        } => objects::events(&client, &cluster, namespace.as_deref(), limit, output).await?,
        Command::Get {
            resource,
            cluster: None,
            namespace,
            all_namespaces,
            output,
            show_labels,
            label_columns,
        } => {
            let view = relaymesh_root::client::resources::TableView {
                namespaces: all_namespaces,
                wide: output == GetFormat::Wide,
                show_labels,
                label_columns,
            };
            objects::get(&client, &resource, &namespace, view, output).await?
        }
        Command::Explain {
            placement,
            namespace,
            output,
        } => inspect::explain(&client, &namespace, &placement, output).await?,
        Command::Status {
            placement,
            namespace,
            all_namespaces,
            by,
            output,
        } => {
            let namespace = (!all_namespaces).then_some(namespace.as_str());
            inspect::status(
                &client,
                namespace,
                placement.as_deref(),
                by.as_deref(),
                output,
            )
            .await?
        }
        Command::Watch {
            placement,
            namespace,
            timeout,
            by,
        } => waits::watch(&client, &namespace, &placement, timeout, by.as_deref()).await?,
        Command::Link { node, output } => inspect::link(&client, &node, output).await?,
        Command::Bundle {
            command: BundleCommand::Push { file, name },
        } => inspect::push_bundle(&client, &file, &name).await?,
    }
    Ok(())
}

/// A header and rows as kubectl prints them.
fn columns(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    table.extend(rows);
    relaymesh_root::client::resources::render_rows(&table)
}

/// Logs go to stderr: `-v` flags win, else `RUST_LOG`, else warnings only.
fn init_tracing(verbose: u8) {
    let filter = match verbose {
        0 => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        1 => EnvFilter::new("info"),
        2 => EnvFilter::new("debug"),
        _ => EnvFilter::new("trace"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The error and its causes on one line. A [`ClientError`] already says its
/// own cause in a few words, so the transport's layers below it are left out.
fn one_line(error: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in error.chain() {
        parts.push(cause.to_string());
        if cause.downcast_ref::<ClientError>().is_some() {
            break;
        }
    }
    parts.join(": ")
}
