//! The NATS side's servers: `nats-server` processes on loopback in the
//! fanout tree's shape, a hub where the root relay would be and levels of
//! leaf-node servers, each a leaf node of the server above it.
//!
//! Each server gets a config file and a log in the run's directory, so a
//! failed run can be read afterwards. A server counts as up when its
//! monitoring endpoint (`/leafz`) lists every leaf-node connection it
//! should have: one to its parent, one from each child. Subscription
//! interest still travels up the tree after that; the benchmark waits for
//! it with probe messages ([`super`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Where Debian puts `nats-server`, for when those directories are not on
/// `PATH` (`/usr/sbin` often is not for other users than root).
const DEBIAN_PATHS: [&str; 2] = ["/usr/sbin/nats-server", "/usr/bin/nats-server"];

/// How often a starting server is looked at.
const POLL: Duration = Duration::from_millis(20);

/// The smallest `max_payload` a server is given (NATS's own default).
const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// Why the NATS servers could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// No `nats-server` on `PATH` nor where Debian installs it.
    #[error(
        "nats-server not found on PATH nor at {paths}; install it with \
         `apt-get install nats-server` (scripts/bench does when it can)",
        paths = DEBIAN_PATHS.join(" or ")
    )]
    NotInstalled,
    /// A config file or log could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No free loopback port was left for a server.
    #[error("no free port for nats-server {server}: {source}")]
    NoPort {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server could not be started.
    #[error("cannot start {binary}: {source}")]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server exited while the tree was coming up.
    #[error("nats-server {server} exited ({status}); see {log}")]
    Exited {
        /// The server.
        server: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its log.
        log: PathBuf,
    },
    /// A server did not have all its leaf-node connections in time.
    #[error("nats-server {server} has {have} of {want} leaf-node connections after {after:?}; see {log}")]
    NotReady {
        /// The server.
        server: String,
        /// The connections it listed last.
        have: u64,
        /// The connections it should have.
        want: u64,
        /// How long it was given.
        after: Duration,
        /// Its log.
        log: PathBuf,
    },
}

