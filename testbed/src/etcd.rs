//! A local etcd cluster of real `etcd` processes (Debian's `etcd-server`,
//! 3.4) on loopback ports, for the tests and benchmarks of the root on
//! etcd: members can be killed with SIGKILL and started again on the same
//! data, as an operator's would be.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use relaymesh_apiserver::etcd::{Certificate, Etcd, EtcdConfig, Identity, TlsOptions};

use crate::ports;

/// Where Debian's `etcd-server` puts the server.
pub const ETCD_BINARY: &str = "/usr/bin/etcd";

/// Where Debian's `etcd-client` puts etcd's command line (snapshots).
pub const ETCDCTL_BINARY: &str = "/usr/bin/etcdctl";

/// How long a member may take to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One member: its ports, its data and its process (while it runs).
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data: PathBuf,
    log: PathBuf,
    process: Option<Child>,
}

/// PEM files for an etcd cluster that serves TLS and asks its clients for
/// a certificate (`--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct EtcdTls {
    /// The CA that signed the server's and the clients' certificates.
    pub ca: PathBuf,
    /// The members' serving certificate (for 127.0.0.1).
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// A client certificate the cluster accepts.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

/// A local etcd cluster. Its members are killed when it is dropped.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
    tls: Option<EtcdTls>,
}

impl EtcdCluster {
    /// Starts `size` members under `dir` and waits until the cluster
    /// answers.
    pub fn start(dir: &Path, size: usize) -> Result<Self> {
        Self::prepare(dir, size)?.run_all()
    }

    /// [`EtcdCluster::start`], serving its clients over TLS with `tls`.
    pub fn start_tls(dir: &Path, size: usize, tls: EtcdTls) -> Result<Self> {
        let mut cluster = Self::prepare(dir, size)?;
        cluster.tls = Some(tls);
        cluster.run_all()
    }

    /// A new cluster of `size` members under `dir` whose data is restored
    /// from `snapshot` (`etcdctl snapshot restore`, the documented
    /// procedure), started and answering.
    pub fn restore(dir: &Path, snapshot: &Path, size: usize) -> Result<Self> {
        let cluster = Self::prepare(dir, size)?;
        for member in &cluster.members {
            etcdctl(
                Command::new(ETCDCTL_BINARY)
                    .arg("snapshot")
                    .arg("restore")
                    .arg(snapshot)
                    .args(["--name", &member.name])
                    .arg("--data-dir")
                    .arg(&member.data)
                    .args(["--initial-cluster", &cluster.initial_cluster])
                    .args(["--initial-cluster-token", "relaymesh-testbed-restored"])
                    .args([
                        "--initial-advertise-peer-urls",
                        &format!("http://127.0.0.1:{}", member.peer_port),
                    ]),
            )?;
        }
        cluster.run_all()
    }

    /// Saves a snapshot of the cluster's data to `path` (`etcdctl snapshot
    /// save`).
    pub fn snapshot(&self, path: &Path) -> Result<()> {
        let endpoint = self
            .endpoints()
            .into_iter()
            .next()
            .context("an etcd cluster without members")?;
        let mut command = Command::new(ETCDCTL_BINARY);
        if let Some(tls) = &self.tls {
            command
                .arg("--cacert")
                .arg(&tls.ca)
                .arg("--cert")
                .arg(&tls.client_cert)
                .arg("--key")
                .arg(&tls.client_key);
        }
        etcdctl(
            command
                .args(["--endpoints", &endpoint, "snapshot", "save"])
                .arg(path),
        )
    }

    fn run_all(mut self) -> Result<Self> {
        for index in 0..self.members.len() {
            self.spawn(index)?;
        }
        self.wait_healthy()?;
        Ok(self)
    }

