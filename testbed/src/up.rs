//! `testbed up`: a local fleet as separate processes on loopback. A root
//! relay, levels of relays below it, and edge agents each applying to its own
//! in-process [`SimulatedCluster`].
//!
//! The layout under the fleet's directory (DESIGN.md, "The testbed's
//! layout"): `root.kubeconfig` (admin access to the root's API),
//! `clusters/NAME.kubeconfig` for every simulated cluster (its store in
//! `clusters/NAME/`), the daemons' data directories in `nodes/NAME/`, and
//! every process's log in `logs/NAME.log` (the testbed's own, with the
//! simulated clusters', in `logs/testbed.log`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use tokio::process::Command;
use tracing::{info, warn};

use crate::cluster::{SimulatedCluster, SimulatorOptions};
use crate::etcd::EtcdCluster;
use crate::faults::{FaultHandle, Proxy};

pub mod counting;
mod fleet_dir;
pub mod hollow;
mod next_steps;
pub mod plan;
pub mod processes;
pub mod replicas;

pub use fleet_dir::prepare_dir;
use hollow::HollowAgents;
use plan::{Plan, ROOT};
use processes::{run_logged, Daemons};

/// How long one stage (a level of relays, the agents) may take to connect.
const STAGE_TIMEOUT: Duration = Duration::from_secs(120);

/// How often the tree is polled while waiting.
const POLL: Duration = Duration::from_millis(300);

/// What to bring up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Relays under each relay of the level above (the root is level 0).
    pub relays_per_level: Vec<usize>,
    /// Edge agents, spread round-robin over the deepest level.
    pub agents: usize,
    /// Run the agents hollow, inside this process ([`hollow`]), instead of
    /// as `edge-agent` processes with simulated clusters on sockets.
    pub hollow: bool,
    /// The fleet's directory; cleared first if a testbed made it.
    pub dir: PathBuf,
    /// The root's API port; relays' QUIC ports follow it. 0: any free ports.
    pub base_port: u16,
    /// Written (JSON) once everything is connected.
    pub ready_file: Option<PathBuf>,
    /// Where the `relay`, `relayctl` and `edge-agent` binaries are.
    pub bin_dir: PathBuf,
    /// How the simulated clusters behave.
    pub simulator: SimulatorOptions,
    /// Put a fault [`Proxy`] between every relay below the root and its
    /// parent (`relay run --parent-address PROXY`), so its uplink can be
    /// partitioned ([`Fleet::uplink`]). Agents always dial their relay
    /// directly.
    pub proxied_uplinks: bool,
    /// Put the root's API on a local etcd cluster of this many members
    /// (`relay init --store etcd`); 0: the root's own sled store.
    pub etcd_members: usize,
    /// Replicas of the root, itself included (with `etcd_members`): the
    /// root's children know them all, and one leads ([`replicas`]).
    pub root_replicas: usize,
}

impl UpOptions {
    /// A benchmark's or a test's fleet in `dir` (made fresh, see
    /// [`prepare_dir`]): `agents` below `relays_per_level`, hollow or as
    /// processes, on any free ports, with the default simulated clusters.
    pub fn fresh(
        dir: PathBuf,
        relays_per_level: Vec<usize>,
        agents: usize,
        hollow: bool,
        bin_dir: PathBuf,
    ) -> anyhow::Result<Self> {
        prepare_dir(&dir)?;
        Ok(Self {
            relays_per_level,
            agents,
            hollow,
            dir,
            base_port: 0,
            ready_file: None,
            bin_dir,
            simulator: SimulatorOptions::default(),
            proxied_uplinks: false,
            etcd_members: 0,
            root_replicas: 1,
        })
    }
}

/// A running fleet.
#[derive(Debug)]
pub struct Fleet {
    /// The fleet's directory.
    pub dir: PathBuf,
    /// Its shape and labels.
    pub plan: Plan,
    /// Whether the agents apply to their clusters (their `edge-agent join`
    /// takes `--kubeconfig`).
    pub agents_apply: bool,
    bin_dir: PathBuf,
    daemons: Daemons,
    clusters: Vec<SimulatedCluster>,
    hollow: Option<HollowAgents>,
    /// The fault proxy in front of each relay's parent, by relay name, with
    /// [`UpOptions::proxied_uplinks`].
    uplinks: BTreeMap<String, Proxy>,
    /// The root's etcd cluster, with [`UpOptions::etcd_members`]; stopped
    /// after the daemons.
    etcd: Option<EtcdCluster>,
    /// The root's replicas, the root first.
    replicas: Vec<replicas::RootReplica>,
}

