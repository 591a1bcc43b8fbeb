//! `relay`: the daemon every node of a relaymesh tree runs.
//!
//! `relay init` makes a new mesh (the root), `relay join` makes a node below
//! an existing one, `relay run` runs either from its data directory, and
//! `relay inspect` reads a stopped relay's store.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{CommandFactory as _, Parser, Subcommand};
use relaymesh_node::config::{EtcdStore, ObjectsStore};
use relaymesh_node::limits::{self, Limits};
use relaymesh_node::logging::{self, LogFormat};
use relaymesh_node::store::Store;
use relaymesh_node::{daemon, pki};
use relaymesh_protocol::Role;
mod setup;

use setup::{init, join, join_root};

const LONG_ABOUT: &str = "\
The relaymesh relay daemon.

Every node of a relaymesh tree runs this same binary. A relay with no parent is the \
root: it holds the mesh CA and serves the Kubernetes-compatible API. Every other relay \
joined the tree with a token and dials its parent over QUIC; parents never dial out. \
Each relay keeps its slice of the desired state, the bundles it references and the \
inventory of its subtree in a sled store in its data directory, so it restarts from \
there with nothing else.";

// Every line shorter than 80 columns, so that none wraps and breaks when
// pasted (`tests/tests/kubectl_plugin.rs`).
const EXAMPLES: &str = "\
Examples:
  # A new mesh: the root relay
  relay init --data-dir ./root --name root \\
      --listen 127.0.0.1:7443 --api-listen 127.0.0.1:6443
  relay run --data-dir ./root &

  # A relay below it
  export KUBECONFIG=./root/admin.kubeconfig
  TOKEN=$(relayctl token create --role relay --name eu)
  relay join --data-dir ./eu --name eu --token \"$TOKEN\" --listen 127.0.0.1:7444
  relay run --data-dir ./eu &

  # What a stopped relay holds
  relay inspect --data-dir ./eu";

