//! Hollow agents: `testbed up --hollow N` runs the fleet's N edge agents
//! inside the testbed's own process (as kubemark's hollow nodes do for
//! kubelets), so a fleet of thousands fits on one machine.
//!
//! Each hollow agent is a whole edge agent from the `edge-agent` crate
//! ([`relaymesh_edge_agent::agent`]): its own join token, key and
//! certificate, its own QUIC connection to its parent relay, its own core,
//! store and reconciler. What it shares with the others: a UDP socket (a
//! QUIC client endpoint) per 256 agents, the tokio runtime, and the
//! discovery documents of
//! the [`HollowCluster`]s it applies to. Its store is a temporary sled
//! store ([`Store::temporary`]), gone when the testbed stops, and its
//! cluster a [`HollowCluster`] in memory instead of a simulated API server
//! on a socket. The relays stay real processes.
//!
//! An agent can be stopped abruptly and started again ([`HollowAgents::stop`],
//! [`HollowAgents::restart`]), as `testbed chaos` does: its task is aborted
//! (its connection dropped, nothing said to its parent) and a new one runs
//! from the same store, which keeps its identity and certificate. The store
//! outlives the stop, since dropping a temporary store deletes it; what the
//! agent wrote to it before the stop is all there (an in-process stop is not
//! a power cut: sled's page cache survives it).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use relaymesh_edge_agent::agent::{self, AgentError};
use relaymesh_edge_agent::cluster::detect_labels;
use relaymesh_edge_agent::policy::Policy;
use relaymesh_node::daemon::RunOptions;
use relaymesh_node::store::Store;
use relaymesh_node::transport::uplink::Endpoints;
use relaymesh_protocol::Role;
use relaymesh_root::client::Client;
use relaymesh_root::kubeconfig;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn, Instrument as _};

use super::counting::{counting_endpoint, SentBytes};
use super::plan::AgentPlan;
use crate::cluster::SimulatorOptions;
use crate::hollow::{Discovery, HollowCluster};

/// Joins worked on at once. A relay answers 16 at a time by default; the
/// agents are spread over several relays.
const JOIN_CONCURRENCY: usize = 32;

/// How many hollow agents share one QUIC client endpoint (UDP socket).
const AGENTS_PER_ENDPOINT: usize = 256;

/// How long one agent keeps trying to join (a relay refuses joins past its
/// limits with "retry in …", which is worth waiting for).
const JOIN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a join token issued for a hollow agent lasts.
const TOKEN_TTL: Duration = Duration::from_secs(600);

/// The running hollow agents and their clusters.
pub struct HollowAgents {
    clusters: BTreeMap<String, HollowCluster>,
    /// What it takes to stop and restart each agent.
    agents: BTreeMap<String, Agent>,
    shutdown: CancellationToken,
    tasks: JoinSet<(String, Result<(), AgentError>)>,
    sent: Vec<SentBytes>,
}

/// One agent's store, endpoints and, while it runs, how to stop it.
struct Agent {
    store: Store,
    endpoints: Endpoints,
    running: Option<Running>,
}

/// A running agent's task.
struct Running {
    /// Stops the agent's reconciler, which `agent::run` spawns as a task of
    /// its own that aborting the agent's task would leave behind.
    stop: CancellationToken,
    task: AbortHandle,
}

impl std::fmt::Debug for HollowAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HollowAgents")
            .field("agents", &self.clusters.len())
            .finish_non_exhaustive()
    }
}