impl Fleet {
    /// Brings the fleet up in `options.dir`, which [`prepare_dir`] made
    /// ready, and waits until every node is connected. On failure, stops
    /// what it started.
    pub async fn start(options: &UpOptions) -> anyhow::Result<Self> {
        let plan = Plan::new(&options.relays_per_level, options.agents);
        let mut fleet = Self {
            dir: options.dir.clone(),
            plan,
            agents_apply: false,
            bin_dir: options.bin_dir.clone(),
            daemons: Daemons::default(),
            clusters: Vec::new(),
            hollow: None,
            uplinks: BTreeMap::new(),
            etcd: None,
            replicas: Vec::new(),
        };
        match fleet.bring_up(options).await {
            Ok(()) => Ok(fleet),
            Err(error) => {
                fleet.shutdown().await;
                Err(error)
            }
        }
    }

    /// The root's admin kubeconfig.
    pub fn root_kubeconfig(&self) -> PathBuf {
        self.dir.join("root.kubeconfig")
    }

    /// A `kube` client with admin access to the root's API.
    pub async fn root_client(&self) -> anyhow::Result<kube::Client> {
        kube_client(&self.root_kubeconfig()).await
    }

    /// relaymesh's own client with admin access to the root.
    pub fn root_admin(&self) -> anyhow::Result<relaymesh_root::client::Client> {
        let path = self.root_kubeconfig();
        let credentials = relaymesh_root::kubeconfig::load_file(&path, None)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(relaymesh_root::client::Client::new(&credentials)?)
    }

    /// A simulated cluster's admin kubeconfig.
    pub fn cluster_kubeconfig(&self, name: &str) -> PathBuf {
        self.dir.join("clusters").join(format!("{name}.kubeconfig"))
    }

    /// Kills relay (or agent process) `name` with SIGKILL, as a power cut
    /// would: nothing flushed, no goodbye to its peers.
    pub async fn kill_daemon(&mut self, name: &str) -> anyhow::Result<()> {
        self.daemons.kill(name).await
    }

    /// Starts daemon `name` again from its data directory after
    /// [`Fleet::kill_daemon`] or after it exited.
    pub fn restart_daemon(&mut self, name: &str) -> anyhow::Result<()> {
        self.daemons.restart(name)
    }

    /// Daemons that exited since the last call (or since
    /// [`Fleet::run_until_signal`] last looked), with their exit status and
    /// log (one killed with [`Fleet::kill_daemon`] is not reported).
    pub fn newly_exited_daemons(&mut self) -> Vec<(String, String, PathBuf)> {
        self.daemons.newly_exited()
    }

    /// The daemons running as processes (relays, and agents unless they
    /// are hollow), with their process ids.
    pub fn daemon_pids(&self) -> Vec<(String, u32)> {
        self.daemons.pids()
    }

    /// The simulated clusters (none when the agents are hollow).
    pub fn simulated_clusters(&self) -> &[SimulatedCluster] {
        &self.clusters
    }

    /// The hollow agents and their clusters, if the agents are hollow.
    pub fn hollow(&self) -> Option<&HollowAgents> {
        self.hollow.as_ref()
    }

    /// The hollow agents, to stop and restart them.
    pub fn hollow_mut(&mut self) -> Option<&mut HollowAgents> {
        self.hollow.as_mut()
    }

    /// The faults of relay `name`'s link to its parent, if the fleet was
    /// started with [`UpOptions::proxied_uplinks`].
    pub fn uplink(&self, name: &str) -> Option<FaultHandle> {
        self.uplinks.get(name).map(Proxy::handle)
    }

    /// A binary next to the testbed's.
    pub fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// `relayctl --kubeconfig DIR/root.kubeconfig ARGS`, with its output.
    pub async fn relayctl(&self, args: &[&str]) -> anyhow::Result<String> {
        run_logged(
            Command::new(self.binary("relayctl"))
                .arg("--kubeconfig")
                .arg(self.root_kubeconfig())
                .args(args),
            &self.log("relayctl"),
        )
        .await
    }

