//! `edge-agent`: the leaf of a relaymesh tree, in front of one cluster.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{CommandFactory as _, Parser, Subcommand};
use relaymesh_edge_agent::agent;
use relaymesh_edge_agent::cluster::{self, ClusterAccess, ClusterError};
use relaymesh_edge_agent::policy::{AdoptionScope, Category, Policy, ADOPTION_IS_NOT_A_CATEGORY};
use relaymesh_node::daemon::{self, RunOptions};
use relaymesh_node::logging::{self, LogFormat};
use relaymesh_node::store::Store;
use relaymesh_node::transport::uplink::Endpoints;

const LONG_ABOUT: &str = "\
The relaymesh edge agent.

An agent stands in front of one Kubernetes cluster. It joins the tree below a relay \
with a token, registers its cluster with its labels, and keeps the desired state its \
relay assigns it in a local sled store, so it keeps working when its uplink is down. \
It applies what is assigned to its cluster with server-side apply, prunes what is \
removed, restores drift and reports each placement's status up the tree.

What it applies is its own decision, not its parent's: by default it refuses what \
changes how the whole cluster behaves (cluster-scoped RBAC, admission control, \
aggregated APIs, the API server's flow control, cluster-wide defaults, Pod Security \
labels, RuntimeClasses, node objects, PersistentVolumes, certificates, Service \
ranges, the kube-system namespaces; `edge-agent run --allow` opens them, see \
`edge-agent run --help`), and it never takes over an object it did not create \
unless the Placement says `spec.adopt: true` and the agent runs with \
`--allow-adopt` for that namespace.";

// Every line shorter than 80 columns: clap wraps longer ones in a narrow
// terminal, and a wrapped command breaks when pasted.
const EXAMPLES: &str = "\
Examples:
  TOKEN=$(relayctl token create --role agent --name edge-1 --parent eu-west)
  edge-agent join --data-dir ./edge-1 --name edge-1 --token \"$TOKEN\" \\
      --labels region=eu,zone=eu-west-1a,tier=edge \\
      --kubeconfig ~/.kube/edge-1.yaml
  edge-agent run --data-dir ./edge-1
  edge-agent run --data-dir ./edge-1 \\
      --allow cluster-rbac --allow-adopt legacy,billing";

/// The relaymesh edge agent.
#[derive(Debug, Parser)]
#[command(name = "edge-agent", version, long_about = LONG_ABOUT, after_help = EXAMPLES)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    #[command(flatten)]
    config: relaymesh_node::config_file::ConfigArg,

    #[command(subcommand)]
    command: Command,
}

/// How the agent reaches its cluster. One is needed: an agent without a
/// cluster keeps its slice and applies nothing, so it runs only when told
/// so (`--no-cluster`).
#[derive(Debug, clap::Args)]
#[group(multiple = false)]
struct ClusterArgs {
    /// The kubeconfig file of the cluster the agent applies to (its current
    /// context), saved for later runs. Not read from KUBECONFIG, which
    /// usually names the root.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Use the pod's service account (the agent runs in the cluster), saved
    /// for later runs.
    #[arg(long)]
    in_cluster: bool,
    /// Run without a cluster: the agent keeps its slice, applies nothing,
    /// and its placements stay pending. Needed on join and on every run of
    /// such an agent; without it, an agent with no cluster access refuses
    /// to start.
    #[arg(long)]
    no_cluster: bool,
}

impl ClusterArgs {
    /// The access given on the command line; `None` for none or
    /// `--no-cluster`.
    fn access(&self) -> anyhow::Result<Option<ClusterAccess>> {
        if self.in_cluster {
            return Ok(Some(ClusterAccess::InCluster));
        }
        let Some(path) = &self.kubeconfig else {
            return Ok(None);
        };
        let path = std::fs::canonicalize(path)
            .with_context(|| format!("--kubeconfig {}", path.display()))?;
        Ok(Some(ClusterAccess::Kubeconfig(path)))
    }
}

