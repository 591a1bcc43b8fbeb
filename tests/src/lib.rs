//! Helpers for relaymesh's end-to-end tests: build the binaries once, start
//! real `relay` processes on loopback with their own data directories, run
//! `relayctl`, and wait for the tree to settle.
//!
//! Tests here are slow by nature (real processes, real QUIC, real sled), so
//! they poll with deadlines instead of sleeping fixed amounts.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::Value;

pub mod chromium;
mod reader;

pub use reader::ApiReader;

/// The directory holding the workspace's built binaries, built on first use.
///
/// `scripts/test` builds everything before any test runs and says so with
/// `RELAYMESH_BINARIES_BUILT=1`; then this builds nothing. Otherwise it
/// runs `cargo test --no-run --workspace`, the build the test runners do
/// (every binary is in a package with integration tests, so it is among
/// them). Never `cargo build`: its units differ from `cargo test`'s, so
/// each undid the other's dependencies and the first test of every run
/// spent a minute or two rebuilding them (issue 30, docs/testing.md).
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut dir = DIR
        .lock()
        .map_err(|_| anyhow::anyhow!("a test panicked while building the binaries"))?;
    if let Some(dir) = dir.as_ref() {
        return Ok(dir.clone());
    }
    // The test binary lives in target/<profile>/deps.
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .context("cannot find the target directory")?
        .to_path_buf();
    if std::env::var_os("RELAYMESH_BINARIES_BUILT").is_none() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["test", "--no-run", "--quiet", "--workspace"])
            .status()
            .context("cannot run cargo test --no-run for the binaries")?;
        if !status.success() {
            bail!("building the binaries failed");
        }
    }
    *dir = Some(target.clone());
    Ok(target)
}

/// Runs relayctl with `kubeconfig`.
pub fn relayctl_as(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(binary("relayctl")?)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()?)
}

/// The directory holding `relay`, `relayctl` and `edge-agent` of the
/// release before this build's version, built once by
/// `scripts/previous-release` (docs/production.md, "Version skew").
pub fn previous_release() -> anyhow::Result<PathBuf> {
    bin_dir()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/previous-release");
    let output = Command::new(&script)
        .output()
        .context("scripts/previous-release")?;
    if !output.status.success() {
        bail!(
            "scripts/previous-release: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(PathBuf::from(dir))
}

/// `GET /metrics` on a node's `--metrics-listen` address: the body of its
/// `200` answer in Prometheus's text format, or `None` while nothing
/// listens there.
pub fn scrape_metrics(address: &str) -> anyhow::Result<Option<String>> {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return Ok(None);
    };
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: metrics\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .context("no HTTP header end")?;
    if !(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200")) {
        bail!("{address}: {head}");
    }
    if !head.contains("text/plain; version=0.0.4") {
        bail!("{address}: not Prometheus's text format: {head}");
    }
    observe(format_args!("{address}: {body}"));
    Ok(Some(body.to_string()))
}

/// The path of one of the workspace's binaries.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    Ok(bin_dir()?.join(name))
}

/// A free UDP port on 127.0.0.1 (for a relay's QUIC listener), from below
/// the ephemeral range so no client socket takes it before the relay binds it
/// (see [`relaymesh_testbed::ports`]).
pub fn free_udp_port() -> anyhow::Result<u16> {
    Ok(relaymesh_testbed::ports::udp()?)
}

/// A free TCP port on 127.0.0.1 (for the root's API); see [`free_udp_port`].
pub fn free_tcp_port() -> anyhow::Result<u16> {
    Ok(relaymesh_testbed::ports::tcp()?)
}

thread_local! {
    /// What the current thread's helpers last read from the system under
    /// test, for [`wait_for`]'s message when its deadline passes.
    static LAST_SEEN: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// How much of an observation a timeout message repeats.
const SEEN_LIMIT: usize = 4000;

/// Records what a probe saw, so that a [`wait_for`] that expires says what
/// the state was rather than only that it was wrong. The helpers here that
/// read state ([`Mesh::tree`], [`kubectl`], …) call it themselves; a probe
/// that computes something else can call it too.
pub fn observe(what: impl std::fmt::Display) {
    let mut text = what.to_string();
    if text.len() > SEEN_LIMIT {
        let mut end = SEEN_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" …");
    }
    LAST_SEEN.with(|seen| *seen.borrow_mut() = Some(text));
}