    /// Runs until Ctrl-C or SIGTERM, reporting daemons that exit meanwhile.
    pub async fn run_until_signal(&mut self) {
        let signal = shutdown_signal();
        tokio::pin!(signal);
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = &mut signal => break,
                _ = ticks.tick() => {
                    for (name, status, log) in self.daemons.newly_exited() {
                        eprintln!("{name} exited ({status}); see {}", log.display());
                    }
                    if let Some(hollow) = &mut self.hollow {
                        for (name, why) in hollow.newly_exited() {
                            eprintln!("hollow agent {name} stopped: {why}");
                        }
                    }
                }
            }
        }
        println!("stopping the fleet");
    }

    /// Stops the daemons (agents first, the root last), then the simulated
    /// clusters.
    pub async fn shutdown(mut self) {
        if let Some(hollow) = self.hollow.take() {
            hollow.shutdown().await;
        }
        self.daemons.stop_all().await;
        self.etcd.take();
        self.uplinks.clear();
        for cluster in self.clusters.drain(..) {
            let name = cluster.name().to_string();
            if let Err(error) = cluster.shutdown().await {
                warn!(cluster = %name, error = %format!("{error:#}"), "simulated cluster did not stop cleanly");
            }
        }
        info!("fleet stopped");
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.join("nodes").join(name)
    }

    async fn bring_up(&mut self, options: &UpOptions) -> anyhow::Result<()> {
        for binary in ["relay", "relayctl", "edge-agent"] {
            let path = self.binary(binary);
            if !path.is_file() {
                bail!(
                    "{} is missing: build the daemons with `cargo build --bins`",
                    path.display()
                );
            }
        }
        if options.root_replicas > 1 && options.etcd_members == 0 {
            bail!("root replicas need the root on etcd (--etcd-members)");
        }
        let mut ports = Ports::new(options.base_port);
        for index in 0..options.root_replicas.max(1) {
            self.replicas.push(replicas::RootReplica {
                name: replicas::replica_name(index),
                api_port: ports.tcp()?,
                listen_port: ports.udp()?,
            });
        }
        let (api, listen) = (self.replicas[0].api_port, self.replicas[0].listen_port);
        // Each relay's QUIC address, for the proxies of its children.
        let mut addresses =
            BTreeMap::from([(ROOT.to_string(), SocketAddr::from(([127, 0, 0, 1], listen)))]);
        let mut store_args = Vec::new();
        if options.etcd_members > 0 {
            let (dir, members) = (self.dir.join("etcd"), options.etcd_members);
            println!("starting etcd ({members} members, Debian's etcd-server)");
            let etcd =
                tokio::task::spawn_blocking(move || EtcdCluster::start(&dir, members)).await??;
            store_args = vec![
                "--store".to_string(),
                "etcd".to_string(),
                "--etcd-endpoints".to_string(),
                etcd.endpoints().join(","),
            ];
            self.etcd = Some(etcd);
        }
        println!("starting root (API on 127.0.0.1:{api})");
        run_logged(
            Command::new(self.binary("relay"))
                .arg("init")
                .arg("--data-dir")
                .arg(self.data_dir(ROOT))
                .args(["--name", ROOT])
                .arg("--listen")
                .arg(format!("127.0.0.1:{listen}"))
                .arg("--api-listen")
                .arg(format!("127.0.0.1:{api}"))
                .args(self.replicas.iter().flat_map(|replica| {
                    [
                        "--advertise".to_string(),
                        format!("127.0.0.1:{}", replica.listen_port),
                    ]
                }))
                .args(&store_args),
            &self.log(ROOT),
        )
        .await?;
        let admin = self.data_dir(ROOT).join("admin.kubeconfig");
        std::fs::copy(&admin, self.root_kubeconfig())
            .with_context(|| format!("cannot copy {}", admin.display()))?;
        self.daemons.start(
            0,
            ROOT,
            &self.binary("relay"),
            &self.data_dir(ROOT),
            &[],
            &self.log(ROOT),
        )?;
        self.wait_connected("the root's API", &[]).await?;
        if self.replicas.len() > 1 {
            self.start_replicas(&store_args).await?;
        }

        for level in 1..=self.plan.depth() {
            let relays: Vec<_> = self
                .plan
                .relays
                .iter()
                .filter(|relay| relay.level == level)
                .cloned()
                .collect();
            for relay in &relays {
                println!("starting relay {} under {}", relay.name, relay.parent);
                let listen = ports.udp()?;
                addresses.insert(
                    relay.name.clone(),
                    SocketAddr::from(([127, 0, 0, 1], listen)),
                );
                let args = ["--listen".to_string(), format!("127.0.0.1:{listen}")];
                self.join("relay", &relay.name, &relay.parent, &args)
                    .await?;
                // The join dialled the parent directly; `run --parent-address`
                // stores the proxy as the parent's address for good, so a
                // restarted relay comes back through it as well.
                let mut run_args = Vec::new();
                if options.proxied_uplinks {
                    let parent = *addresses
                        .get(&relay.parent)
                        .with_context(|| format!("no address for {}", relay.parent))?;
                    let seed = self.uplinks.len() as u64;
                    let proxy = Proxy::start(parent, seed)
                        .await
                        .with_context(|| format!("cannot start the proxy for {}", relay.name))?;
                    run_args = vec!["--parent-address".to_string(), proxy.address().to_string()];
                    self.uplinks.insert(relay.name.clone(), proxy);
                }
                self.daemons.start(
                    level,
                    &relay.name,
                    &self.binary("relay"),
                    &self.data_dir(&relay.name),
                    &run_args,
                    &self.log(&relay.name),
                )?;
            }
            let names: Vec<_> = relays.iter().map(|r| r.name.clone()).collect();
            self.wait_connected(&format!("relays of level {level}"), &names)
                .await?;
        }

        if options.hollow {
            println!("starting {} hollow agents", self.plan.agents.len());
            let hollow = HollowAgents::start(
                &self.plan.agents,
                &self.root_kubeconfig(),
                &options.simulator,
            )
            .await?;
            self.hollow = Some(hollow);
            self.agents_apply = true;
            let names: Vec<_> = self.plan.agents.iter().map(|a| a.name.clone()).collect();
            self.wait_connected("the hollow agents", &names).await?;
            return self.write_ready_file(options);
        }

        let applies = self.agent_takes_kubeconfig().await;
        self.agents_apply = applies;
        if !applies {
            println!("(this edge-agent has no --kubeconfig yet: agents register but do not apply to their clusters)");
        }
        let stage = self.plan.depth() + 1;
        for agent in self.plan.agents.clone() {
            let cluster = SimulatedCluster::start(
                &agent.name,
                &self.dir.join("clusters").join(&agent.name),
                options.simulator.clone(),
            )
            .await
            .with_context(|| format!("cannot start simulated cluster {}", agent.name))?;
            let kubeconfig = self.cluster_kubeconfig(&agent.name);
            std::fs::copy(cluster.kubeconfig(), &kubeconfig)
                .with_context(|| format!("cannot write {}", kubeconfig.display()))?;
            println!(
                "starting agent {} under {} (cluster API on {})",
                agent.name,
                agent.parent,
                cluster.address()
            );
            self.clusters.push(cluster);
            let mut args = vec!["--labels".to_string(), agent.labels_flag()];
            if applies {
                args.push("--kubeconfig".into());
                args.push(kubeconfig.to_string_lossy().into_owned());
            }
            self.join("agent", &agent.name, &agent.parent, &args)
                .await?;
            self.daemons.start(
                stage,
                &agent.name,
                &self.binary("edge-agent"),
                &self.data_dir(&agent.name),
                &[],
                &self.log(&agent.name),
            )?;
        }
        let names: Vec<_> = self.plan.agents.iter().map(|a| a.name.clone()).collect();
        self.wait_connected("the edge agents", &names).await?;
        self.write_ready_file(options)
    }

    fn write_ready_file(&self, options: &UpOptions) -> anyhow::Result<()> {
        if let Some(ready) = &options.ready_file {
            let text = serde_json::to_string_pretty(&self.summary())?;
            std::fs::write(ready, text + "\n")
                .with_context(|| format!("cannot write {}", ready.display()))?;
        }
        Ok(())
    }

    /// What the ready file holds: where things are and the clusters' labels.
    fn summary(&self) -> Value {
        let clusters: BTreeMap<&str, Value> = self
            .plan
            .agents
            .iter()
            .map(|agent| {
                (
                    agent.name.as_str(),
                    json!({
                        "parent": agent.parent,
                        "labels": agent.labels,
                        "kubeconfig": self.hollow.is_none().then(|| self.cluster_kubeconfig(&agent.name)),
                    }),
                )
            })
            .collect();
        json!({
            "dir": self.dir,
            "rootKubeconfig": self.root_kubeconfig(),
            "relays": self.plan.relays.iter().map(|r| json!({"name": r.name, "parent": r.parent})).collect::<Vec<_>>(),
            "clusters": clusters,
        })
    }

    /// Issues a token for `name` under `parent` and runs `BINARY join`,
    /// retrying while the parent is not yet known to the root.
    async fn join(
        &self,
        role: &str,
        name: &str,
        parent: &str,
        extra: &[String],
    ) -> anyhow::Result<()> {
        let binary = if role == "agent" {
            "edge-agent"
        } else {
            "relay"
        };
        let deadline = Instant::now() + STAGE_TIMEOUT;
        loop {
            let attempt = async {
                let token = self
                    .relayctl(&[
                        "token", "create", "--role", role, "--name", name, "--parent", parent,
                    ])
                    .await?;
                run_logged(
                    Command::new(self.binary(binary))
                        .arg("join")
                        .arg("--data-dir")
                        .arg(self.data_dir(name))
                        .args(["--name", name])
                        .env("RELAYMESH_TOKEN", token.trim())
                        .args(extra),
                    &self.log(name),
                )
                .await
            };
            match attempt.await {
                Ok(_) => return Ok(()),
                Err(error) if Instant::now() < deadline => {
                    info!(node = name, error = %format!("{error:#}"), "join failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => return Err(error.context(format!("cannot join {name}"))),
            }
        }
    }

    /// Waits until `relayctl tree` answers and shows each of `names`
    /// connected under its planned parent.
    async fn wait_connected(&self, what: &str, names: &[String]) -> anyhow::Result<()> {
        let deadline = Instant::now() + STAGE_TIMEOUT;
        let parents: BTreeMap<&str, &str> = self
            .plan
            .relays
            .iter()
            .map(|r| (r.name.as_str(), r.parent.as_str()))
            .chain(
                self.plan
                    .agents
                    .iter()
                    .map(|a| (a.name.as_str(), a.parent.as_str())),
            )
            .collect();
        let mut missing = names.to_vec();
        loop {
            if let Ok(text) = self.relayctl(&["tree", "-o", "json"]).await {
                let tree: Value = serde_json::from_str(&text).unwrap_or_default();
                let connected = connected_nodes(&tree);
                missing.retain(|name| {
                    connected.get(name.as_str()).copied().flatten()
                        != parents.get(name.as_str()).copied()
                });
                if missing.is_empty() && tree.is_object() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "{what}: not connected after {STAGE_TIMEOUT:?}: {missing:?} (logs in {})",
                    self.dir.join("logs").display()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn agent_takes_kubeconfig(&self) -> bool {
        let help = Command::new(self.binary("edge-agent"))
            .args(["join", "--help"])
            .output()
            .await;
        help.is_ok_and(|output| String::from_utf8_lossy(&output.stdout).contains("--kubeconfig"))
    }
}

/// Every connected node of a `relayctl tree -o json` tree, with its
/// parent's name (`None` for the root).
pub fn connected_nodes(tree: &Value) -> BTreeMap<&str, Option<&str>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![(tree, None)];
    while let Some((node, parent)) = stack.pop() {
        let Some(name) = node["name"].as_str() else {
            continue;
        };
        if parent.is_none() || node["connected"] == true {
            found.insert(name, parent);
        }
        for child in node["children"].as_array().into_iter().flatten() {
            stack.push((child, Some(name)));
        }
    }
    found
}

/// Hands out ports: consecutive from a base, or free ones (see
/// [`crate::ports`]) if the base is 0.
struct Ports {
    next: u16,
}

impl Ports {
    fn new(base: u16) -> Self {
        Self { next: base }
    }

    fn tcp(&mut self) -> anyhow::Result<u16> {
        if self.next == 0 {
            return Ok(crate::ports::tcp()?);
        }
        self.take()
    }

    fn udp(&mut self) -> anyhow::Result<u16> {
        if self.next == 0 {
            return Ok(crate::ports::udp()?);
        }
        self.take()
    }

    fn take(&mut self) -> anyhow::Result<u16> {
        let port = self.next;
        self.next = self
            .next
            .checked_add(1)
            .context("ran out of ports above --base-port")?;
        Ok(port)
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub use relaymesh_node::daemon::shutdown_signal;

/// A `kube` client for the API server and credentials in the kubeconfig at
/// `path` (the root's, or a simulated cluster's).
pub async fn kube_client(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .with_context(|| format!("cannot use {}", path.display()))?;
    Ok(kube::Client::try_from(config)?)
}