impl HollowAgents {
    /// Joins every agent of `agents` below its planned parent with a token
    /// from the root whose admin kubeconfig is `root_kubeconfig`, and runs
    /// it against a new [`HollowCluster`] behaving as `simulator` says.
    /// The relays must be up.
    pub async fn start(
        agents: &[AgentPlan],
        root_kubeconfig: &Path,
        simulator: &SimulatorOptions,
    ) -> anyhow::Result<Self> {
        let credentials = kubeconfig::load_file(root_kubeconfig, None)
            .with_context(|| format!("cannot read {}", root_kubeconfig.display()))?;
        let root = Client::new(&credentials).context("cannot use the root's kubeconfig")?;
        // A few client endpoints shared by all agents: a UDP socket and its
        // buffers per AGENTS_PER_ENDPOINT agents instead of one per agent,
        // and more than one, since one endpoint's driver is one task that
        // handles every packet of its connections.
        let pool = agents.len().div_ceil(AGENTS_PER_ENDPOINT).max(1);
        let mut endpoints = Vec::with_capacity(pool);
        let mut sent = Vec::with_capacity(pool);
        for _ in 0..pool {
            let (endpoint, counter) =
                counting_endpoint().context("cannot open the hollow agents' QUIC endpoints")?;
            endpoints.push(Endpoints::with_endpoint(endpoint)?);
            sent.push(counter);
        }
        let discovery = Arc::new(Discovery::builtin());
        let mut hollow = Self {
            clusters: BTreeMap::new(),
            agents: BTreeMap::new(),
            shutdown: CancellationToken::new(),
            tasks: JoinSet::new(),
            sent,
        };
        let started = Instant::now();
        let mut joins = futures::stream::iter(agents.iter().enumerate().map(|(index, plan)| {
            let cluster = HollowCluster::new(&plan.name, simulator.clone(), discovery.clone());
            let root = &root;
            let endpoints = endpoints[index % pool].clone();
            async move {
                let store = join(root, plan, &cluster, endpoints.clone()).await?;
                anyhow::Ok((plan.name.clone(), cluster, store, endpoints))
            }
        }))
        .buffer_unordered(JOIN_CONCURRENCY);
        while let Some(joined) = joins.next().await {
            let (name, cluster, store, endpoints) = match joined {
                Ok(joined) => joined,
                Err(error) => {
                    drop(joins);
                    hollow.shutdown().await;
                    return Err(error);
                }
            };
            hollow.clusters.insert(name.clone(), cluster);
            hollow.agents.insert(
                name.clone(),
                Agent {
                    store,
                    endpoints,
                    running: None,
                },
            );
            hollow.spawn(&name);
            if hollow.clusters.len().is_multiple_of(1000) {
                info!(
                    joined = hollow.clusters.len(),
                    elapsed = ?started.elapsed(),
                    "hollow agents joined"
                );
            }
        }
        Ok(hollow)
    }

    /// The hollow cluster of agent `name`.
    pub fn cluster(&self, name: &str) -> Option<&HollowCluster> {
        self.clusters.get(name)
    }

    /// Every hollow cluster, by agent name.
    pub fn clusters(&self) -> &BTreeMap<String, HollowCluster> {
        &self.clusters
    }

    /// Every agent's store, by agent name.
    pub fn stores(&self) -> impl Iterator<Item = (&str, &Store)> {
        self.agents
            .iter()
            .map(|(name, agent)| (name.as_str(), &agent.store))
    }

    /// UDP payload bytes every agent sent so far (QUIC packets, keep-alives
    /// and handshakes included), from their sockets' counters.
    pub fn bytes_sent(&self) -> u64 {
        self.sent.iter().map(SentBytes::get).sum()
    }

    /// How many agents run.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Agents whose task ended since the last call, with why; a hollow
    /// agent only ends on its own when it fails (one stopped with
    /// [`HollowAgents::stop`] is not reported).
    pub fn newly_exited(&mut self) -> Vec<(String, String)> {
        let mut exited = Vec::new();
        while let Some(done) = self.tasks.try_join_next() {
            match done {
                Ok((name, Ok(()))) => exited.push((name, "stopped".to_string())),
                Ok((name, Err(error))) => exited.push((name, format!("{error:#}"))),
                Err(error) if error.is_cancelled() => {}
                Err(error) => exited.push(("?".to_string(), error.to_string())),
            }
        }
        exited
    }

    /// Whether agent `name` runs (it may still be connecting).
    pub fn is_running(&self, name: &str) -> bool {
        self.agents.get(name).is_some_and(|agent| {
            agent
                .running
                .as_ref()
                .is_some_and(|r| !r.task.is_finished())
        })
    }

