//! The daemons of a local fleet as child processes: each with its log file,
//! stopped with SIGTERM in the reverse order of their start.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::process::{Child, Command};
use tracing::{info, warn};

/// How long a daemon may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// `relay run`'s connection and join limits in a local fleet, unless the
/// caller's environment sets them. Every node of the fleet dials from
/// 127.0.0.1, and hollow fleets put tens of thousands of agents under a
/// few relays (a flat star puts them all under the root), so the limits are
/// far above any fleet this machine can hold.
const FLEET_LIMITS: [(&str, &str); 3] = [
    ("RELAYMESH_MAX_CONNECTIONS", "200000"),
    ("RELAYMESH_MAX_CONNECTIONS_PER_ADDRESS", "200000"),
    ("RELAYMESH_MAX_JOINS_PER_MINUTE_PER_ADDRESS", "1000000"),
];

/// A local fleet runs one release, so its root compresses bundles (`relay
/// run --bundle-encoding`; only the root reads it). Set the variable to
/// `json` to run a fleet as a root of the previous release would.
const FLEET_BUNDLE_ENCODING: (&str, &str) = ("RELAYMESH_BUNDLE_ENCODING", "zstd");

/// One running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// The node's name.
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    stage: usize,
    binary: PathBuf,
    data_dir: PathBuf,
    /// More arguments of `run`, given again on a restart.
    run_args: Vec<String>,
    child: Child,
    exited: bool,
}

/// The daemons, in the order they started.
#[derive(Debug, Default)]
pub struct Daemons {
    running: Vec<Daemon>,
}

impl Daemons {
    /// Starts `binary run --data-dir DATA_DIR RUN_ARGS…`, with stdout and
    /// stderr appended to `log`. `stage` orders shutdown: higher stages stop
    /// first.
    pub fn start(
        &mut self,
        stage: usize,
        name: &str,
        binary: &Path,
        data_dir: &Path,
        run_args: &[String],
        log: &Path,
    ) -> anyhow::Result<()> {
        let child = spawn(binary, data_dir, run_args, log)?;
        info!(node = name, pid = child.id(), "daemon started");
        self.running.push(Daemon {
            name: name.to_string(),
            log: log.to_path_buf(),
            stage,
            binary: binary.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            run_args: run_args.to_vec(),
            child,
            exited: false,
        });
        Ok(())
    }

    /// Kills daemon `name` with SIGKILL (no chance to flush or say goodbye,
    /// as a power cut or the OOM killer would) and reaps it.
    pub async fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let daemon = self.find(name)?;
        daemon
            .child
            .kill()
            .await
            .with_context(|| format!("cannot kill {name}"))?;
        daemon.exited = true;
        info!(node = name, "daemon killed");
        Ok(())
    }

    /// Starts daemon `name` again from its data directory after it was
    /// killed or exited; an error if it still runs.
    pub fn restart(&mut self, name: &str) -> anyhow::Result<()> {
        let daemon = self.find(name)?;
        if !daemon.exited && daemon.child.try_wait()?.is_none() {
            bail!("{name} still runs");
        }
        daemon.child = spawn(
            &daemon.binary,
            &daemon.data_dir,
            &daemon.run_args,
            &daemon.log,
        )?;
        daemon.exited = false;
        info!(node = name, pid = daemon.child.id(), "daemon restarted");
        Ok(())
    }

    fn find(&mut self, name: &str) -> anyhow::Result<&mut Daemon> {
        self.running
            .iter_mut()
            .find(|daemon| daemon.name == name)
            .with_context(|| format!("no daemon named {name} in this fleet"))
    }

    /// The running daemons' names and process ids.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.running
            .iter()
            .filter(|daemon| !daemon.exited)
            .filter_map(|daemon| Some((daemon.name.clone(), daemon.child.id()?)))
            .collect()
    }

    /// The daemons that exited since the last call, with how.
    pub fn newly_exited(&mut self) -> Vec<(String, String, PathBuf)> {
        let mut exited = Vec::new();
        for daemon in self.running.iter_mut().filter(|daemon| !daemon.exited) {
            match daemon.child.try_wait() {
                Ok(Some(status)) => {
                    daemon.exited = true;
                    exited.push((daemon.name.clone(), status.to_string(), daemon.log.clone()));
                }
                Ok(None) => {}
                Err(error) => warn!(node = %daemon.name, %error, "cannot poll a daemon"),
            }
        }
        exited
    }

    /// Stops every daemon, the latest stage first (agents, then the
    /// deepest relays, …, the root last): SIGTERM to a whole stage, then
    /// waiting for each of its daemons.
    pub async fn stop_all(&mut self) {
        while let Some(stage) = self.running.iter().map(|daemon| daemon.stage).max() {
            let (batch, rest): (Vec<Daemon>, Vec<Daemon>) = std::mem::take(&mut self.running)
                .into_iter()
                .partition(|daemon| daemon.stage == stage);
            self.running = rest;
            for daemon in &batch {
                terminate(daemon);
            }
            for mut daemon in batch {
                wait(&mut daemon).await;
            }
        }
    }
}

fn terminate(daemon: &Daemon) {
    if daemon.exited {
        return;
    }
    let Some(pid) = daemon.child.id() else {
        // Already reaped.
        return;
    };
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if let Err(error) = rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
        // ESRCH: it exited on its own (Ctrl-C reaches the whole process group).
        if error != rustix::io::Errno::SRCH {
            warn!(node = %daemon.name, %error, "cannot send SIGTERM");
        }
    }
}

async fn wait(daemon: &mut Daemon) {
    match tokio::time::timeout(STOP_TIMEOUT, daemon.child.wait()).await {
        Ok(Ok(status)) if status.success() => info!(node = %daemon.name, "daemon stopped"),
        Ok(Ok(status)) => warn!(node = %daemon.name, %status, "daemon stopped with an error"),
        Ok(Err(error)) => warn!(node = %daemon.name, %error, "cannot wait for a daemon"),
        Err(_) => {
            warn!(node = %daemon.name, "daemon ignored SIGTERM; killing it");
            let _ = daemon.child.kill().await;
        }
    }
}

/// Spawns `binary run --data-dir DATA_DIR RUN_ARGS…` with the fleet's
/// limits, its output appended to `log`.
fn spawn(binary: &Path, data_dir: &Path, run_args: &[String], log: &Path) -> anyhow::Result<Child> {
    let mut command = Command::new(binary);
    command
        .arg("run")
        .arg("--data-dir")
        .arg(data_dir)
        .args(run_args);
    // Every node of a local fleet dials from 127.0.0.1, so the relays'
    // per-address limits would count the whole fleet as one attacker:
    // raise them (an edge agent ignores these).
    for (variable, value) in FLEET_LIMITS.into_iter().chain([FLEET_BUNDLE_ENCODING]) {
        if std::env::var_os(variable).is_none() {
            command.env(variable, value);
        }
    }
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "info");
    }
    command
        .stdin(Stdio::null())
        .stdout(append(log)?)
        .stderr(append(log)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))
}

/// `log` opened for appending, for a child's stdout or stderr.
pub fn append(log: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))
}

/// Runs a short command to completion, its output appended to `log`;
/// returns its stdout.
pub async fn run_logged(command: &mut Command, log: &Path) -> anyhow::Result<String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {command:?}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !stderr.is_empty() {
        use std::io::Write as _;
        let _ = append(log)?.write_all(stderr.as_bytes());
    }
    if !output.status.success() {
        bail!("{command:?} failed ({}): {}", output.status, stderr.trim());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