/// The apply policy: which categories of object the agent writes, and
/// where it may adopt.
#[derive(Debug, clap::Args)]
struct PolicyArgs {
    /// Apply objects of CATEGORY, which the agent refuses by default
    /// (repeatable, or comma-separated). Decided here, by whoever runs the
    /// agent; nothing a Placement or a relay says changes it.
    #[arg(
        long,
        value_name = "CATEGORY",
        value_parser = CategoryParser,
        value_delimiter = ',',
        env = "RELAYMESH_ALLOW"
    )]
    allow: Vec<Category>,
    /// Refuse CATEGORY, which the agent allows by default (only crds is);
    /// the categories are those of --allow. Repeatable, or comma-separated.
    #[arg(
        long,
        value_name = "CATEGORY",
        value_parser = CategoryParser,
        value_delimiter = ',',
        hide_possible_values = true,
        env = "RELAYMESH_DENY"
    )]
    deny: Vec<Category>,
    /// Let a Placement that says `spec.adopt: true` take over existing
    /// objects relaymesh did not create in NAMESPACE (and the Namespace
    /// itself). Nowhere by default. `*` allows every namespace; `:cluster`
    /// allows cluster-scoped objects (CRDs, classes, …) that the categories
    /// let through. Repeatable, or comma-separated.
    #[arg(
        long,
        value_name = "NAMESPACE",
        value_delimiter = ',',
        env = "RELAYMESH_ALLOW_ADOPT"
    )]
    allow_adopt: Vec<AdoptionScope>,
}

/// Parses a category of `--allow` and `--deny` as its [`clap::ValueEnum`]
/// does, and says where the former `adoption` category went.
#[derive(Debug, Clone, Copy)]
struct CategoryParser;

impl clap::builder::TypedValueParser for CategoryParser {
    type Value = Category;

    fn parse_ref(
        &self,
        command: &clap::Command,
        argument: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Category, clap::Error> {
        if value == "adoption" {
            let flag = argument
                .and_then(clap::Arg::get_long)
                .map_or_else(|| "--allow/--deny".to_string(), |long| format!("--{long}"));
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{flag} adoption: {ADOPTION_IS_NOT_A_CATEGORY}\n"),
            )
            .with_cmd(command));
        }
        clap::builder::EnumValueParser::<Category>::new().parse_ref(command, argument, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(Category::ALL.into_iter().filter_map(|category| {
            clap::ValueEnum::to_possible_value(&category)
        })))
    }
}

const POLICY_HELP: &str = "\
Apply policy:
  A refused object is not applied; the placement counts as failed on this cluster, \