/// The relaymesh relay daemon.
#[derive(Debug, Parser)]
#[command(name = "relay", version, long_about = LONG_ABOUT, after_help = EXAMPLES)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    #[command(flatten)]
    config: relaymesh_node::config_file::ConfigArg,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a new mesh: its mesh and API CAs, the root relay's identity, and an admin kubeconfig.
    Init {
        /// Where the relay keeps its store; writes DIR/admin.kubeconfig.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// The root's name (a DNS label).
        #[arg(long, default_value = "root")]
        name: String,
        /// The QUIC address children dial (host:port).
        #[arg(long, value_name = "HOST:PORT")]
        listen: String,
        /// The HTTPS address of the Kubernetes-compatible API (host:port).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:6443")]
        api_listen: String,
        /// Addresses children are told to dial, if not --listen (repeatable).
        #[arg(long, value_name = "HOST:PORT")]
        advertise: Vec<String>,
        /// More names or IPs the API certificate must cover (repeatable).
        #[arg(long, value_name = "HOST")]
        api_host: Vec<String>,
        /// Add a replica to a root on etcd (with --store etcd and the same
        /// --etcd-* options) instead of creating a mesh; needs --secrets-key.
        #[arg(long, requires = "secrets_key")]
        join_root: bool,
        /// With --join-root: a copy of the first replica's DIR/secrets.key
        /// (mode 0600), which opens the root's keys in etcd.
        #[arg(long, value_name = "FILE", requires = "join_root")]
        secrets_key: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Join an existing mesh below the relay the token names.
    Join {
        /// Where the relay keeps its store.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// This relay's name; it must be the one the token was issued for.
        #[arg(long)]
        name: String,
        /// The join token from `relayctl token create --role relay`.
        #[arg(long, env = "RELAYMESH_TOKEN", hide_env_values = true)]
        token: String,
        /// The QUIC address this relay's own children dial (host:port).
        #[arg(long, value_name = "HOST:PORT")]
        listen: String,
        /// Addresses children are told to dial, if not --listen (repeatable).
        #[arg(long, value_name = "HOST:PORT")]
        advertise: Vec<String>,
    },
    /// Run an initialized or joined relay until SIGTERM or Ctrl-C.
    Run {
        /// The relay's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Replace the parent's addresses (repeatable); the relay dials all and
        /// keeps the nearest. Saved for later runs.
        #[arg(long, value_name = "HOST:PORT")]
        parent_address: Vec<String>,
        /// At a root on etcd: replace its etcd endpoints (comma-separated or
        /// repeated), as after restoring a snapshot into a new cluster.
        /// Saved for later runs.
        #[arg(long, value_name = "URL", value_delimiter = ',')]
        etcd_endpoints: Vec<String>,
        /// How long the TLS certificates this relay signs for its children last
        /// (at join and at renewal, between 10s and 366d); at the root, its own
        /// too. Nodes renew theirs over the link when two thirds of the time
        /// left have passed; a node offline for longer renews it when it is
        /// back, within --expired-cert-grace.
        #[arg(
            long,
            env = "RELAYMESH_NODE_CERT_VALIDITY",
            default_value = "24h",
            value_parser = humantime::parse_duration,
            value_name = "DURATION"
        )]
        node_cert_validity: std::time::Duration,
        /// How long after a child's certificate expired this relay still
        /// renews it over the link (0s to 366d; 0s: never). A connection made
        /// with an expired certificate may renew it and do nothing else, and
        /// a revoked node is refused; past this, the node needs a new join
        /// token and is told so.
        #[arg(
            long,
            env = "RELAYMESH_EXPIRED_CERT_GRACE",
            default_value = "30d",
            value_parser = humantime::parse_duration,
            value_name = "DURATION"
        )]
        expired_cert_grace: std::time::Duration,
        /// How long a cluster below this relay may be disconnected before
        /// placements with maxClusters treat it as lost and place it on
        /// another cluster (its agent keeps running what it had; back, it
        /// is an open cluster again and its copy of a placement that moved
        /// is removed). Default: never.
        #[arg(long, env = "RELAYMESH_LOST_AFTER", value_parser = humantime::parse_duration, value_name = "DURATION")]
        lost_after: Option<std::time::Duration>,
        /// For a relay joined with candidate parents (`relayctl token create
        /// --role relay --parent A --parent B …`): how long its parent may
        /// stay silent before it re-parents, with its subtree, to the
        /// nearest other candidate that answers. A dead link is noticed 15 s
        /// (the link's idle timeout) after the last thing heard, so a grace
        /// period under 15 s re-parents after 15 s.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
        parent_grace: std::time::Duration,
        /// How long this relay stays quiet about a node it refused (revoked,
        /// not admitted here, a certificate TLS refuses) after logging it:
        /// the first refusal is logged at once, then at most one line per
        /// node and reason per interval, with `times=N` refusals since the
        /// previous line.
        #[arg(long, env = "RELAYMESH_REFUSAL_LOG_INTERVAL", value_name = "DURATION",
              default_value = "1m", value_parser = humantime::parse_duration)]
        refusal_log_interval: std::time::Duration,
        /// At the root: how the bundles of placements are stored and sent.
        /// `zstd` compresses them (read by nodes of protocol version 13,
        /// this release on); set it once every agent runs this release.
        /// Relays forward bundles as they are. Changing it gives every
        /// placement a new revision with the same objects: each cluster
        /// fetches it once and writes nothing to its cluster.
        #[arg(
            long,
            env = "RELAYMESH_BUNDLE_ENCODING",
            value_enum,
            default_value = "json",
            value_name = "ENCODING"
        )]
        bundle_encoding: BundleEncodingArg,
        #[command(flatten)]
        metrics: relaymesh_node::metrics::MetricsArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Move a stopped root's objects, users, tokens and API certificates
    /// from its sled store onto etcd, check that etcd holds every object,
    /// then point the root at etcd.
    MigrateStore {
        /// The root's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where to: `etcd` (the only target).
        #[arg(long, value_enum)]
        to: MigrateTarget,
        #[command(flatten)]
        etcd: EtcdArgs,
    },
    /// Print what a stopped relay's store holds, as JSON: identity, slice
    /// entries, bundles (re-hashed), bundle transfers completed to each child
    /// (`served`), known nodes and a digest of the store.
    Inspect {
        /// The relay's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell): `source <(relay completions bash)`, or save it where
    /// the shell loads completions (docs/install.md).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `relay run`'s limits. Each refusal is counted in the relay's own
/// inventory record (`limitRefusals` on its Relay object, `LIMITS:` in
/// `relayctl tree`); see docs/security.md, "Limits".
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Limits")]
struct LimitArgs {
    /// Connections accepted at once from everyone; more are refused before
    /// their handshake (counted as `connections`).
    #[arg(long, env = "RELAYMESH_MAX_CONNECTIONS", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// Connections accepted at once from one source address (an IPv4
    /// address or an IPv6 /64); more are refused before their handshake
    /// (counted as `connections-per-address`). Children behind one NAT
    /// share it.
    #[arg(long, env = "RELAYMESH_MAX_CONNECTIONS_PER_ADDRESS", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_address: u64,
    /// Joins answered per minute from one source address, all at once if
    /// they come together; more are refused with "too many joins … retry
    /// in Ns" before the token is read (counted as `joins-per-address`).
    #[arg(long, env = "RELAYMESH_MAX_JOINS_PER_MINUTE_PER_ADDRESS", value_name = "N",
          default_value_t = limits::DEFAULT_JOINS_PER_MINUTE_PER_ADDRESS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_joins_per_minute_per_address: u32,
    /// Joins worked on at once, from everyone; more are refused with "this
    /// relay is working on as many joins as it takes at once" (counted as
    /// `joins`).
    #[arg(long, env = "RELAYMESH_MAX_CONCURRENT_JOINS", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_CONCURRENT_JOINS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_concurrent_joins: u64,
    /// Inventory records one child may have this relay hold (its own and its
    /// subtree's); more are refused and logged (counted as
    /// `inventory-records-per-child`).
    #[arg(long, env = "RELAYMESH_MAX_INVENTORY_RECORDS_PER_CHILD", value_name = "N",
          default_value_t = relaymesh_core::DEFAULT_MAX_RECORDS_PER_CHILD as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_inventory_records_per_child: u64,
    /// Placements one child may report status for; more are refused and
    /// logged (counted as `status-keys-per-child`).
    #[arg(long, env = "RELAYMESH_MAX_STATUS_KEYS_PER_CHILD", value_name = "N",
          default_value_t = relaymesh_core::DEFAULT_MAX_STATUS_KEYS_PER_CHILD as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_status_keys_per_child: u64,
    /// Bundle serves run at once on this relay, to all children together
    /// (each connection may also have at most 16 bundle streams open);
    /// more wait for one to end rather than being refused, so a child's
    /// fetch only takes longer.
    #[arg(long, env = "RELAYMESH_MAX_CONCURRENT_BUNDLE_SERVES", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_CONCURRENT_BUNDLE_SERVES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_concurrent_bundle_serves: u64,
    /// TLS handshakes worked on at once, from everyone (each signs with the
    /// relay's key and checks a certificate chain); a new connection waits
    /// its turn for up to 6 s, then is refused (counted as `handshakes`)
    /// and its child redials after a jittered backoff. A reconnect storm's
    /// handshakes take turns instead of all slowing down together.
    #[arg(long, env = "RELAYMESH_MAX_CONCURRENT_HANDSHAKES", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_CONCURRENT_HANDSHAKES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_concurrent_handshakes: u64,
    /// The root's API watches one user (a certificate's common name) may
    /// have open at once; one more gets `429 TooManyRequests` (counted as
    /// `api-watches-per-user`).
    #[arg(long, env = "RELAYMESH_MAX_API_WATCHES_PER_USER", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_API_WATCHES_PER_USER as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_api_watches_per_user: u64,
    /// The root's API watches open at once, from everyone; one more gets
    /// `429 TooManyRequests` (counted as `api-watches`).
    #[arg(long, env = "RELAYMESH_MAX_API_WATCHES", value_name = "N",
          default_value_t = limits::DEFAULT_MAX_API_WATCHES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_api_watches: u64,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Limits {
            max_connections: size(self.max_connections),
            max_connections_per_address: size(self.max_connections_per_address),
            joins_per_minute_per_address: self.max_joins_per_minute_per_address,
            max_concurrent_joins: size(self.max_concurrent_joins),
            max_records_per_child: size(self.max_inventory_records_per_child),
            max_status_keys_per_child: size(self.max_status_keys_per_child),
            max_concurrent_bundle_serves: size(self.max_concurrent_bundle_serves),
            max_concurrent_handshakes: size(self.max_concurrent_handshakes),
            max_api_watches_per_user: size(self.max_api_watches_per_user),
            max_api_watches: size(self.max_api_watches),
        }
    }
}