    fn prepare(dir: &Path, size: usize) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if !Path::new(ETCD_BINARY).exists() {
            bail!(
                "{ETCD_BINARY} is missing: install Debian's etcd-server (scripts/test-deps does)"
            );
        }
        let mut members = Vec::with_capacity(size);
        for index in 0..size {
            let name = format!("etcd-{index}");
            members.push(Member {
                data: dir.join(&name),
                log: dir.join(format!("{name}.log")),
                name,
                client_port: ports::tcp()?,
                peer_port: ports::tcp()?,
                process: None,
            });
        }
        let initial_cluster = members
            .iter()
            .map(|member| format!("{}=http://127.0.0.1:{}", member.name, member.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Self {
            members,
            initial_cluster,
            tls: None,
        })
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| format!("{}://127.0.0.1:{}", self.scheme(), member.client_port))
            .collect()
    }

    /// A connection to the cluster, keys under `prefix` (with the client
    /// certificate, when the cluster serves TLS).
    pub fn connect(&self, prefix: &str) -> Result<Etcd> {
        let tls = match &self.tls {
            Some(tls) => Some(
                TlsOptions::new()
                    .ca_certificate(Certificate::from_pem(std::fs::read(&tls.ca)?))
                    .identity(Identity::from_pem(
                        std::fs::read(&tls.client_cert)?,
                        std::fs::read(&tls.client_key)?,
                    )),
            ),
            None => None,
        };
        Ok(Etcd::connect(&EtcdConfig {
            endpoints: self.endpoints(),
            tls,
            prefix: prefix.to_string(),
        })?)
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Kills member `index` with SIGKILL.
    pub fn kill(&mut self, index: usize) -> Result<()> {
        let member = self
            .members
            .get_mut(index)
            .with_context(|| format!("no etcd member {index}"))?;
        if let Some(mut process) = member.process.take() {
            process.kill().ok();
            process.wait().ok();
        }
        Ok(())
    }

    /// Starts member `index` again on its data.
    pub fn restart(&mut self, index: usize) -> Result<()> {
        self.kill(index)?;
        self.spawn(index)
    }

    /// Waits until a linearizable read succeeds (a quorum answers).
    pub fn wait_healthy(&self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = None;
        while Instant::now() < deadline {
            match self.connect("/health/").and_then(|etcd| Ok(etcd.check()?)) {
                Ok(_) => return Ok(()),
                Err(error) => last = Some(error),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!(
            "etcd did not answer within {START_TIMEOUT:?}: {}; logs: {}",
            last.map_or_else(String::new, |error| format!("{error:#}")),
            self.members
                .iter()
                .map(|member| member.log.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn spawn(&mut self, index: usize) -> Result<()> {
        let initial_cluster = self.initial_cluster.clone();
        let scheme = self.scheme();
        let tls = self.tls.clone();
        let member = &mut self.members[index];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&member.log)
            .with_context(|| format!("opening {}", member.log.display()))?;
        let client = format!("{scheme}://127.0.0.1:{}", member.client_port);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let state = if member.data.exists() {
            "existing"
        } else {
            "new"
        };
        let mut command = Command::new(ETCD_BINARY);
        if let Some(tls) = &tls {
            command
                .arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        let process = command
            .args(["--name", &member.name])
            .arg("--data-dir")
            .arg(&member.data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "relaymesh-testbed"])
            // Small and quick: loopback, a test's worth of data.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--quota-backend-bytes", "1073741824"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {ETCD_BINARY}"))?;
        member.process = Some(process);
        Ok(())
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut process) = member.process.take() {
                process.kill().ok();
                process.wait().ok();
            }
        }
    }
}

/// Runs `etcdctl` (v3 API) as `command` says; its stderr if it fails.
fn etcdctl(command: &mut Command) -> Result<()> {
    let output = command
        .env("ETCDCTL_API", "3")
        .output()
        .with_context(|| format!("running {ETCDCTL_BINARY}"))?;
    if !output.status.success() {
        bail!(
            "etcdctl {:?}: {}",
            command.get_args().take(2).collect::<Vec<_>>(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}
