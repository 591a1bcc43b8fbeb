//! `testbed chaos`: a fleet of relay processes and hollow agents, and for a
//! while random faults and changes at once: relays killed with SIGKILL and
//! restarted later, relays' uplinks partitioned and healed later, batches
//! of hollow agents stopped abruptly and restarted later, and placements
//! and workloads created, changed and deleted at the root. Then everything
//! is healed and restarted, and the run waits until every cluster holds
//! exactly what its placements select, with the latest content, and
//! nothing else of the run's workloads ([`model`]).
//!
//! What is not faulted: the root (it holds the API the changes go
//! through), and the links between agents and their relays (agents are
//! stopped instead; a relay's uplink runs through a fault proxy, see
//! [`UpOptions::proxied_uplinks`]). A hollow agent's stop is abrupt for
//! its connection but keeps its store's unflushed writes, unlike a power
//! cut; relays' kills are real SIGKILLs.
//!
//! Every random choice comes from one seeded generator. A seed gives the
//! same draws; which actions they become also depends on timing (how many
//! fit in the duration, whether half the relays are down at a kill), so
//! two runs of one seed share a prefix, not always the whole sequence.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::bench::fleet::SplitMix;
use crate::cluster::SimulatorOptions;
use crate::up::{Fleet, UpOptions};

pub mod model;

use model::{Change, ClusterDiff, Kind, Model};

/// The namespace of the run's workloads and placements at the root.
pub const NAMESPACE: &str = "chaos";

/// The field manager of the run's server-side applies.
const FIELD_MANAGER: &str = "testbed-chaos";

/// How often the clusters are compared while waiting for convergence.
const POLL: Duration = Duration::from_secs(2);

/// How many times a change at the root is tried before the run fails (the
/// root is never faulted, so a failure is not expected).
const ROOT_ATTEMPTS: usize = 5;

/// How many clusters that did not converge the summary names.
const LISTED_DIFFERENCES: usize = 20;

/// What to run.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// How long faults and changes go on.
    pub duration: Duration,
    /// Hollow agents.
    pub agents: usize,
    /// Relays under each relay of the level above.
    pub relays_per_level: Vec<usize>,
    /// Seeds every random choice.
    pub seed: u64,
    /// The fleet's directory, made ready by [`crate::up::prepare_dir`].
    pub dir: PathBuf,
    /// Where the `relay`, `relayctl` and `edge-agent` binaries are.
    pub bin_dir: PathBuf,
    /// How long the clusters may take to converge once all is healed.
    pub settle_timeout: Duration,
    /// The shortest and longest pause between two actions.
    pub pause: (Duration, Duration),
}

/// One action taken.
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    /// Seconds since the actions began.
    pub at_seconds: f64,
    /// What kind (`kill-relay`, `partition`, `apply-placement`, …).
    pub kind: &'static str,
    /// On what, and how.
    pub detail: String,
}

/// What a run did and found.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosSummary {
    /// The seed.
    pub seed: u64,
    /// Seconds of actions.
    pub duration_seconds: f64,
    /// Hollow agents (clusters).
    pub agents: usize,
    /// Relays below the root.
    pub relays: usize,
    /// Actions by kind.
    pub actions_by_kind: BTreeMap<&'static str, u64>,
    /// Every action, in order.
    pub actions: Vec<Action>,
    /// Placements that existed at the end.
    pub final_placements: usize,
    /// Workloads that existed at the end.
    pub final_workloads: usize,
    /// Objects desired over all clusters at the end.
    pub desired_objects: usize,
    /// Clusters compared.
    pub clusters_checked: usize,
    /// Whether every cluster held exactly its desired objects.
    pub converged: bool,
    /// Seconds from the end of the actions (everything healed) until
    /// convergence, or until the run gave up.
    pub settle_seconds: f64,
    /// The clusters that did not converge, with how they differ.
    pub differences: BTreeMap<String, ClusterDiff>,
    /// Daemons and hollow agents that stopped on their own during the run,
    /// with why (none is expected: each is a finding).
    pub unexpected_exits: Vec<String>,
}

/// Something to undo later.
#[derive(Debug, Clone)]
enum Recovery {
    RestartRelay(String),
    Heal(String),
    RestartAgents(Vec<String>),
}