/// Where the root keeps the objects its API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StoreKind {
    /// The root's own sled store, in --data-dir (one machine).
    Sled,
    /// An etcd cluster (--etcd-endpoints), with the API's users, tokens and
    /// certificates (keys sealed with DIR/secrets.key); the node's own
    /// identity stays in --data-dir (docs/operations.md).
    Etcd,
}

/// `relay run --bundle-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BundleEncodingArg {
    /// The objects' JSON, as every release reads it.
    Json,
    /// The JSON compressed with zstd (protocol version 13 and later).
    Zstd,
}

impl From<BundleEncodingArg> for relaymesh_root::placement::BundleEncoding {
    fn from(arg: BundleEncodingArg) -> Self {
        match arg {
            BundleEncodingArg::Json => Self::Json,
            BundleEncodingArg::Zstd => Self::Zstd,
        }
    }
}

/// What `relay migrate-store` moves a root's objects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MigrateTarget {
    /// An etcd cluster (--etcd-endpoints).
    Etcd,
}

/// `relay init`'s choice of object store.
#[derive(Debug, clap::Args)]
struct StoreArgs {
    /// Where the API's objects and state live: `sled` in --data-dir, or `etcd`.
    #[arg(long, value_enum, default_value = "sled")]
    store: StoreKind,
    #[command(flatten)]
    etcd: EtcdArgs,
}

