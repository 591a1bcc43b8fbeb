//! `testbed bench failover`: how long a fleet goes without its root when
//! the leading replica dies. A fleet on a 3-member etcd cluster with 3 root
//! replicas (`testbed up --etcd-members 3 --root-replicas 3`) and hollow
//! agents runs a Deployment everywhere. Then, again and again, the leading
//! replica is killed with SIGKILL and at once the Deployment's image is
//! changed through the other replicas. Per kill it times, from the kill:
//! the change accepted (a 2xx from any replica), another replica leading,
//! and every cluster running the new image. The killed replica is started
//! again (as a standby) before the next kill.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use super::report::{quantile, Figure, Report};
use super::root::place_deployment_everywhere;
use crate::up::{kube_client, Fleet, UpOptions};

/// The namespace the benchmark's objects live in.
const NAMESPACE: &str = "failover";
/// The Deployment (and Placement) every cluster runs.
const WORKLOAD: &str = "web";
/// How often the fleet is looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// What to run.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// How many times the leader is killed.
    pub kills: usize,
    /// Hollow agents.
    pub agents: usize,
    /// Relays under each relay of the level above.
    pub relays_per_level: Vec<usize>,
    /// Where the fleet lives.
    pub dir: PathBuf,
    /// Where the `relay` and `relayctl` binaries are.
    pub bin_dir: PathBuf,
    /// How long each wait may take.
    pub timeout: Duration,
}

/// Seconds from each kill until each step.
#[derive(Debug, Clone, Default)]
pub struct FailoverRun {
    /// Until the change was accepted.
    pub accepted: Vec<f64>,
    /// Until another replica held the leader key.
    pub led: Vec<f64>,
    /// Until every cluster ran the change.
    pub delivered: Vec<f64>,
}

/// Brings up the fleet, runs the benchmark, stops the fleet.
pub async fn run_fleet(options: &FailoverOptions) -> anyhow::Result<FailoverRun> {
    let mut up = UpOptions::fresh(
        options.dir.join("failover"),
        options.relays_per_level.clone(),
        options.agents,
        true,
        options.bin_dir.clone(),
    )?;
    up.etcd_members = 3;
    up.root_replicas = 3;
    println!(
        "failover | bringing up 3 root replicas on etcd and {} hollow agents",
        options.agents
    );
    let mut fleet = Fleet::start(&up).await?;
    let result = measure(&mut fleet, options).await;
    fleet.shutdown().await;
    result
}

async fn measure(fleet: &mut Fleet, options: &FailoverOptions) -> anyhow::Result<FailoverRun> {
    let mut deployments = BTreeMap::new();
    for replica in fleet.root_replicas() {
        let client = kube_client(&fleet.replica_kubeconfig(&replica.name)).await?;
        deployments.insert(
            replica.name.clone(),
            Api::<Deployment>::namespaced(client, NAMESPACE),
        );
    }
    place_deployment_everywhere(&fleet.root_client().await?, NAMESPACE, WORKLOAD).await?;
    wait_everywhere(fleet, "nginx:1.27", options.timeout).await?;
    let mut run = FailoverRun::default();
    for kill in 1..=options.kills {
        let leader = wait_leader(fleet, None, options.timeout).await?;
        let image = format!("nginx:2.{kill}");
        let started = Instant::now();
        fleet.kill_daemon(&leader).await?;
        let others: Vec<_> = deployments
            .iter()
            .filter(|(name, _)| **name != leader)
            .map(|(_, api)| api.clone())
            .collect();
        change_image(&others, &image, options.timeout).await?;
        run.accepted.push(started.elapsed().as_secs_f64());
        let next = wait_leader(fleet, Some(&leader), options.timeout).await?;
        run.led.push(started.elapsed().as_secs_f64());
        wait_everywhere(fleet, &image, options.timeout).await?;
        run.delivered.push(started.elapsed().as_secs_f64());
        println!(
            "failover | kill {kill}: {leader} → {next}, delivered everywhere after {:.2} s",
            started.elapsed().as_secs_f64()
        );
        fleet.restart_daemon(&leader)?;
        let api = deployments.get(&leader).context("the killed replica")?;
        wait_answers(api, options.timeout).await?;
    }
    Ok(run)
}

/// The replica leading, once one does that is not `not`.
async fn wait_leader(
    fleet: &Fleet,
    not: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(leader) = fleet.root_leader()? {
            if Some(leader.as_str()) != not {
                return Ok(leader);
            }
        }
        if Instant::now() > deadline {
            bail!("no new leader after {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Changes the Deployment's image through the first of `apis` that
/// accepts it.
async fn change_image(
    apis: &[Api<Deployment>],
    image: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": WORKLOAD, "image": image}
    ]}}}});
    let deadline = Instant::now() + timeout;
    loop {
        for api in apis {
            let patched = api
                .patch(WORKLOAD, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            if patched.is_ok() {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("no replica accepted the change within {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until every hollow cluster runs `image`.
async fn wait_everywhere(fleet: &Fleet, image: &str, timeout: Duration) -> anyhow::Result<()> {
    let hollow = fleet.hollow().context("the fleet has no hollow agents")?;
    let deadline = Instant::now() + timeout;
    loop {
        let behind = hollow
            .clusters()
            .values()
            .filter(|cluster| {
                cluster
                    .object("apps", "deployments", Some(NAMESPACE), WORKLOAD)
                    .and_then(|object| {
                        object["spec"]["template"]["spec"]["containers"][0]["image"]
                            .as_str()
                            .map(|found| found == image)
                    })
                    != Some(true)
            })
            .count();
        if behind == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{behind} clusters do not run {image} after {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until a restarted replica's API answers.
async fn wait_answers(api: &Api<Deployment>, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while api.get(WORKLOAD).await.is_err() {
        if Instant::now() > deadline {
            bail!("a restarted replica does not answer after {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// The `failover` report of `run`.
pub fn report(options: &FailoverOptions, run: &FailoverRun) -> Report {
    let mut report = Report::new(
        "failover",
        json!({"agents": options.agents, "relaysPerLevel": options.relays_per_level,
            "kills": run.delivered.len(), "rootReplicas": 3, "etcdMembers": 3}),
    );
    report.description = format!(
        "3 root replicas on a 3-member etcd cluster, {} hollow agents below relays (per level \
         {:?}). {} times, the leading replica is killed with SIGKILL and at once a Deployment \
         placed everywhere gets a new image through the other replicas; each step is timed from \
         the kill.",
        options.agents,
        options.relays_per_level,
        run.delivered.len()
    );
    let (mut accepted, mut led, mut delivered) =
        (run.accepted.clone(), run.led.clone(), run.delivered.clone());
    report.figure(Figure::new(
        "kill to change accepted, max",
        quantile(&mut accepted, 1.0),
        "s",
    ));
    report.figure(Figure::new(
        "kill to a new leader, median",
        quantile(&mut led, 0.5),
        "s",
    ));
    report.figure(Figure::new(
        "kill to change on every cluster, median",
        quantile(&mut delivered, 0.5),
        "s",
    ));
    report.figure(
        Figure::new(
            "kill to change on every cluster, max",
            quantile(&mut delivered, 1.0),
            "s",
        )
        .with_goal("under 10 s", |v| v < 10.0),
    );
    report
}