/// Brings a fleet up in `options.dir`, which [`crate::up::prepare_dir`] made
/// ready, runs the chaos, waits for convergence and stops the fleet. An
/// error means the run could not be carried out; whether the fleet
/// converged is in the summary.
pub async fn run(options: &ChaosOptions) -> anyhow::Result<ChaosSummary> {
    let up = UpOptions {
        relays_per_level: options.relays_per_level.clone(),
        agents: options.agents,
        hollow: true,
        dir: options.dir.clone(),
        base_port: 0,
        ready_file: None,
        bin_dir: options.bin_dir.clone(),
        simulator: SimulatorOptions::default(),
        proxied_uplinks: true,
        etcd_members: 0,
        root_replicas: 1,
    };
    let mut fleet = Fleet::start(&up).await?;
    let result = Chaos::new(&fleet, options).drive(&mut fleet).await;
    fleet.shutdown().await;
    result
}

/// The run's state.
struct Chaos<'a> {
    options: &'a ChaosOptions,
    rng: SplitMix,
    model: Model,
    relays: Vec<String>,
    agents: Vec<String>,
    killed: BTreeSet<String>,
    partitioned: BTreeSet<String>,
    stopped: BTreeSet<String>,
    recoveries: Vec<(Instant, Recovery)>,
    actions: Vec<Action>,
    unexpected_exits: Vec<String>,
    started: Instant,
}

impl<'a> Chaos<'a> {
    fn new(fleet: &Fleet, options: &'a ChaosOptions) -> Self {
        Self {
            options,
            rng: SplitMix(options.seed),
            model: Model::default(),
            relays: fleet.plan.relays.iter().map(|r| r.name.clone()).collect(),
            agents: fleet.plan.agents.iter().map(|a| a.name.clone()).collect(),
            killed: BTreeSet::new(),
            partitioned: BTreeSet::new(),
            stopped: BTreeSet::new(),
            recoveries: Vec::new(),
            actions: Vec::new(),
            unexpected_exits: Vec::new(),
            started: Instant::now(),
        }
    }

    async fn drive(mut self, fleet: &mut Fleet) -> anyhow::Result<ChaosSummary> {
        let client = fleet.root_client().await?;
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
            )
            .await
            .context("cannot create the chaos namespace at the root")?;
        let root = Root::new(client);
        self.started = Instant::now();
        // Something placed from the start, so the first faults hit work
        // in flight.
        for _ in 0..4 {
            let change = self.model.workload_change(&mut self.rng);
            self.change(&root, change).await?;
        }
        let change = self
            .model
            .placement_change(&mut self.rng, &fleet.plan.agents);
        self.change(&root, change).await?;