/// Where an etcd cluster is and how to reach it.
#[derive(Debug, clap::Args)]
struct EtcdArgs {
    /// etcd client URLs (comma-separated or repeated).
    #[arg(long, value_name = "URL", value_delimiter = ',')]
    etcd_endpoints: Vec<String>,
    /// The key prefix of this root's objects in etcd; it must be empty.
    #[arg(long, value_name = "PREFIX", default_value = relaymesh_root::objects_store::DEFAULT_ETCD_PREFIX)]
    etcd_prefix: String,
    /// The CA (PEM) of etcd's serving certificates, for https endpoints.
    #[arg(long, value_name = "FILE")]
    etcd_ca: Option<PathBuf>,
    /// A client certificate (PEM) for etcd, with --etcd-key.
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
}

impl StoreArgs {
    fn objects_store(self) -> anyhow::Result<ObjectsStore> {
        match self.store {
            StoreKind::Sled => {
                if !self.etcd.etcd_endpoints.is_empty() {
                    bail!("--etcd-endpoints needs --store etcd");
                }
                Ok(ObjectsStore::Sled)
            }
            StoreKind::Etcd => Ok(ObjectsStore::Etcd(self.etcd.etcd_store()?)),
        }
    }
}

impl EtcdArgs {
    fn etcd_store(self) -> anyhow::Result<EtcdStore> {
        if self.etcd_endpoints.is_empty() {
            bail!("etcd needs --etcd-endpoints URL[,URL…]");
        }
        let absolute = |path: Option<PathBuf>| -> anyhow::Result<Option<PathBuf>> {
            path.map(|path| {
                std::path::absolute(&path).with_context(|| format!("{}", path.display()))
            })
            .transpose()
        };
        Ok(EtcdStore {
            endpoints: self.etcd_endpoints,
            prefix: self.etcd_prefix,
            ca_file: absolute(self.etcd_ca)?,
            cert_file: absolute(self.etcd_cert)?,
            key_file: absolute(self.etcd_key)?,
        })
    }
}

fn main() -> ExitCode {
    let cli: Cli = relaymesh_node::config_file::parse();
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "relay", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    relaymesh_node::store::permissions::restrict_new_files();
    logging::init(cli.log_format, "info", Role::Relay);
    relaymesh_node::process::block_on_main(execute(cli.command))
}

async fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Completions { .. } => Ok(()),
        Command::Init {
            data_dir,
            name: _,
            listen,
            api_listen,
            advertise,
            api_host: _,
            join_root: true,
            secrets_key: Some(secrets_key),
            store,
        } => join_root(
            &data_dir,
            listen,
            api_listen,
            advertise,
            &secrets_key,
            store,
        ),
        Command::Init {
            data_dir,
            name,
            listen,
            api_listen,
            advertise,
            api_host,
            join_root: _,
            secrets_key: _,
            store,
        } => init(
            &data_dir,
            &name,
            listen,
            api_listen,
            advertise,
            api_host,
            store.objects_store()?,
        ),
        Command::Join {
            data_dir,
            name,
            token,
            listen,
            advertise,
        } => join(&data_dir, &name, &token, listen, advertise).await,
        Command::Run {
            data_dir,
            parent_address,
            etcd_endpoints,
            node_cert_validity,
            expired_cert_grace,
            lost_after,
            parent_grace,
            refusal_log_interval,
            bundle_encoding,
            metrics,
            limits,
        } => {
            let metrics = metrics.start().await.context("--metrics-listen")?;
            relaymesh_root::metrics::register();
            let limits = limits.limits();
            let watches = relaymesh_root::api::watch_limits(&limits);
            let root = relaymesh_root::serve::RootApi {
                standby: None,
                watches,
                bundle_encoding: bundle_encoding.into(),
            };
            let options = daemon::RunOptions {
                node_cert_validity,
                expired_cert_grace,
                lost_after,
                parent_grace,
                refusal_log_interval,
                limits,
                root: Some(daemon::Root(std::sync::Arc::new(root.clone()))),
                metrics,
                ..Default::default()
            };
            if !etcd_endpoints.is_empty() {
                let store = open_store(&data_dir)?;
                relaymesh_root::objects_store::set_etcd_endpoints(&store, etcd_endpoints)
                    .context("--etcd-endpoints")?;
            }
            run(&data_dir, parent_address, options, root).await
        }
        Command::Inspect { data_dir } => inspect(&data_dir),
        Command::MigrateStore { data_dir, to, etcd } => {
            let MigrateTarget::Etcd = to;
            let target = etcd.etcd_store()?;
            let store = open_store(&data_dir)?;
            let migrated = relaymesh_root::objects_store::migrate_to_etcd(&store, &target)?;
            println!(
                "moved {} objects to etcd ({}), prefix {:?}; the root now runs on etcd",
                migrated.objects,
                target.endpoints.join(","),
                target.prefix
            );
            println!("next: relay run --data-dir {}", data_dir.display());
            Ok(())
        }
    }
}

async fn run(
    data_dir: &Path,
    parent_addresses: Vec<String>,
    options: daemon::RunOptions,
    root: relaymesh_root::serve::RootApi,
) -> anyhow::Result<()> {
    let range = pki::MIN_NODE_CERT_VALIDITY..=pki::MAX_NODE_CERT_VALIDITY;
    if !range.contains(&options.node_cert_validity) {
        bail!(
            "--node-cert-validity {} is outside {} to {}",
            humantime::format_duration(options.node_cert_validity),
            humantime::format_duration(*range.start()),
            humantime::format_duration(*range.end())
        );
    }
    if options.expired_cert_grace > pki::MAX_EXPIRED_CERT_GRACE {
        bail!(
            "--expired-cert-grace {} is longer than {}",
            humantime::format_duration(options.expired_cert_grace),
            humantime::format_duration(pki::MAX_EXPIRED_CERT_GRACE)
        );
    }
    let store = open_store(data_dir)?;
    if let Some(identity) = store.identity()? {
        logging::set_node(&identity.name);
    }
    if !parent_addresses.is_empty() && !store.set_parent_addresses(parent_addresses)? {
        bail!("--parent-address: this relay is the root and has no parent");
    }
    tracing::info!(limits = ?options.limits, "limits");
    if options.lost_after.is_some_and(|after| after.is_zero()) {
        bail!("--lost-after must be more than zero");
    }
    if matches!(store.objects_store()?, ObjectsStore::Etcd(_)) {
        // A root on etcd is one of its replicas: standby until it leads.
        let standby = relaymesh_root::serve::RootApi {
            standby: Some(
                "this replica of the root is a standby: the leader answers about the tree".into(),
            ),
            ..root
        };
        let replica = relaymesh_root::replicas::Replica {
            options,
            standby: daemon::Root(std::sync::Arc::new(standby)),
        };
        relaymesh_root::replicas::run(data_dir, store, daemon::cancel_on_signals(), replica)
            .await?;
        return Ok(());
    }
    daemon::run_with_store(data_dir, store, daemon::cancel_on_signals(), None, options).await?;
    Ok(())
}

fn inspect(data_dir: &Path) -> anyhow::Result<()> {
    let store = open_store(data_dir)?;
    let summary = relaymesh_node::inspect::summary(&store)?
        .with_context(|| format!("{} is not initialized", data_dir.display()))?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

fn open_store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open_existing(data_dir)?)
}