its status says which object was refused and why, and the rest of the bundle is \
applied. Independently of --allow, the agent never writes over an object that \
exists without relaymesh's labels unless the Placement says spec.adopt: true and \
--allow-adopt covers the object's namespace; an adopted object (a Namespace \
included) is released, never deleted, when it leaves the placement. See \
docs/security.md for the default policy as a table, and the RBAC the agent itself \
needs.";

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
        /// The most placements this cluster runs: once it holds this many,
        /// placements with maxClusters go to other clusters, and one that
        /// arrives beyond it anyway fails here, saying so. Default: no limit.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_placements: Option<u32>,
        /// The most replicas this cluster runs, summed over the
        /// Deployments, StatefulSets and ReplicaSets of its placements
        /// (`spec.replicas`, 1 if unset, after customization): a placement
        /// that would pass it is not applied and fails here, saying so,
        /// until another leaves; while one waits or the sum is reached,
        /// placements with maxClusters go to other clusters. Default: no
        /// limit.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_replicas: Option<u64>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Run a joined agent until SIGTERM or Ctrl-C.
    #[command(after_long_help = POLICY_HELP)]
    Run {
        /// The agent's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Replace the parent relay's addresses (repeatable); the agent dials
        /// all, keeps the nearest and fails over when it drops. Saved for
        /// later runs.
        #[arg(long, value_name = "HOST:PORT")]
        parent_address: Vec<String>,
        /// For an agent joined with candidate parents (`relayctl token create
        /// --parent A --parent B …`): how long its parent may stay silent
        /// before it re-parents to the nearest other candidate that answers.
        /// A dead link is noticed 15 s (the link's idle timeout) after the
        /// last thing heard, so a grace period under 15 s re-parents after
        /// 15 s.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
        parent_grace: std::time::Duration,
        /// Replace the cluster's labels, `key=value,…` (those it joined
        /// with; the detected `relaymesh.dev/` ones stay, and so do changes
        /// made at the root with `relayctl label cluster`). Saved for later
        /// runs; placements that select by label follow.
        #[arg(long, value_name = "LABELS")]
        labels: Option<String>,
        /// Join first, as cluster NAME with the token in RELAYMESH_TOKEN
        /// (and --labels), if DIR holds no agent yet; later starts just
        /// run. For a Pod whose data directory starts as an empty volume
        /// (deploy/edge-agent).
        #[arg(long, value_name = "NAME")]
        join_as: Option<String>,
        // `--kubeconfig` and `--in-cluster` replace the access the agent
        // joined with.
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        policy: PolicyArgs,
        #[command(flatten)]
        metrics: relaymesh_node::metrics::MetricsArgs,
    },
    /// Print what a stopped agent's store holds, as JSON.
    Inspect {
        /// The agent's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell): `source <(edge-agent completions bash)`, or save it where
    /// the shell loads completions (docs/install.md).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli: Cli = relaymesh_node::config_file::parse();
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(
            shell,
            &mut Cli::command(),
            "edge-agent",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    relaymesh_node::store::permissions::restrict_new_files();
    logging::init(cli.log_format, "info", relaymesh_protocol::Role::Agent);
    relaymesh_node::process::block_on_main(execute(cli.command))
}

async fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Completions { .. } => Ok(()),
        Command::Join {
            data_dir,
            name,
            token,
            labels,
            max_placements,
            max_replicas,
            cluster,
        } => {
            let registration = Registration {
                labels: &labels,
                max_placements,
                max_replicas,
            };
            let access = cluster.access()?;
            if access.is_none() && !cluster.no_cluster {
                return Err(ClusterError::NotConfigured.into());
            }
            join(&data_dir, &name, &token, registration, access).await
        }
        Command::Run {
            data_dir,
            parent_address,
            parent_grace,
            labels,
            join_as,
            cluster,
            policy,
            metrics,
        } => {
            let metrics = metrics.start().await.context("--metrics-listen")?;
            relaymesh_edge_agent::metrics::register();
            let policy = Policy::new(&policy.allow, &policy.deny)
                .context("--allow/--deny")?
                .allowing_adoption(policy.allow_adopt);
            if let Some(name) = join_as.filter(|_| !joined(&data_dir)) {
                let token = std::env::var("RELAYMESH_TOKEN").map_err(|_| {
                    anyhow::anyhow!(
                        "--join-as: {} holds no agent yet, and RELAYMESH_TOKEN holds no join token",
                        data_dir.display()
                    )
                })?;
                let access = cluster.access()?;
                if access.is_none() && !cluster.no_cluster {
                    return Err(ClusterError::NotConfigured.into());
                }
                let registration = Registration {
                    labels: labels.as_deref().unwrap_or(""),
                    max_placements: None,
                    max_replicas: None,
                };
                join(&data_dir, &name, token.trim(), registration, access).await?;
            }
            if let Some(labels) = labels {
                relabel(&data_dir, &labels)?;
            }
            let options = RunOptions {
                parent_grace,
                metrics,
                ..RunOptions::default()
            };
            run(&data_dir, parent_address, &cluster, policy, options).await
        }
        Command::Inspect { data_dir } => {
            let store = open_store(&data_dir)?;
            let summary = relaymesh_node::inspect::summary(&store)?
                .with_context(|| format!("{} is not initialized", data_dir.display()))?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(())
        }
    }
}