/// The `nats-server` to run: the first on `PATH`, else Debian's.
pub fn binary() -> Result<PathBuf, NatsError> {
    let on_path = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("nats-server"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(DEBIAN_PATHS.iter().map(PathBuf::from))
        .find(|candidate| candidate.is_file())
        .ok_or(NatsError::NotInstalled)
}

/// One running server.
#[derive(Debug)]
struct Server {
    name: String,
    client_port: u16,
    monitor_port: u16,
    /// Leaf-node connections it has when the tree is up.
    leaf_connections: u64,
    log: PathBuf,
    process: Child,
}

/// The running servers, the hub first and the deepest level last.
#[derive(Debug)]
pub struct Tree {
    servers: Vec<Server>,
    /// Index of the first server of the deepest level.
    deepest: usize,
}

/// One server of the plan, before it runs.
struct Planned {
    name: String,
    parent: Option<usize>,
    children: usize,
    client_port: u16,
    monitor_port: u16,
    leaf_port: u16,
}

impl Tree {
    /// Starts the hub and `relays_per_level` levels of leaf-node servers
    /// below it (the first number is the hub's children), with their config
    /// files and logs in `dir`, and returns once every server lists all its
    /// leaf-node connections, or fails after `timeout`.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        relays_per_level: &[usize],
        payload_bytes: usize,
        timeout: Duration,
    ) -> Result<Self, NatsError> {
        let plan = plan(relays_per_level)?;
        let deepest = plan.len() - deepest_level_len(relays_per_level);
        let max_payload = DEFAULT_MAX_PAYLOAD.max(payload_bytes + 4096);
        let mut servers = Vec::with_capacity(plan.len());
        // Dropping the tree half-built kills what did start (kill_on_drop).
        for planned in &plan {
            let config_path = dir.join(format!("nats-{}.conf", planned.name));
            let parent_leaf_port = planned.parent.map(|parent| plan[parent].leaf_port);
            write(
                &config_path,
                &config(planned, parent_leaf_port, max_payload).into_bytes(),
            )?;
            let log = dir.join(format!("nats-{}.log", planned.name));
            let log_file = std::fs::File::create(&log).map_err(|source| NatsError::Io {
                path: log.clone(),
                source,
            })?;
            let log_err = log_file.try_clone().map_err(|source| NatsError::Io {
                path: log.clone(),
                source,
            })?;
            let process = Command::new(binary)
                .arg("--config")
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(log_file)
                .stderr(log_err)
                .kill_on_drop(true)
                .spawn()
                .map_err(|source| NatsError::Spawn {
                    binary: binary.to_path_buf(),
                    source,
                })?;
            tracing::debug!(server = %planned.name, port = planned.client_port, "nats-server started");
            servers.push(Server {
                name: planned.name.clone(),
                client_port: planned.client_port,
                monitor_port: planned.monitor_port,
                leaf_connections: (planned.children + usize::from(planned.parent.is_some())) as u64,
                log,
                process,
            });
        }
        let mut tree = Self { servers, deepest };
        tree.wait_until_linked(timeout).await?;
        Ok(tree)
    }

    /// The hub's client URL.
    pub fn hub_url(&self) -> String {
        url(self.servers[0].client_port)
    }

    /// The deepest servers' client URLs, where subscribers connect.
    pub fn deepest_urls(&self) -> Vec<String> {
        self.servers[self.deepest..]
            .iter()
            .map(|server| url(server.client_port))
            .collect()
    }

    /// How many servers run.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether no server runs (never, once started).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Stops every server and waits for it to exit.
    pub async fn shutdown(mut self) {
        for server in &mut self.servers {
            if let Err(error) = server.process.kill().await {
                tracing::warn!(server = %server.name, %error, "cannot stop nats-server");
            }
        }
    }

    async fn wait_until_linked(&mut self, timeout: Duration) -> Result<(), NatsError> {
        let deadline = Instant::now() + timeout;
        for server in &mut self.servers {
            loop {
                if let Ok(Some(status)) = server.process.try_wait() {
                    return Err(NatsError::Exited {
                        server: server.name.clone(),
                        status,
                        log: server.log.clone(),
                    });
                }
                // Refused connections and half-written answers while the
                // server starts read as no connections yet.
                let have = leaf_connections(server.monitor_port).await.unwrap_or(0);
                if have >= server.leaf_connections {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(NatsError::NotReady {
                        server: server.name.clone(),
                        have,
                        want: server.leaf_connections,
                        after: timeout,
                        log: server.log.clone(),
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        tracing::info!(servers = self.servers.len(), "nats servers linked");
        Ok(())
    }
}

/// The servers, level by level: `hub`, then `leaf-1`, `leaf-2`, … below it,
/// `leaf-1-1`, … below those; each with its ports.
fn plan(relays_per_level: &[usize]) -> Result<Vec<Planned>, NatsError> {
    let mut plan: Vec<Planned> = Vec::new();
    let mut level = vec![planned("hub".to_string(), None)?];
    for &children in relays_per_level {
        let mut next = Vec::new();
        for (offset, parent) in level.iter_mut().enumerate() {
            parent.children = children;
            let parent_index = plan.len() + offset;
            for child in 1..=children {
                let name = match parent.name.strip_prefix("hub") {
                    Some("") => format!("leaf-{child}"),
                    _ => format!("{}-{child}", parent.name),
                };
                next.push(planned(name, Some(parent_index))?);
            }
        }
        plan.append(&mut level);
        level = next;
    }
    plan.append(&mut level);
    Ok(plan)
}

fn planned(name: String, parent: Option<usize>) -> Result<Planned, NatsError> {
    let port = || {
        crate::ports::tcp().map_err(|source| NatsError::NoPort {
            server: name.clone(),
            source,
        })
    };
    Ok(Planned {
        client_port: port()?,
        monitor_port: port()?,
        leaf_port: port()?,
        name,
        parent,
        children: 0,
    })
}

/// How many servers the deepest level has.
fn deepest_level_len(relays_per_level: &[usize]) -> usize {
    relays_per_level
        .last()
        .map_or(1, |_| relays_per_level.iter().product::<usize>())
}

/// A server's config file: its ports on loopback, a `max_payload` that fits
/// the payload, a leaf-node listener when it has children and a leaf-node
/// remote to its parent when it has one.
fn config(server: &Planned, parent_leaf_port: Option<u16>, max_payload: usize) -> String {
    let mut text = format!(
        "# nats-server {name}, written by `testbed bench nats`\n\
         server_name: \"{name}\"\n\
         listen: \"127.0.0.1:{client}\"\n\
         http: \"127.0.0.1:{monitor}\"\n\
         max_payload: {max_payload}\n",
        name = server.name,
        client = server.client_port,
        monitor = server.monitor_port,
    );
    if server.children > 0 || parent_leaf_port.is_some() {
        text.push_str("leafnodes {\n");
        if server.children > 0 {
            text.push_str(&format!("  listen: \"127.0.0.1:{}\"\n", server.leaf_port));
        }
        if let Some(port) = parent_leaf_port {
            text.push_str(&format!(
                "  remotes = [ {{ url: \"nats-leaf://127.0.0.1:{port}\" }} ]\n"
            ));
        }
        text.push_str("}\n");
    }
    text
}

fn url(port: u16) -> String {
    format!("nats://127.0.0.1:{port}")
}

fn write(path: &Path, contents: &[u8]) -> Result<(), NatsError> {
    std::fs::write(path, contents).map_err(|source| NatsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The leaf-node connections a server lists on its monitoring port
/// (`/leafz`'s `leafnodes`), by a plain HTTP/1.0 GET.
async fn leaf_connections(monitor_port: u16) -> Option<u64> {
    let mut stream = TcpStream::connect(("127.0.0.1", monitor_port)).await.ok()?;
    stream
        .write_all(b"GET /leafz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.ok()?;
    let answer = String::from_utf8(answer).ok()?;
    let (_, body) = answer.split_once("\r\n\r\n")?;
    let body: serde_json::Value = serde_json::from_str(body).ok()?;
    body["leafnodes"].as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_the_fanout_trees_shape() -> anyhow::Result<()> {
        let tree = plan(&[2, 4])?;
        assert_eq!(tree.len(), 1 + 2 + 8);
        assert_eq!(tree[0].name, "hub");
        assert_eq!(tree[0].children, 2);
        assert_eq!(tree[1].name, "leaf-1");
        assert_eq!(tree[1].parent, Some(0));
        assert_eq!(tree[1].children, 4);
        assert_eq!(tree[3].name, "leaf-1-1");
        assert_eq!(tree[3].parent, Some(1));
        assert_eq!(tree[10].name, "leaf-2-4");
        assert_eq!(tree[10].parent, Some(2));
        assert_eq!(deepest_level_len(&[2, 4]), 8);
        assert_eq!(plan(&[])?.len(), 1);
        assert_eq!(deepest_level_len(&[]), 1);
        Ok(())
    }

    #[test]
    fn a_middle_server_listens_for_leaves_and_dials_its_parent() -> anyhow::Result<()> {
        let plan = plan(&[1, 2])?;
        let text = config(&plan[1], Some(plan[0].leaf_port), 2_000_000);
        assert!(text.contains(&format!("listen: \"127.0.0.1:{}\"", plan[1].leaf_port)));
        assert!(text.contains(&format!("nats-leaf://127.0.0.1:{}", plan[0].leaf_port)));
        assert!(text.contains("max_payload: 2000000"));
        let deepest = config(&plan[2], Some(plan[1].leaf_port), 2_000_000);
        assert!(!deepest.contains(&plan[2].leaf_port.to_string()));
        Ok(())
    }
}