/// Polls `probe` until it returns `Some` or `timeout` passes. On expiry the
/// error names what was awaited, the last error, and the state seen last
/// (see [`observe`]).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    LAST_SEEN.with(|seen| *seen.borrow_mut() = None);
    loop {
        match probe() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last_error = Some(error),
        }
        if Instant::now() > deadline {
            let seen = LAST_SEEN
                .with(|seen| seen.borrow_mut().take())
                .unwrap_or_else(|| "nothing recorded".into());
            bail!(
                "timed out after {timeout:?} waiting for {what}; last error: {last_error:?}; last seen: {seen}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Reads a value over and over on a thread until finished, keeping every
/// value read: the Placement status a fault test checks at every step, not
/// only at the end.
pub struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seen: std::sync::Arc<Mutex<Vec<Value>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// The least time from one read's start to the next.
    pub const PERIOD: Duration = Duration::from_millis(50);

    /// Starts reading with `read`; `Ok(None)` and errors are not kept.
    pub fn start(read: impl Fn() -> anyhow::Result<Option<Value>> + Send + 'static) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (stopping, sink) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                let started = Instant::now();
                if let Ok(Some(value)) = read() {
                    if let Ok(mut seen) = sink.lock() {
                        seen.push(value);
                    }
                }
                // A pace, not a wait: reads in process take milliseconds,
                // and back to back they would keep a core busy for
                // nothing (the states sampled last hundreds of ms).
                if let Some(rest) = Self::PERIOD.checked_sub(started.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
        });
        Self {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Stops reading and returns every value read.
    pub fn finish(mut self) -> Vec<Value> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }
}

/// Checks a Placement's `status.clusters` against a fleet of `clusters`:
/// never more selected than there are, and every selected cluster in
/// exactly one phase, so none is counted twice.
pub fn assert_counted_once(status: &Value, clusters: u64) {
    let count = |phase: &str| status[phase].as_u64().unwrap_or_default();
    let selected = count("selected");
    let reported: u64 = ["applied", "ready", "failed", "offline"]
        .iter()
        .map(|phase| count(phase))
        .sum();
    assert!(
        selected <= clusters,
        "never more selected than the {clusters} clusters: {status}"
    );
    assert!(reported <= selected, "no cluster counted twice: {status}");
    assert_eq!(
        reported + count("pending"),
        selected,
        "every selected cluster in exactly one phase: {status}"
    );
}

/// A directory with a mesh's data directories and logs, removed at the end.
pub struct Mesh {
    pub dir: tempfile::TempDir,
    pub api_port: u16,
    /// Environment variables per node, for its joins and runs.
    env: Mutex<BTreeMap<String, Vec<(String, String)>>>,
    /// Where a node's programs come from, when not from this build (an
    /// older release's, for version skew).
    binaries: Mutex<BTreeMap<String, PathBuf>>,
}

impl Mesh {
    /// `relay init` of a root called `root` in a fresh directory.
    pub fn init() -> anyhow::Result<(Self, RelayProcess)> {
        Self::init_with(&[])
    }

    /// [`Mesh::init`], with `run_args` added to the root's `relay run`.
    pub fn init_with(run_args: &[&str]) -> anyhow::Result<(Self, RelayProcess)> {
        Self::init_full(&[], run_args)
    }

    /// [`Mesh::init`], with `init_args` added to `relay init` (`--store
    /// etcd`, ...) and `run_args` to the root's `relay run`.
    pub fn init_full(
        init_args: &[&str],
        run_args: &[&str],
    ) -> anyhow::Result<(Self, RelayProcess)> {
        let listen = format!("127.0.0.1:{}", free_udp_port()?);
        Self::init_full_listening(init_args, run_args, &listen)
    }

    /// [`Mesh::init_full`] with the root's mesh address `listen` (chosen
    /// beforehand, to be advertised with others).
    pub fn init_full_listening(
        init_args: &[&str],
        run_args: &[&str],
        listen: &str,
    ) -> anyhow::Result<(Self, RelayProcess)> {
        Self::init_from(None, init_args, run_args, listen)
    }

    /// [`Mesh::init`] with a root run by the `relay` in `binaries` (an
    /// older release's).
    pub fn init_with_binaries(binaries: &Path) -> anyhow::Result<(Self, RelayProcess)> {
        let listen = format!("127.0.0.1:{}", free_udp_port()?);
        Self::init_from(Some(binaries), &[], &[], &listen)
    }

    fn init_from(
        root_binaries: Option<&Path>,
        init_args: &[&str],
        run_args: &[&str],
        listen: &str,
    ) -> anyhow::Result<(Self, RelayProcess)> {
        let dir = tempfile::tempdir()?;
        let api_port = free_tcp_port()?;
        let mesh = Self {
            dir,
            api_port,
            env: Mutex::new(BTreeMap::new()),
            binaries: Mutex::new(BTreeMap::new()),
        };
        if let Some(binaries) = root_binaries {
            mesh.use_binaries("root", binaries)?;
        }
        let data_dir = mesh.data_dir("root");
        run_ok(
            mesh.command("relay", "root")?
                .arg("init")
                .arg("--data-dir")
                .arg(&data_dir)
                .args(["--name", "root", "--listen", listen])
                .args(["--api-listen", &format!("127.0.0.1:{api_port}")])
                .args(init_args),
        )?;
        let root = mesh.start_with("root", run_args)?;
        mesh.wait_for_api()?;
        Ok((mesh, root))
    }

    /// Waits until the root's API answers.
    pub fn wait_for_api(&self) -> anyhow::Result<()> {
        wait_for("the root API", Duration::from_secs(20), || {
            Ok(self
                .relayctl(&["tree", "-o", "json"])?
                .status
                .success()
                .then_some(()))
        })
    }

    /// Runs node `name`'s later `init`, `join` and `run` with the programs
    /// in `dir` (an older release's) instead of this build's.
    pub fn use_binaries(&self, name: &str, dir: &Path) -> anyhow::Result<()> {
        self.binaries
            .lock()
            .map_err(|_| anyhow::anyhow!("a test panicked while choosing a node's programs"))?
            .insert(name.to_string(), dir.to_path_buf());
        Ok(())
    }

    /// Gives node `name`'s later `join` and `run` processes (relay or edge
    /// agent) these environment variables, as `LD_PRELOAD` of libfaketime
    /// for a node whose clock is off.
    pub fn set_env(&self, name: &str, vars: &[(&str, &str)]) -> anyhow::Result<()> {
        self.env
            .lock()
            .map_err(|_| anyhow::anyhow!("a test panicked while setting a node's environment"))?
            .insert(
                name.to_string(),
                vars.iter()
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect(),
            );
        Ok(())
    }

    /// A command for one of node `name`'s processes, with its environment
    /// ([`Mesh::set_env`]).
    pub fn command(&self, binary_name: &str, name: &str) -> anyhow::Result<Command> {
        let program = self
            .binaries
            .lock()
            .map_err(|_| anyhow::anyhow!("a test panicked while choosing a node's programs"))?
            .get(name)
            .map(|dir| dir.join(binary_name));
        let mut command = Command::new(match program {
            Some(program) => program,
            None => binary(binary_name)?,
        });
        let env = self
            .env
            .lock()
            .map_err(|_| anyhow::anyhow!("a test panicked while setting a node's environment"))?;
        for (key, value) in env.get(name).into_iter().flatten() {
            command.env(key, value);
        }
        Ok(command)
    }

    /// A node's data directory.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The admin kubeconfig `relay init` wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir("root").join("admin.kubeconfig")
    }

    /// Runs relayctl with the admin kubeconfig.
    pub fn relayctl(&self, args: &[&str]) -> anyhow::Result<Output> {
        relayctl_as(&self.kubeconfig(), args)
    }

    /// A user from `relayctl user create NAME --group GROUP`, made with the
    /// admin kubeconfig, as the path of its kubeconfig.
    pub fn user_kubeconfig(&self, name: &str, group: &str) -> anyhow::Result<PathBuf> {
        self.user_kubeconfig_by(&self.kubeconfig(), name, group)
    }

    /// [`Mesh::user_kubeconfig`], made with the kubeconfig `admin`.
    pub fn user_kubeconfig_by(
        &self,
        admin: &Path,
        name: &str,
        group: &str,
    ) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        let path_text = path.to_str().context("a UTF-8 path")?;
        let args = ["user", "create", name, "--group", group, "-o", path_text];
        let output = relayctl_as(admin, &args)?;
        if !output.status.success() {
            bail!(
                "relayctl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(path)
    }

    /// Runs relayctl with the admin kubeconfig; its stdout, or an error
    /// with its stderr if it failed.
    pub fn relayctl_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.relayctl(args)?;
        if !output.status.success() {
            bail!(
                "relayctl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `kubectl apply -f -` of `yaml` at the root.
    pub fn apply(&self, yaml: &str) -> anyhow::Result<()> {
        let output = kubectl(&self.kubeconfig(), &["apply", "-f", "-"], Some(yaml))?;
        if !output.status.success() {
            bail!("kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }

    /// Places `shop/web` running `image` on the clusters `clusters` selects
    /// ([`web_workload`]) and waits until the cluster behind `kubeconfig`
    /// runs it.
    pub fn place_web(&self, image: &str, clusters: &str, kubeconfig: &Path) -> anyhow::Result<()> {
        self.apply(&web_workload(image, 1, clusters, ""))?;
        wait_for(
            &format!("{image} on {}", kubeconfig.display()),
            Duration::from_secs(90),
            || Ok((web_image(kubeconfig)?.as_deref() == Some(image)).then_some(())),
        )
        .with_context(|| self.logs())
    }

    /// `relayctl status NAME -n NAMESPACE -o json`: one placement's status.
    pub fn placement_status(&self, name: &str, namespace: &str) -> anyhow::Result<Value> {
        let stdout = self.relayctl_ok(&["status", name, "-n", namespace, "-o", "json"])?;
        Ok(serde_json::from_str(&stdout)?)
    }

    /// The `Cluster` object called `name`, as `relayctl get clusters` lists it.
    pub fn cluster_object(&self, name: &str) -> anyhow::Result<Value> {
        let stdout = self.relayctl_ok(&["get", "clusters", "-o", "json"])?;
        let list: Value = serde_json::from_str(&stdout)?;
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|item| item["metadata"]["name"] == name)
            .cloned()
            .with_context(|| format!("cluster {name} in {list}"))
    }

    /// Adds relay `name` under `parent` and waits (up to `timeout`) until
    /// it is connected there, so agents can join below it.
    pub fn add_relay_connected(
        &self,
        name: &str,
        parent: &str,
        timeout: Duration,
    ) -> anyhow::Result<RelayProcess> {
        let relay = self.add_relay(name, parent)?;
        wait_for(&format!("{name} in the tree"), timeout, || {
            Ok(connected_under(&self.tree()?, name, parent).then_some(()))
        })
        .with_context(|| self.logs())?;
        Ok(relay)
    }

    /// Issues a join token.
    pub fn token(
        &self,
        role: &str,
        name: &str,
        parent: Option<&str>,
        ttl: &str,
    ) -> anyhow::Result<String> {
        let mut args = vec![
            "token", "create", "--role", role, "--name", name, "--ttl", ttl,
        ];
        if let Some(parent) = parent {
            args.extend(["--parent", parent]);
        }
        let output = self.relayctl(&args)?;
        if !output.status.success() {
            bail!(
                "token create failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8(output.stdout)?.trim().to_string())
    }

    /// `relay join` with `token` as relay `name`; returns the command's output.
    pub fn join(&self, name: &str, token: &str) -> anyhow::Result<Output> {
        self.join_in(name, name, token)
    }

    /// `relay join` into the data directory called `dir`.
    pub fn join_in(&self, dir: &str, name: &str, token: &str) -> anyhow::Result<Output> {
        let listen = format!("127.0.0.1:{}", free_udp_port()?);
        Ok(self
            .command("relay", dir)?
            .arg("join")
            .arg("--data-dir")
            .arg(self.data_dir(dir))
            .args(["--name", name, "--token", token, "--listen", &listen])
            .output()?)
    }

    /// Issues a token for relay `name` under `parent`, joins and starts it.
    pub fn add_relay(&self, name: &str, parent: &str) -> anyhow::Result<RelayProcess> {
        self.add_relay_with(name, parent, &[])
    }

    /// [`Mesh::add_relay`], with `run_args` added to its `relay run`.
    pub fn add_relay_with(
        &self,
        name: &str,
        parent: &str,
        run_args: &[&str],
    ) -> anyhow::Result<RelayProcess> {
        let token = self.token("relay", name, Some(parent), "10m")?;
        let output = self.join(name, &token)?;
        if !output.status.success() {
            bail!(
                "join of {name} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        self.start_with(name, run_args)
    }

    /// Issues an agent token under `parent`, joins cluster `name` with
    /// `labels` (`k=v,…`) and starts its edge agent, without a cluster
    /// (`--no-cluster`: it keeps its slice and applies nothing).
    pub fn add_agent(
        &self,
        name: &str,
        parent: &str,
        labels: &str,
    ) -> anyhow::Result<RelayProcess> {
        let token = self.token("agent", name, Some(parent), "10m")?;
        run_ok(
            self.command("edge-agent", name)?
                .arg("join")
                .arg("--data-dir")
                .arg(self.data_dir(name))
                .args(["--name", name, "--token", &token, "--labels", labels])
                .arg("--no-cluster"),
        )?;
        self.spawn_with("edge-agent", name, &["--no-cluster"])
    }

    /// Joins cluster `name` with `labels` under `parent`, applying to the
    /// Kubernetes API of `kubeconfig`, and starts its edge agent.
    pub fn add_agent_for(
        &self,
        name: &str,
        parent: &str,
        labels: &str,
        kubeconfig: &Path,
    ) -> anyhow::Result<RelayProcess> {
        self.add_agent_for_with(name, parent, labels, kubeconfig, &[])
    }

    /// [`Mesh::add_agent_for`], with `run_args` added to `edge-agent run`
    /// (`--allow cluster-rbac`, ...).
    pub fn add_agent_for_with(
        &self,
        name: &str,
        parent: &str,
        labels: &str,
        kubeconfig: &Path,
        run_args: &[&str],
    ) -> anyhow::Result<RelayProcess> {
        self.add_agent_joined_with(name, parent, labels, kubeconfig, &[], run_args)
    }

    /// [`Mesh::add_agent_for_with`], with `join_args` added to `edge-agent
    /// join` (`--max-placements 1`, ...).
    pub fn add_agent_joined_with(
        &self,
        name: &str,
        parent: &str,
        labels: &str,
        kubeconfig: &Path,
        join_args: &[&str],
        run_args: &[&str],
    ) -> anyhow::Result<RelayProcess> {
        let token = self.token("agent", name, Some(parent), "10m")?;
        run_ok(
            self.command("edge-agent", name)?
                .arg("join")
                .arg("--data-dir")
                .arg(self.data_dir(name))
                .args(["--name", name, "--token", &token, "--labels", labels])
                .args(join_args)
                .arg("--kubeconfig")
                .arg(kubeconfig),
        )?;
        self.spawn_with("edge-agent", name, run_args)
    }

    /// Starts a joined edge agent again.
    pub fn start_agent(&self, name: &str) -> anyhow::Result<RelayProcess> {
        self.spawn("edge-agent", name)
    }

    /// [`Mesh::start_agent`] with `run_args` added to `edge-agent run`
    /// (`--parent-grace 10s`, ...).
    pub fn start_agent_with(&self, name: &str, run_args: &[&str]) -> anyhow::Result<RelayProcess> {
        self.spawn_with("edge-agent", name, run_args)
    }

    /// Starts `relay run` on a node's data directory.
    pub fn start(&self, name: &str) -> anyhow::Result<RelayProcess> {
        self.spawn("relay", name)
    }

    /// [`Mesh::start`] with `run_args` added to `relay run`
    /// (`--parent-address`, ...).
    pub fn start_with(&self, name: &str, run_args: &[&str]) -> anyhow::Result<RelayProcess> {
        self.spawn_with("relay", name, run_args)
    }

    /// The first address relay `name` advertises, as the root lists it.
    pub fn advertised_address(&self, name: &str) -> anyhow::Result<String> {
        let output = self.relayctl(&["get", "relays", "-o", "json"])?;
        if !output.status.success() {
            bail!(
                "relayctl get relays: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let list: Value = serde_json::from_slice(&output.stdout)?;
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|item| item["metadata"]["name"] == name)
            .and_then(|item| item["spec"]["addresses"][0].as_str())
            .map(str::to_string)
            .with_context(|| format!("relay {name} advertises an address: {list}"))
    }

    /// `BINARY inspect` of a stopped node (`relay` or `edge-agent`).
    pub fn inspect_with(&self, binary_name: &str, name: &str) -> anyhow::Result<Value> {
        let output = run_ok(
            Command::new(binary(binary_name)?)
                .arg("inspect")
                .arg("--data-dir")
                .arg(self.data_dir(name)),
        )?;
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn spawn(&self, binary_name: &str, name: &str) -> anyhow::Result<RelayProcess> {
        self.spawn_with(binary_name, name, &[])
    }

    fn spawn_with(
        &self,
        binary_name: &str,
        name: &str,
        run_args: &[&str],
    ) -> anyhow::Result<RelayProcess> {
        let log_path = self.dir.path().join(format!("{name}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let child = self
            .command(binary_name, name)?
            .arg("run")
            .arg("--data-dir")
            .arg(self.data_dir(name))
            .args(run_args)
            // An agent's policy is what the test gives it, not the caller's
            // environment.
            .env_remove("RELAYMESH_ALLOW")
            .env_remove("RELAYMESH_DENY")
            .env_remove("RELAYMESH_ALLOW_ADOPT")
            // Limits too: a relay's are the defaults unless the test says.
            .env_remove("RELAYMESH_MAX_API_WATCHES")
            .env_remove("RELAYMESH_MAX_API_WATCHES_PER_USER")
            .env_remove("RELAYMESH_REFUSAL_LOG_INTERVAL")
            .env_remove("RELAYMESH_MAX_CONNECTIONS")
            .env_remove("RELAYMESH_MAX_CONNECTIONS_PER_ADDRESS")
            .env_remove("RELAYMESH_MAX_JOINS_PER_MINUTE_PER_ADDRESS")
            .env_remove("RELAYMESH_MAX_CONCURRENT_JOINS")
            .env_remove("RELAYMESH_MAX_INVENTORY_RECORDS_PER_CHILD")
            .env_remove("RELAYMESH_MAX_STATUS_KEYS_PER_CHILD")
            .env_remove("RELAYMESH_MAX_CONCURRENT_BUNDLE_SERVES")
            .env(
                "RUST_LOG",
                "info,relaymesh_node=debug,relaymesh_root=debug,relaymesh_core=debug",
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(RelayProcess {
            child: Some(child),
            name: name.to_string(),
            log: log_path,
        })
    }

    /// `relayctl tree -o json`.
    pub fn tree(&self) -> anyhow::Result<Value> {
        let output = self.relayctl(&["tree", "-o", "json"])?;
        if !output.status.success() {
            bail!("relayctl tree: {}", String::from_utf8_lossy(&output.stderr));
        }
        let tree: Value = serde_json::from_slice(&output.stdout)?;
        observe(format_args!("relayctl tree: {tree}"));
        Ok(tree)
    }

    /// `relay inspect` of a stopped relay.
    pub fn inspect(&self, name: &str) -> anyhow::Result<Value> {
        self.inspect_with("relay", name)
    }

    /// Every log of this mesh, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "log") {
                    let body = std::fs::read_to_string(&path).unwrap_or_default();
                    let tail: Vec<&str> = body.lines().rev().take(40).collect();
                    text.push_str(&format!("\n==> {} <==\n", path.display()));
                    for line in tail.into_iter().rev() {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
        }
        text
    }
}

/// A running `relay run` process; killed when dropped.
pub struct RelayProcess {
    child: Option<Child>,
    pub name: String,
    pub log: PathBuf,
}

impl RelayProcess {
    /// The process id, while it runs (for `prlimit --pid` and the like).
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the process exited, if it did (it is not waited for).
    pub fn exit_status(&mut self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// SIGKILL: no chance to flush or say goodbye.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            Command::new("kill").args(["-TERM", &pid]).status()?;
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(status) = child.try_wait()? {
                    if !status.success() {
                        bail!("{} exited with {status} after SIGTERM", self.name);
                    }
                    return Ok(());
                }
                if Instant::now() > deadline {
                    child.kill()?;
                    bail!("{} did not stop within 20s of SIGTERM", self.name);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a command that must succeed, returning its output.
pub fn run_ok(command: &mut Command) -> anyhow::Result<Output> {
    let output = command.output()?;
    if !output.status.success() {
        bail!(
            "{:?} failed: {}{}",
            command,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output)
}

/// Finds a node by name in a `relayctl tree -o json` tree, with its parent's
/// name.
pub fn find_node<'a>(tree: &'a Value, name: &str) -> Option<(&'a Value, Option<&'a str>)> {
    fn walk<'a>(
        node: &'a Value,
        parent: Option<&'a str>,
        name: &str,
    ) -> Option<(&'a Value, Option<&'a str>)> {
        if node["name"] == name {
            return Some((node, parent));
        }
        let children = node["children"].as_array()?;
        let own = node["name"].as_str();
        children.iter().find_map(|child| walk(child, own, name))
    }
    walk(tree, None, name)
}

/// Every node of a `relayctl tree -o json` tree, depth first.
pub fn all_nodes(tree: &Value) -> Vec<&Value> {
    let mut nodes = vec![tree];
    let mut index = 0;
    while index < nodes.len() {
        if let Some(children) = nodes[index]["children"].as_array() {
            nodes.extend(children.iter());
        }
        index += 1;
    }
    nodes
}

/// Whether `name` is in the tree under `parent` and connected.
pub fn connected_under(tree: &Value, name: &str, parent: &str) -> bool {
    find_node(tree, name)
        .is_some_and(|(node, found)| found == Some(parent) && node["connected"] == true)
}

/// A running `testbed up`: a whole fleet of relay and edge-agent processes
/// with simulated clusters, in a temporary directory. Dropping it stops the
/// fleet with SIGTERM (so the testbed stops its own children).
pub struct Testbed {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Testbed {
    /// Starts `testbed up ARGS --dir DIR/fleet --ready-file DIR/ready` and
    /// waits (up to `timeout`) for the ready file.
    pub fn up(args: &[&str], timeout: Duration) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let output = std::fs::File::create(dir.path().join("testbed.out"))?;
        let child = Command::new(binary("testbed")?)
            .arg("up")
            .args(args)
            .arg("--dir")
            .arg(dir.path().join("fleet"))
            .arg("--ready-file")
            .arg(dir.path().join("ready"))
            // The binaries are built already (bin_dir); never rebuild here.
            .arg("--no-build")
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()?;
        let mut testbed = Self {
            dir,
            child: Some(child),
        };
        let ready = testbed.dir.path().join("ready");
        let waited = wait_for("the testbed's ready file", timeout, || {
            if let Some(child) = testbed.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("testbed up exited with {status}");
                }
            }
            Ok(ready.exists().then_some(()))
        });
        if let Err(error) = waited {
            bail!("{error:#}\n{}", testbed.logs());
        }
        Ok(testbed)
    }

    /// The fleet's directory (`--dir`).
    pub fn fleet_dir(&self) -> PathBuf {
        self.dir.path().join("fleet")
    }

    /// The ready file's JSON.
    pub fn ready(&self) -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(&std::fs::read(
            self.dir.path().join("ready"),
        )?)?)
    }

    /// `DIR/root.kubeconfig`.
    pub fn root_kubeconfig(&self) -> PathBuf {
        self.fleet_dir().join("root.kubeconfig")
    }

    /// `DIR/clusters/NAME.kubeconfig`.
    pub fn cluster_kubeconfig(&self, name: &str) -> PathBuf {
        self.fleet_dir()
            .join("clusters")
            .join(format!("{name}.kubeconfig"))
    }

    /// Runs relayctl against the root.
    pub fn relayctl(&self, args: &[&str]) -> anyhow::Result<Output> {
        Ok(Command::new(binary("relayctl")?)
            .arg("--kubeconfig")
            .arg(self.root_kubeconfig())
            .args(args)
            .output()?)
    }

    /// The testbed's output and the tail of every log, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = format!(
            "==> testbed output <==\n{}",
            std::fs::read_to_string(self.dir.path().join("testbed.out")).unwrap_or_default()
        );
        let logs = self.fleet_dir().join("logs");
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .collect();
        paths.sort();
        for path in paths {
            let body = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = body.lines().rev().take(25).collect();
            text.push_str(&format!("\n==> {} <==\n", path.display()));
            for line in tail.into_iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }

    /// SIGTERM, then waits for the testbed to stop its fleet and exit.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!("testbed exited with {status} after SIGTERM");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                child.kill()?;
                child.wait()?;
                bail!("testbed did not stop within 60s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Where kubectl keeps its discovery cache for the API server of
/// `kubeconfig` (its `KUBECACHEDIR`): under the target directory, one per
/// test process and kubeconfig. kubectl's default, `~/.kube/cache`, is keyed
/// by host and port and kept for hours, so a later test whose server got the
/// same port would start from another server's discovery.
pub fn kubectl_cache_dir(kubeconfig: &Path) -> anyhow::Result<PathBuf> {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    kubeconfig.hash(&mut hasher);
    Ok(bin_dir()?.join("kubectl-cache").join(format!(
        "{}-{:016x}",
        std::process::id(),
        hasher.finish()
    )))
}

/// [`kubectl`]'s stdout, or an error with its stderr.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    let output = kubectl(kubeconfig, args, stdin)?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `kubectl --kubeconfig KUBECONFIG ARGS`, with `stdin` piped in if
/// given.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .env("KUBECACHEDIR", kubectl_cache_dir(kubeconfig)?)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run kubectl")?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.unwrap_or_default().as_bytes())?;
    }
    let output = child.wait_with_output()?;
    observe(format_args!(
        "kubectl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ));
    Ok(output)
}

/// `kubectl get ARGS -o json` against the cluster behind `kubeconfig`:
/// `None` when the object is not found.
pub fn kubectl_get(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Option<Value>> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let output = kubectl(kubeconfig, &all, None)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("NotFound") || stderr.contains("not found") {
            return Ok(None);
        }
        bail!("kubectl get {}: {stderr}", args.join(" "));
    }
    Ok(Some(serde_json::from_slice(&output.stdout)?))
}

/// The `web` Deployment in namespace `shop` of the cluster behind
/// `kubeconfig` (what most end-to-end tests place), if it exists.
pub fn web_deployment(kubeconfig: &Path) -> anyhow::Result<Option<Value>> {
    kubectl_get(kubeconfig, &["deployment", "web", "-n", "shop"])
}

/// The image of the `web` Deployment in namespace `shop` of the cluster
/// behind `kubeconfig` (what the outage and clock-skew tests place), if it
/// exists.
pub fn web_image(kubeconfig: &Path) -> anyhow::Result<Option<String>> {
    Ok(web_deployment(kubeconfig)?.and_then(|deployment| {
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .map(str::to_string)
    }))
}

/// The workload most end-to-end tests place, as YAML for `kubectl apply`:
/// Namespace `shop`, Deployment `shop/web` (`replicas` of `image`, labelled
/// `app: web`) and Placement `shop/web` selecting it, whose spec has
/// `clusters` (YAML flow text, such as `{names: [a]}`) and the spec lines
/// `extra` (YAML indented by two spaces, or empty).
pub fn web_workload(image: &str, replicas: u32, clusters: &str, extra: &str) -> String {
    app_workload("shop", "web", image, replicas, clusters, extra)
}

/// [`web_workload`] for Deployment and Placement `app` in `namespace`.
pub fn app_workload(
    namespace: &str,
    app: &str,
    image: &str,
    replicas: u32,
    clusters: &str,
    extra: &str,
) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {app}, namespace: {namespace}, labels: {{app: {app}}}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata: {{labels: {{app: {app}}}}}
    spec: {{containers: [{{name: {app}, image: "{image}"}}]}}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {{name: {app}, namespace: {namespace}}}
spec:
  workloads: [{{labelSelector: {{matchLabels: {{app: {app}}}}}}}]
  clusters: {clusters}
{extra}"#
    )
}

/// Whether the cluster behind `kubeconfig` has Deployment `shop/web`, and
/// whether all its `replicas` are ready.
pub fn web_ready(kubeconfig: &Path, replicas: u64) -> anyhow::Result<(bool, bool)> {
    Ok(match web_deployment(kubeconfig)? {
        Some(deployment) => (
            true,
            deployment["status"]["readyReplicas"].as_u64() == Some(replicas),
        ),
        None => (false, false),
    })
}

/// Every line of a simulated cluster's audit log (one per request that
/// asked to change something).
pub fn audited(log: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).context("an audit line"))
        .collect()
}

/// Checks that the root refuses each `relayctl move ARGS…`, saying why.
pub fn assert_moves_refused<const N: usize>(
    mesh: &Mesh,
    refused: &[([&str; N], &str)],
) -> anyhow::Result<()> {
    for (args, why) in refused {
        let output = mesh.relayctl(&[&["move"][..], &args[..]].concat())?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "move {args:?} was accepted");
        assert!(stderr.contains(why), "move {args:?}: {stderr}");
    }
    Ok(())
}

/// Moves `node` under `to` with `relayctl move --wait` (at most
/// `timeout`, e.g. `2m`) and checks the root settled the move from
/// `from`.
pub fn move_settled(
    mesh: &Mesh,
    node: &str,
    to: &str,
    from: &str,
    timeout: &str,
) -> anyhow::Result<()> {
    let output = mesh.relayctl(&[
        "move",
        node,
        "--to",
        to,
        "--wait",
        "--timeout",
        timeout,
        "-o",
        "json",
    ])?;
    if !output.status.success() {
        bail!(
            "relayctl move: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            mesh.logs()
        );
    }
    let moved: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(moved["status"]["state"], "Settled", "{moved}");
    assert_eq!(moved["status"]["from"], from, "{moved}");
    Ok(())
}