/// What a joining cluster says of itself.
struct Registration<'a> {
    /// `--labels`.
    labels: &'a str,
    /// `--max-placements`.
    max_placements: Option<u32>,
    /// `--max-replicas`.
    max_replicas: Option<u64>,
}

async fn join(
    data_dir: &Path,
    name: &str,
    token: &str,
    registration: Registration<'_>,
    cluster: Option<ClusterAccess>,
) -> anyhow::Result<()> {
    relaymesh_protocol::name::validate(name).context("--name")?;
    logging::set_node(name);
    let mut labels =
        relaymesh_edge_agent::labels::parse(registration.labels).context("--labels")?;
    let capacity: std::collections::BTreeMap<String, String> = [
        (
            relaymesh_protocol::inventory::PLACEMENTS_CAPACITY,
            registration.max_placements.map(u64::from),
        ),
        (
            relaymesh_protocol::inventory::REPLICAS_CAPACITY,
            registration.max_replicas,
        ),
    ]
    .into_iter()
    .filter_map(|(key, limit)| Some((key.to_string(), limit?.to_string())))
    .collect();
    let store = Store::create(data_dir).with_context(|| {
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
    // Asked before the token is spent, so an unreachable cluster costs none.
    if let Some(access) = &cluster {
        let client = access.client().await.context("cannot reach the cluster")?;
        let detected = cluster::detect_labels(&client)
            .await
            .context("cannot read the cluster's version")?;
        for (key, value) in detected {
            labels.entry(key).or_insert(value);
        }
    }
    let parent = agent::join(
        &store,
        name,
        token,
        labels,
        capacity,
        &mut Endpoints::default(),
    )
    .await?;
    let candidates: Vec<String> = store.candidates()?.into_iter().map(|c| c.name).collect();
    if !candidates.is_empty() {
        eprintln!(
            "{parent:?} answered first of the candidate parents {}",
            candidates.join(", ")
        );
    }
    if let Some(access) = &cluster {
        access.save(&store.open_tree(cluster::AGENT_TREE)?)?;
    }
    println!(
        "joined as cluster {name:?} under {parent:?}; next: edge-agent run --data-dir {}",
        data_dir.display()
    );
    Ok(())
}

/// `edge-agent run --labels`: the cluster's own labels, replaced in its
/// stored configuration before it runs (its record carries them up).
fn relabel(data_dir: &Path, text: &str) -> anyhow::Result<()> {
    let wanted = relaymesh_edge_agent::labels::parse(text).context("--labels")?;
    if let Some(key) = wanted.keys().find(|key| key.starts_with(RESERVED_PREFIX)) {
        bail!("--labels: {key:?} is relaymesh's own label; the agent detects or sets it");
    }
    let store = open_store(data_dir)?;
    let mut config = store
        .config()?
        .with_context(|| format!("--labels: {} holds no joined agent", data_dir.display()))?;
    let mut labels: std::collections::BTreeMap<String, String> = config
        .labels
        .iter()
        .filter(|(key, _)| key.starts_with(RESERVED_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    labels.extend(wanted);
    if labels != config.labels {
        tracing::info!(?labels, "the cluster's labels change");
        config.labels = labels;
        store.set_config(&config)?;
        store.flush()?;
    }
    Ok(())
}

/// The prefix of the labels relaymesh itself sets or detects.
const RESERVED_PREFIX: &str = "relaymesh.dev/";

/// Runs the daemon in agent role and, if the agent has cluster access, the
/// reconciler beside it on the same store.
async fn run(
    data_dir: &Path,
    parent_addresses: Vec<String>,
    cluster: &ClusterArgs,
    policy: Policy,
    options: RunOptions,
) -> anyhow::Result<()> {
    let store = open_store(data_dir)?;
    if let Some(identity) = store.identity()? {
        logging::set_node(&identity.name);
    }
    if !parent_addresses.is_empty() && !store.set_parent_addresses(parent_addresses)? {
        bail!(
            "--parent-address: {} holds no joined agent",
            data_dir.display()
        );
    }
    let shutdown = daemon::cancel_on_signals();
    let client = match cluster_access(&store, cluster)? {
        Some(access) => Some(
            access
                .client()
                .await
                .context("cannot build a client for the cluster")?,
        ),
        None => {
            tracing::warn!("--no-cluster: keeping the slice, applying nothing");
            None
        }
    };
    if client.is_some() {
        tracing::info!(
            allowed = %policy.allowed_names(),
            adopt = %policy.adoptable_names(),
            "apply policy"
        );
    }
    agent::run(data_dir, store, client, policy, shutdown, options).await?;
    Ok(())
}

/// The access `edge-agent run` uses: the one given (saved for later runs),
/// else the stored one; `None` only with `--no-cluster`, which an agent
/// with access refuses (it would silently stop applying).
fn cluster_access(store: &Store, given: &ClusterArgs) -> anyhow::Result<Option<ClusterAccess>> {
    let tree = store.open_tree(cluster::AGENT_TREE)?;
    if let Some(access) = given.access()? {
        access.save(&tree)?;
        return Ok(Some(access));
    }
    match ClusterAccess::load(&tree) {
        Ok(access) if given.no_cluster => bail!(
            "--no-cluster: this agent applies to its cluster ({}); run it without --no-cluster",
            access.describe()
        ),
        Ok(access) => Ok(Some(access)),
        Err(ClusterError::NotConfigured) if given.no_cluster => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Whether `data_dir` holds a joined agent already (`run --join-as`).
fn joined(data_dir: &Path) -> bool {
    data_dir.join("store").is_dir()
        && Store::open_existing(data_dir)
            .ok()
            .and_then(|store| store.identity().ok().flatten())
            .is_some()
}

fn open_store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open_existing(data_dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy `edge-agent run ARGS` starts with.
    fn run_policy(args: &[&str]) -> Result<Policy, String> {
        let mut all = vec!["edge-agent", "run", "--data-dir", "d"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all)
            .map_err(|error| error.to_string())?
            .command
        {
            Command::Run { policy, .. } => Ok(Policy::new(&policy.allow, &policy.deny)
                .map_err(|error| error.to_string())?
                .allowing_adoption(policy.allow_adopt)),
            other => Err(format!("not run: {other:?}")),
        }
    }

    #[test]
    fn allow_adopt_takes_namespaces_every_namespace_and_the_cluster() -> Result<(), String> {
        assert_eq!(run_policy(&[])?.adoptable_names(), "");
        let policy = run_policy(&[
            "--allow-adopt",
            "legacy,billing",
            "--allow-adopt",
            ":cluster",
        ])?;
        assert_eq!(policy.adoptable_names(), "billing,legacy,:cluster");
        assert_eq!(run_policy(&["--allow-adopt", "*"])?.adoptable_names(), "*");
        let error = run_policy(&["--allow-adopt", "Legacy"])
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("\"Legacy\" is neither a namespace name"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn the_former_adoption_category_points_to_allow_adopt() -> Result<(), String> {
        for flag in ["--deny", "--allow"] {
            let error = run_policy(&[flag, "crds,adoption"])
                .err()
                .unwrap_or_default();
            assert!(
                error.contains(&format!(
                    "{flag} adoption: adoption is no longer a category"
                )) && error.contains("--allow-adopt NAMESPACE"),
                "{error}"
            );
        }
        // The other categories parse as before, aliases included.
        let policy = run_policy(&["--allow", "webhooks,flow-control", "--deny", "crds"])?;
        assert_eq!(policy.allowed_names(), "admission,api-server");
        Ok(())
    }
}