    /// Stops agent `name` abruptly: its task is aborted, so its connection
    /// is dropped mid-whatever it was doing, without a goodbye. Its store
    /// and cluster stay. `false` if it was not running.
    pub fn stop(&mut self, name: &str) -> Result<bool, HollowError> {
        let agent = self
            .agents
            .get_mut(name)
            .ok_or_else(|| HollowError::Unknown(name.to_string()))?;
        let Some(running) = agent.running.take() else {
            return Ok(false);
        };
        // Aborting first: the agent's task is dropped at its next poll and
        // never runs its orderly shutdown; the token then stops the
        // reconciler task it spawned.
        running.task.abort();
        running.stop.cancel();
        info!(agent = name, "hollow agent stopped");
        Ok(true)
    }

    /// Starts agent `name` again from its store after [`HollowAgents::stop`]
    /// (or after it failed). `false` if it was running.
    pub fn restart(&mut self, name: &str) -> Result<bool, HollowError> {
        if !self.agents.contains_key(name) {
            return Err(HollowError::Unknown(name.to_string()));
        }
        if self.is_running(name) {
            return Ok(false);
        }
        self.spawn(name);
        info!(agent = name, "hollow agent restarted");
        Ok(true)
    }

    /// Stops every agent and waits for them.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        while let Some(done) = self.tasks.join_next().await {
            if let Ok((name, Err(error))) = done {
                warn!(agent = %name, error = %format!("{error:#}"), "hollow agent failed");
            }
        }
    }

    /// Runs agent `name` (known to `agents` and `clusters`) from its store.
    fn spawn(&mut self, name: &str) {
        let (Some(agent), Some(cluster)) = (self.agents.get_mut(name), self.clusters.get(name))
        else {
            return;
        };
        let options = RunOptions {
            endpoints: agent.endpoints.clone(),
            ..RunOptions::default()
        };
        let store = agent.store.clone();
        let client = cluster.client();
        let shutdown = self.shutdown.child_token();
        let stop = shutdown.clone();
        let name = name.to_string();
        let span = tracing::info_span!("hollow", agent = %name);
        let task = self.tasks.spawn(
            async move {
                let result = agent::run(
                    Path::new(&name),
                    store,
                    Some(client),
                    Policy::default(),
                    shutdown,
                    options,
                )
                .await;
                (name, result)
            }
            .instrument(span),
        );
        agent.running = Some(Running { stop, task });
    }
}

/// Why a hollow agent could not be stopped or restarted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HollowError {
    /// No hollow agent has this name.
    #[error("no hollow agent named {0}")]
    Unknown(String),
}

/// Joins one hollow agent: a token from the root, the cluster's detected
/// labels added to its planned ones (as `edge-agent join` does), and the
/// join itself, retried while its relay refuses it for a while.
async fn join(
    root: &Client,
    plan: &AgentPlan,
    cluster: &HollowCluster,
    mut endpoints: Endpoints,
) -> anyhow::Result<Store> {
    let mut labels = plan.labels.clone();
    let detected = detect_labels(&cluster.client())
        .await
        .with_context(|| format!("hollow cluster {}: cannot read its version", plan.name))?;
    for (key, value) in detected {
        labels.entry(key).or_insert(value);
    }
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        let attempt = async {
            let token = root
                .create_token(
                    &plan.name,
                    Role::Agent,
                    std::slice::from_ref(&plan.parent),
                    TOKEN_TTL,
                )
                .await?;
            let store = Store::temporary(&plan.name)?;
            agent::join(
                &store,
                &plan.name,
                &token.token,
                labels.clone(),
                Default::default(),
                &mut endpoints,
            )
            .await?;
            anyhow::Ok(store)
        };
        match attempt.await {
            Ok(store) => return Ok(store),
            Err(error) if Instant::now() < deadline => {
                info!(agent = %plan.name, error = %format!("{error:#}"), "hollow join failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => {
                bail!("cannot join hollow agent {}: {error:#}", plan.name)
            }
        }
    }
}
