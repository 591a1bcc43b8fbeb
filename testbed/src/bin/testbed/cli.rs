//! `testbed`'s command line: its commands, their flags and `--help`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use relaymesh_testbed::cluster::FailureRule;

/// relaymesh's testbed.
#[derive(Debug, Parser)]
#[command(name = "testbed", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Benchmarks: in memory through real relay cores, and with real
    /// connections to hollow agents and simulated clusters. Each writes a
    /// JSON report; `scripts/bench` runs them all.
    #[command(subcommand)]
    Bench(Bench),
    /// A local fleet: relays and edge agents as processes on loopback, each
    /// agent with its own simulated cluster, until Ctrl-C or SIGTERM.
    Up(UpArgs),
    /// Randomly kills, partitions and restarts relays and hollow agents
    /// while placements and workloads change at the root; then heals and
    /// restarts everything and checks that every cluster converges to
    /// exactly its desired state.
    ///
    /// Brings up a root, relay processes (each relay's uplink through a
    /// loopback fault proxy) and N hollow agents, in --dir. For --minutes,
    /// every 1–4 s (seeded), one of: a relay killed with SIGKILL and
    /// restarted 1–15 s later; a relay's uplink partitioned and healed
    /// 3–25 s later; a batch of hollow agents stopped abruptly and restarted
    /// from their stores 2–15 s later; a ConfigMap or Deployment created,
    /// updated or deleted at the root; a Placement created, deleted, or
    /// moved to other clusters (label selectors over region, zone and tier,
    /// NotIn, or names). The root is never faulted. Then waits (up to
    /// --settle-timeout) until every hollow cluster holds exactly the
    /// workloads its placements select, with their latest content, and none
    /// that were deleted or unplaced. Prints a summary (actions by kind,
    /// convergence, clusters that differ and how) and exits non-zero unless
    /// every cluster converged. Every action is logged in DIR/logs/testbed.log.
    Chaos(ChaosArgs),
    /// `up` with the storefront example applied, watched until it runs on
    /// every cluster of region eu; then keeps running like `up`.
    Demo {
        #[command(flatten)]
        up: UpArgs,
        /// The manifests to apply at the root.
        #[arg(long, default_value = "examples/storefront/")]
        manifests: PathBuf,
        /// How long to watch the rollout.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        watch_for: Duration,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell): `source <(testbed completions bash)`, or save it where
    /// the shell loads completions (docs/install.md).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ChaosArgs {
    /// How long faults and changes go on, in minutes (fractions allowed).
    #[arg(long, default_value_t = 10.0)]
    pub(crate) minutes: f64,
    /// Hollow agents (clusters) in the fleet.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) hollow: usize,
    /// Relays under each relay of the level above, comma-separated (the
    /// first number is the root's children).
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    pub(crate) relays_per_level: Vec<usize>,
    /// Seeds every random choice (the same seed gives the same draws; the
    /// fleet's timing still decides how many actions fit in the time).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// The fleet's directory (cleared first if the testbed made it).
    #[arg(long, default_value = "target/chaos")]
    pub(crate) dir: PathBuf,
    /// How long the clusters may take to converge after everything is
    /// healed and restarted.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub(crate) settle_timeout: Duration,
    /// Also write the summary, with every action, as JSON here.
    #[arg(long, value_name = "PATH")]
    pub(crate) summary: Option<PathBuf>,
    /// Do not run `cargo build` for the daemons first (it runs only under
    /// `cargo run`).
    #[arg(long)]
    pub(crate) no_build: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// Relays under each relay of the level above, comma-separated (the
    /// first number is the root's children).
    #[arg(long, value_delimiter = ',', default_value = "2,2")]
    pub(crate) relays_per_level: Vec<usize>,
    /// Edge agents (each with a simulated cluster), spread over the deepest level.
    #[arg(long, default_value_t = 8)]
    pub(crate) agents: usize,
    /// Run N hollow edge agents inside the testbed's process instead of
    /// `--agents` processes: each the real agent code with its own
    /// certificate, QUIC connection and store, applying to an in-memory
    /// cluster that simulates status like the others (docs/testbed.md).
    #[arg(long, value_name = "N", conflicts_with = "agents")]
    pub(crate) hollow: Option<usize>,
    /// The fleet's directory (cleared first if the testbed made it).
    #[arg(long, default_value = "target/testbed")]
    pub(crate) dir: PathBuf,
    /// The root's API port; the relays' QUIC ports follow it (0: any free ports).
    #[arg(long, default_value_t = 7400)]
    pub(crate) base_port: u16,
    /// A file to write (JSON) once every node is connected.
    #[arg(long, value_name = "PATH")]
    pub(crate) ready_file: Option<PathBuf>,
    /// How long simulated workloads take to become ready.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub(crate) status_delay: Duration,
    /// Fail a workload (`name` or `namespace/name`) on a share of the
    /// clusters, as `shop/storefront=0.25` (repeatable). Images containing
    /// `fail` fail everywhere.
    #[arg(long = "fail", value_name = "WORKLOAD=FRACTION", value_parser = parse_failure)]
    pub(crate) failures: Vec<FailureRule>,
    /// Do not run `cargo build` for the daemons first (it runs only under
    /// `cargo run`).
    #[arg(long)]
    pub(crate) no_build: bool,
    /// Put the root's API on a local etcd cluster of N members (Debian's
    /// etcd-server, data in DIR/etcd) instead of the root's sled store.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) etcd_members: usize,
    /// Run N replicas of the root (with --etcd-members): `root` and
    /// `root-2`…, each with its own API port and its kubeconfig in
    /// DIR/replicas/; one leads, the others stand by.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "etcd_members")]
    pub(crate) root_replicas: usize,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Bench {
    /// The root API's write rate and latency with its objects in sled and
    /// on a local etcd cluster (real `relay` and `etcd` processes). Writes
    /// OUT_DIR/store.json.
    Store {
        /// ConfigMaps created per backend.
        #[arg(long, default_value_t = 2000)]
        writes: usize,
        /// Writers sending them at once.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Members of the etcd cluster.
        #[arg(long, default_value_t = 3)]
        etcd_members: usize,
        /// Where the roots and etcd keep their data.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// A relay's sled store after many bundle replacements: its size on
    /// disk against the bundle bytes still live. Writes OUT_DIR/sled-churn.json.
    SledChurn {
        /// Bundles held at any time.
        #[arg(long, default_value_t = 16)]
        live: usize,
        /// Replacements of the oldest bundle.
        #[arg(long, default_value_t = 1000)]
        replacements: usize,
        /// Bytes per bundle.
        #[arg(long, default_value_t = 100_000)]
        bundle_bytes: usize,
        /// Where the store is made.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// `kubectl apply -f` against each of N simulated clusters' own APIs in
    /// a loop (sequential, and 8 at a time) against relaymesh delivering the
    /// same manifests to the same clusters from one apply at the root.
    /// Writes OUT_DIR/peers.json.
    Peers {
        /// Simulated clusters, each behind an edge-agent process.
        #[arg(long, default_value_t = 100)]
        clusters: usize,
        /// Relays under each relay of the level above, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "2,2")]
        relays_per_level: Vec<usize>,
        /// The kubectl the loop runs.
        #[arg(long, default_value = "/usr/bin/kubectl")]
        kubectl: PathBuf,
        /// How long relaymesh may take.
        #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the fleet lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// NATS with leaf nodes (Debian's nats-server, a hub and leaf-node
    /// servers in the fanout tree's shape, N subscriber connections) against
    /// relaymesh's fanout with the same N, shape and payload: time until
    /// every receiver has it, and their ratio. Writes OUT_DIR/peers-nats.json.
    Nats {
        /// Subscriber counts (hollow agents for relaymesh), comma-separated;
        /// one run each.
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        subscribers: Vec<usize>,
        /// Servers (relays) under each one of the level above, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "2,4")]
        relays_per_level: Vec<usize>,
        /// The payload's size in bytes.
        #[arg(long, default_value_t = 100_000)]
        payload_bytes: usize,
        /// How long one run of either system may take to deliver everywhere.
        #[arg(long, default_value = "300s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the servers and fleets live while they run.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// The API's body decoders against nesting depth (JSON, YAML,
    /// protobuf; in process, each depth timed as the median of --runs), the
    /// worst body of the API's largest size per format, and a root's
    /// `/healthz` while --clients threads post worst-case bodies for
    /// --duration. Every body deeper than 64 levels must be refused (with a
    /// 4xx at the root). Writes OUT; exits non-zero when a goal is not met.
    Decode {
        /// Nesting depths of the in-process bodies, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "16,64,1000,10000,100000,1000000"
        )]
        depths: Vec<usize>,
        /// Timed decodes of each in-process body (the median is reported).
        #[arg(long, default_value_t = 9)]
        runs: usize,
        /// Client threads posting worst-case bodies to the root at once.
        #[arg(long, default_value_t = 3)]
        clients: usize,
        /// How long they post.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Where the root lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/bench/decode.json")]
        out: PathBuf,
    },
    /// docs/benchmarks.md from the reports in REPORTS, with an SVG plot per
    /// series in docs/bench/ (what `scripts/bench` ends with).
    Docs {
        /// Where the reports are.
        #[arg(long, default_value = "target/bench")]
        reports: PathBuf,
        /// The page to write.
        #[arg(long, default_value = "docs/benchmarks.md")]
        page: PathBuf,
        /// Where the plots go (linked from the page).
        #[arg(long, default_value = "docs/bench")]
        plots: PathBuf,
        /// A paragraph for the top of the page: how the runs were made when
        /// not by a whole `scripts/bench` on an idle machine.
        #[arg(long)]
        note: Option<String>,
    },
    /// One bundle of about 100 KB to N hollow agents below relay processes:
    /// time until each agent and all of them applied it, and the root's
    /// wire bytes for it against fan-out × bundle size, and the relays'
    /// memory with the agents idle. Writes OUT_DIR/NAME.json,
    /// OUT_DIR/NAME-root-egress.json and OUT_DIR/NAME-relay-memory.json.
    Fanout {
        /// Fleet sizes, comma-separated; one fleet each, one after the other.
        #[arg(long, value_delimiter = ',', default_value = "1000,5000,10000")]
        agents: Vec<usize>,
        /// Relays under each relay of the level above, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "2,4",
            conflicts_with = "star"
        )]
        relays_per_level: Vec<usize>,
        /// Every agent directly under the root, no relays between (reported
        /// as `fanout-star`).
        #[arg(long)]
        star: bool,
        /// The payload's size in bytes.
        #[arg(long, default_value_t = 100_000)]
        payload_bytes: usize,
        /// How long one fleet may take to get the bundle everywhere.
        #[arg(long, default_value = "300s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// How many times each size runs, a fleet each; the report shows
        /// the run with the median relay CPU per agent, and the lowest and
        /// highest.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        runs: u16,
        /// Where the fleets live while they run.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the reports go.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
        /// Run the sizes in this process and write their raw results here
        /// instead of reports (what each size's own process does).
        #[arg(long, hide = true)]
        run_json: Option<PathBuf>,
    },
    /// Root failover: 3 root replicas on a 3-member etcd cluster and N
    /// hollow agents; the leading replica is killed (SIGKILL) again and
    /// again while a placed Deployment changes through the others. Times
    /// from each kill: the change accepted, a new leader, the change on
    /// every cluster. Writes OUT_DIR/failover.json.
    Failover {
        /// How many times the leader is killed.
        #[arg(long, default_value_t = 5)]
        kills: usize,
        /// Hollow agents.
        #[arg(long, default_value_t = 100)]
        agents: usize,
        /// Relays under each relay of the level above, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "2")]
        relays_per_level: Vec<usize>,
        /// How long each wait may take.
        #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the fleet lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// Status latency: N hollow agents below three levels run a Deployment
    /// the root placed on all of them; one cluster at a time it becomes
    /// unavailable and ready again, each change timed until the root's
    /// Placement status shows it (p50, p99). Writes
    /// OUT_DIR/status-latency.json.
    Latency {
        /// Hollow agents.
        #[arg(long, default_value_t = 1_000)]
        agents: usize,
        /// Relays under each relay of the level above, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "2,4")]
        relays_per_level: Vec<usize>,
        /// How many clusters change (each twice).
        #[arg(long, default_value_t = 50)]
        changes: usize,
        /// How long each wait may take.
        #[arg(long, default_value = "300s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the fleet lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the reports go.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// Status fan-in: N hollow agents run a Deployment the root placed on
    /// all of them, then every cluster marks it unavailable at once. The
    /// bytes reaching the root against the bytes leaving the agents, and the
    /// time until the root's Placement status is exact. Writes
    /// OUT_DIR/status-fanin.json.
    Fanin {
        /// Hollow agents.
        #[arg(long, default_value_t = 10_000)]
        agents: usize,
        /// Relays under each relay of the level above, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "2,4")]
        relays_per_level: Vec<usize>,
        /// How long each wait may take.
        #[arg(long, default_value = "300s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the fleet lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// A reconnect storm: kill -9 and restart a relay with N hollow agents
    /// below it, while an unrelated link carries one revision after another
    /// of a ConfigMap. Time until every agent below it reconnected and
    /// converged, and the busy link's throughput during the storm against
    /// before. Writes OUT_DIR/reconnect-storm.json.
    Storm {
        /// Hollow agents below each of the two relays (the killed one and
        /// the other).
        #[arg(long, default_value_t = 5_000)]
        agents_per_relay: usize,
        /// The ConfigMaps' payload size in bytes.
        #[arg(long, default_value_t = 100_000)]
        payload_bytes: usize,
        /// How long each wait may take.
        #[arg(long, default_value = "300s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Where the fleet lives while it runs.
        #[arg(long, default_value = "target/bench/fleets")]
        dir: PathBuf,
        /// Where the report goes.
        #[arg(long, default_value = "target/bench")]
        out_dir: PathBuf,
    },
    /// Hierarchical placement resolution through a tree of real relay cores.
    Placement {
        /// Clusters in the fleet.
        #[arg(long, default_value_t = 100_000)]
        clusters: u64,
        /// Placements to resolve.
        #[arg(long, default_value_t = 64)]
        placements: usize,
        /// Relays per level below the root, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "100,10")]
        fanout: Vec<usize>,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/bench/placement.json")]
        out: PathBuf,
    },
    /// One placement and its bundle through a tree of real relay cores, and
    /// every status back up to the root.
    Simulation {
        /// Agents at the bottom of the tree.
        #[arg(long, default_value_t = 1_000_000)]
        destinations: u64,
        /// Levels of the tree, the root's and the agents' included.
        #[arg(long, default_value_t = 4)]
        levels: usize,
        /// Keep every node's persisted state in memory, as restarts would
        /// need (costs a copy of each relay's inventory).
        #[arg(long)]
        keep_state: bool,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/bench/simulation.json")]
        out: PathBuf,
    },
}

pub(crate) fn parse_failure(text: &str) -> Result<FailureRule, String> {
    let (workload, fraction) = text
        .split_once('=')
        .ok_or("expected WORKLOAD=FRACTION, as shop/storefront=0.25")?;
    let fraction: f64 = fraction
        .parse()
        .map_err(|_| format!("{fraction:?} is not a number"))?;
    if !(0.0..=1.0).contains(&fraction) || workload.is_empty() {
        return Err("the fraction must be between 0 and 1, after a workload name".into());
    }
    Ok(FailureRule {
        workload: workload.to_string(),
        fraction,
    })
}