        let end = self.started + self.options.duration;
        while Instant::now() < end {
            self.recover_due(fleet, false).await?;
            self.note_exits(fleet);
            self.act(fleet, &root).await?;
            let (shortest, longest) = self.options.pause;
            let spread = longest.saturating_sub(shortest).as_millis() as u64;
            let pause = shortest + Duration::from_millis(self.rng.below(spread + 1));
            // Paces the chaos (this is not a wait for anything to happen).
            tokio::time::sleep(pause.min(end.saturating_duration_since(Instant::now()))).await;
        }
        let actions_over = Instant::now();
        self.note_exits(fleet);
        self.recover_due(fleet, true).await?;
        // An agent that stopped on its own is started again too.
        if let Some(hollow) = fleet.hollow_mut() {
            for name in &self.agents {
                hollow.restart(name)?;
            }
        }
        info!("chaos over: everything healed and restarted; waiting for convergence");
        let (converged, differences) = self.wait_converged(fleet, actions_over).await;
        self.note_exits(fleet);
        Ok(self.summary(fleet, converged, differences, actions_over))
    }

    /// One random action.
    async fn act(&mut self, fleet: &mut Fleet, root: &Root) -> anyhow::Result<()> {
        let now = Instant::now();
        match self.rng.below(20) {
            0..=6 => {
                let change = self.model.workload_change(&mut self.rng);
                self.change(root, change).await?;
            }
            7..=10 => {
                let change = self
                    .model
                    .placement_change(&mut self.rng, &fleet.plan.agents);
                self.change(root, change).await?;
            }
            11..=13 => {
                // At most half the relays down at once, so most of the tree
                // keeps working while some of it does not.
                let candidates: Vec<String> = self
                    .relays
                    .iter()
                    .filter(|name| !self.killed.contains(*name))
                    .cloned()
                    .collect();
                if self.killed.len() * 2 >= self.relays.len() || candidates.is_empty() {
                    return Ok(());
                }
                let name = candidates[self.rng.below(candidates.len() as u64) as usize].clone();
                fleet.kill_daemon(&name).await?;
                let after = self.delay(1, 15);
                self.killed.insert(name.clone());
                self.recoveries
                    .push((now + after, Recovery::RestartRelay(name.clone())));
                self.record(
                    "kill-relay",
                    format!("{name} (SIGKILL; restart in {after:?})"),
                );
            }
            14..=16 => {
                let candidates: Vec<String> = self
                    .relays
                    .iter()
                    .filter(|name| !self.partitioned.contains(*name))
                    .cloned()
                    .collect();
                if candidates.is_empty() {
                    return Ok(());
                }
                let name = candidates[self.rng.below(candidates.len() as u64) as usize].clone();
                let uplink = fleet
                    .uplink(&name)
                    .with_context(|| format!("{name} has no fault proxy"))?;
                uplink.partition();
                let after = self.delay(3, 25);
                self.partitioned.insert(name.clone());
                self.recoveries
                    .push((now + after, Recovery::Heal(name.clone())));
                self.record("partition", format!("{name}'s uplink (heal in {after:?})"));
            }
            _ => {
                let hollow = fleet
                    .hollow_mut()
                    .context("the fleet has no hollow agents")?;
                let batch = 1 + self.rng.below((self.agents.len() / 10).max(1) as u64) as usize;
                let mut names = Vec::new();
                for _ in 0..batch {
                    let name = &self.agents[self.rng.below(self.agents.len() as u64) as usize];
                    if !self.stopped.contains(name) && hollow.stop(name)? {
                        self.stopped.insert(name.clone());
                        names.push(name.clone());
                    }
                }
                if names.is_empty() {
                    return Ok(());
                }
                let after = self.delay(2, 15);
                self.record(
                    "stop-agents",
                    format!(
                        "{} agents (restart in {after:?}): {}",
                        names.len(),
                        abbreviate(&names)
                    ),
                );
                self.recoveries
                    .push((now + after, Recovery::RestartAgents(names)));
            }
        }
        Ok(())
    }

    /// Undoes what is due (everything if `all`).
    async fn recover_due(&mut self, fleet: &mut Fleet, all: bool) -> anyhow::Result<()> {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.recoveries)
            .into_iter()
            .partition(|(at, _)| all || *at <= now);
        self.recoveries = later;
        for (_, recovery) in due {
            match recovery {
                Recovery::RestartRelay(name) => {
                    fleet.restart_daemon(&name)?;
                    self.killed.remove(&name);
                    self.record("restart-relay", name);
                }
                Recovery::Heal(name) => {
                    if let Some(uplink) = fleet.uplink(&name) {
                        uplink.heal();
                    }
                    self.partitioned.remove(&name);
                    self.record("heal", format!("{name}'s uplink"));
                }
                Recovery::RestartAgents(names) => {
                    let hollow = fleet
                        .hollow_mut()
                        .context("the fleet has no hollow agents")?;
                    for name in &names {
                        hollow.restart(name)?;
                        self.stopped.remove(name);
                    }
                    self.record(
                        "restart-agents",
                        format!("{} agents: {}", names.len(), abbreviate(&names)),
                    );
                }
            }
        }
        Ok(())
    }

    /// Makes `change` at the root and records it in the model.
    async fn change(&mut self, root: &Root, change: Change) -> anyhow::Result<()> {
        let (kind, detail) = match &change {
            Change::ApplyWorkload(name, workload) => {
                let manifest = model::workload_manifest(NAMESPACE, name, workload);
                root.apply(root.api(workload.kind), name, &manifest).await?;
                (
                    "apply-workload",
                    format!("{name} at r{}", workload.revision),
                )
            }
            Change::DeleteWorkload(name) => {
                let kind = self
                    .model
                    .workloads
                    .get(name)
                    .map_or(Kind::ConfigMap, |w| w.kind);
                root.delete(root.api(kind), name).await?;
                ("delete-workload", name.clone())
            }
            Change::ApplyPlacement(group, choice) => {
                let name = model::placement_name(*group);
                let manifest = model::placement_manifest(NAMESPACE, *group, choice);
                root.apply(&root.placements, &name, &manifest).await?;
                ("apply-placement", format!("{name} on {choice}"))
            }
            Change::DeletePlacement(group) => {
                let name = model::placement_name(*group);
                root.delete(&root.placements, &name).await?;
                ("delete-placement", name)
            }
        };
        self.model.apply(&change);
        self.record(kind, detail);
        Ok(())
    }

    /// Waits until every cluster holds exactly its desired objects, or the
    /// settle timeout passes; the differences left if it does.
    async fn wait_converged(
        &self,
        fleet: &Fleet,
        since: Instant,
    ) -> (bool, BTreeMap<String, ClusterDiff>) {
        let deadline = since + self.options.settle_timeout;
        loop {
            let differences = self.differences(fleet);
            if differences.is_empty() {
                return (true, differences);
            }
            if Instant::now() >= deadline {
                warn!(
                    clusters = differences.len(),
                    "not converged by the settle timeout"
                );
                return (false, differences);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Every cluster that does not hold exactly what it should.
    fn differences(&self, fleet: &Fleet) -> BTreeMap<String, ClusterDiff> {
        let Some(hollow) = fleet.hollow() else {
            return BTreeMap::new();
        };
        fleet
            .plan
            .agents
            .iter()
            .filter_map(|agent| {
                let desired = self.model.desired(&agent.name, &agent.labels);
                let objects = hollow
                    .cluster(&agent.name)
                    .map(|cluster| cluster.objects_in(NAMESPACE))
                    .unwrap_or_default();
                let found = model::held(
                    objects
                        .iter()
                        .map(|(key, object)| (key.resource.as_str(), object)),
                );
                let diff = model::diff(&desired, &found);
                (!diff.is_empty()).then(|| (agent.name.clone(), diff))
            })
            .collect()
    }

    /// Notes daemons and hollow agents that stopped on their own.
    fn note_exits(&mut self, fleet: &mut Fleet) {
        for (name, status, log) in fleet.newly_exited_daemons() {
            warn!(node = %name, %status, log = %log.display(), "daemon exited on its own");
            self.unexpected_exits
                .push(format!("{name} exited ({status}); see {}", log.display()));
            // As a supervisor would: the run goes on with it back.
            match fleet.restart_daemon(&name) {
                Ok(()) => self.record("restart-relay", format!("{name} (had exited)")),
                Err(error) => warn!(node = %name, error = %format!("{error:#}"), "cannot restart"),
            }
        }
        if let Some(hollow) = fleet.hollow_mut() {
            for (name, why) in hollow.newly_exited() {
                warn!(agent = %name, %why, "hollow agent stopped on its own");
                self.unexpected_exits
                    .push(format!("hollow agent {name} stopped: {why}"));
            }
        }
    }

    fn record(&mut self, kind: &'static str, detail: String) {
        let at_seconds = self.started.elapsed().as_secs_f64();
        info!(kind, %detail, at = format!("{at_seconds:.1}s"), "chaos action");
        self.actions.push(Action {
            at_seconds,
            kind,
            detail,
        });
    }

    /// A random delay of `low` to `high` seconds, in tenths.
    fn delay(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low * 1000 + self.rng.below((high - low) * 10 + 1) * 100)
    }

    fn summary(
        self,
        fleet: &Fleet,
        converged: bool,
        differences: BTreeMap<String, ClusterDiff>,
        actions_over: Instant,
    ) -> ChaosSummary {
        let mut actions_by_kind = BTreeMap::new();
        for action in &self.actions {
            *actions_by_kind.entry(action.kind).or_default() += 1;
        }
        let desired_objects = fleet
            .plan
            .agents
            .iter()
            .map(|agent| self.model.desired(&agent.name, &agent.labels).len())
            .sum();
        ChaosSummary {
            seed: self.options.seed,
            duration_seconds: actions_over.duration_since(self.started).as_secs_f64(),
            agents: self.agents.len(),
            relays: self.relays.len(),
            actions_by_kind,
            actions: self.actions,
            final_placements: self.model.placements.len(),
            final_workloads: self.model.workloads.len(),
            desired_objects,
            clusters_checked: fleet.plan.agents.len(),
            converged,
            settle_seconds: actions_over.elapsed().as_secs_f64(),
            differences,
            unexpected_exits: self.unexpected_exits,
        }
    }
}

impl ChaosSummary {
    /// The summary as text for a terminal or docs.
    pub fn render(&self) -> String {
        let mut text = format!(
            "chaos: {:.0} s of actions on {} hollow agents below {} relays and the root (seed {})\n",
            self.duration_seconds, self.agents, self.relays, self.seed
        );
        let kinds: Vec<String> = self
            .actions_by_kind
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        text += &format!("actions: {} ({})\n", self.actions.len(), kinds.join(", "));
        text += &format!(
            "at the end: {} placements, {} workloads, {} objects desired over {} clusters\n",
            self.final_placements,
            self.final_workloads,
            self.desired_objects,
            self.clusters_checked
        );
        if self.converged {
            text += &format!(
                "converged: every cluster holds exactly its desired objects, {:.1} s after everything was healed and restarted\n",
                self.settle_seconds
            );
        } else {
            text += &format!(
                "NOT converged after {:.1} s: {} of {} clusters differ\n",
                self.settle_seconds,
                self.differences.len(),
                self.clusters_checked
            );
            for (name, diff) in self.differences.iter().take(LISTED_DIFFERENCES) {
                text += &format!("  {name}: {diff}\n");
            }
            if self.differences.len() > LISTED_DIFFERENCES {
                text += &format!(
                    "  … and {} more\n",
                    self.differences.len() - LISTED_DIFFERENCES
                );
            }
        }
        if self.unexpected_exits.is_empty() {
            text += "no daemon or agent stopped on its own\n";
        } else {
            text += "stopped on their own:\n";
            for exit in &self.unexpected_exits {
                text += &format!("  {exit}\n");
            }
        }
        text
    }
}

/// The root's API for the run's objects.
struct Root {
    configmaps: Api<DynamicObject>,
    deployments: Api<DynamicObject>,
    placements: Api<DynamicObject>,
}

impl Root {
    fn new(client: kube::Client) -> Self {
        let api = |group: &str, version: &str, kind: &str, plural: &str| {
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &resource)
        };
        Self {
            configmaps: api("", "v1", "ConfigMap", "configmaps"),
            deployments: api("apps", "v1", "Deployment", "deployments"),
            placements: api("relaymesh.dev", "v1alpha1", "Placement", "placements"),
        }
    }

    fn api(&self, kind: Kind) -> &Api<DynamicObject> {
        match kind {
            Kind::ConfigMap => &self.configmaps,
            Kind::Deployment => &self.deployments,
        }
    }

    /// Server-side apply of `manifest`, retried a few times.
    async fn apply(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        manifest: &serde_json::Value,
    ) -> anyhow::Result<()> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut attempt = 1;
        loop {
            match api.patch(name, &params, &Patch::Apply(manifest)).await {
                Ok(_) => return Ok(()),
                Err(error) if attempt < ROOT_ATTEMPTS => {
                    warn!(%name, %error, "apply at the root failed; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot apply {name} at the root"))
                }
            }
        }
    }

    /// Deletes `name`, retried a few times; already gone is done.
    async fn delete(&self, api: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
        let mut attempt = 1;
        loop {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                Err(error) if attempt < ROOT_ATTEMPTS => {
                    warn!(%name, %error, "delete at the root failed; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot delete {name} at the root"))
                }
            }
        }
    }
}

/// The first few names of a batch, for a log line.
fn abbreviate(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if names.len() > SHOWN {
        text += &format!(",… ({} more)", names.len() - SHOWN);
    }
    text
}
